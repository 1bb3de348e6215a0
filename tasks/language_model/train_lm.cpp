#include "tasks/language_model/train_lm.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "backend/cpu/runtime.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/rng.h"
#include "datasets/text_corpus.h"
#include "io/checkpoint.h"
#include "io/csv.h"
#include "io/interrupt.h"
#include "models/language_model.h"
#include "models/plan.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "run/epoch_loop.h"
#include "run/plan_choice.h"
#include "run/resume_check.h"
#include "run/train_run.h"
#include "tasks/classifier/resume.h"
#include "tasks/language_model/lm_run.h"

namespace hfta {

namespace {

// Streams for an evaluation split: at most --batch-size, and few enough that each stream holds
// one full window.
int64_t eval_streams(const std::vector<int32_t>& ids, int64_t batch_size, int64_t bptt,
                     const std::string& name) {
  const int64_t most = static_cast<int64_t>(ids.size()) / (bptt + 1);
  HFTA_CHECK(most >= 1,
             "the {} split has {} tokens, fewer than one window of --bptt {} + 1: lower --bptt "
             "or give more text",
             name, ids.size(), bptt);
  return std::min(batch_size, most);
}

std::string num(double v) { return fmt::format("{:.6g}", v); }

}  // namespace

// Shared with BERT's training (tasks/masked_lm/train_bert.cpp), declared in train_lm.h.
LmCheckpointInfo lm_info(const TrainOptions& o, const LmConfig& config, const TextCorpus& corpus) {
  return {.vocab = config.vocab,
          .vocab_hash = vocabulary_hash(corpus.dictionary),
          .emsize = config.emsize,
          .nhid = config.nhid,
          .nlayers = config.nlayers,
          .nhead = config.nhead,
          .bptt = config.bptt,
          .dropout = config.dropout,
          .dataset = o.dataset,
          .text_files = o.text_files,
          .data_dir = o.data_dir,
          .corpus = corpus.name};
}

void check_lm_resumable(const Checkpoint& c, const std::string& path, const TrainOptions& o,
                        const LmCheckpointInfo& now,
                        const std::map<std::string, std::vector<double>>& hyper,
                        const std::vector<int64_t>& ids) {
  HFTA_CHECK(c.lm.has_value(),
             "cannot resume from {}: it holds {} models, not a language model; choose another "
             "--out",
             path, c.model);
  const LmCheckpointInfo& was = *c.lm;
  if (c.model == o.model && (was.vocab != now.vocab || was.vocab_hash != now.vocab_hash))
    fail(
        "cannot resume from {}: it was trained on a vocabulary of {} words (hash {:016x}) from "
        "{}, but this command's corpus {} has {} words (hash {:016x}): resume with the same "
        "--dataset, --text-files (or --data-dir) and --seed, or choose another --out",
        path, was.vocab, was.vocab_hash, was.corpus, now.corpus, now.vocab, now.vocab_hash);
  ResumeExpectation expect{.model = o.model,
                           .optimizer = o.optimizer,
                           .seed = o.seed,
                           .batch_size = o.batch_size,
                           .model_ids = ids,
                           .epochs = o.epochs,
                           .hyper_exactly = true};
  for (const auto& [flag, sizes] : {std::pair{"--emsize", std::pair{was.emsize, now.emsize}},
                                    std::pair{"--nhid", std::pair{was.nhid, now.nhid}},
                                    std::pair{"--nlayers", std::pair{was.nlayers, now.nlayers}},
                                    std::pair{"--nhead", std::pair{was.nhead, now.nhead}},
                                    std::pair{"--bptt", std::pair{was.bptt, now.bptt}}})
    expect.settings.push_back({flag, std::to_string(sizes.first), std::to_string(sizes.second)});
  expect.settings.push_back({"--dropout", fmt::format("{:g}", static_cast<float>(was.dropout)),
                             fmt::format("{:g}", static_cast<float>(now.dropout))});
  for (const auto& [name, values] : hyper)
    expect.hyper[name] = std::vector<float>(values.begin(), values.end());
  check_resumable(c, path, expect);
}

namespace {

const std::vector<std::string>& metrics_header() {
  static const std::vector<std::string> h = {
      "model", "epoch", "steps", "lr", "train_loss", "valid_loss", "valid_ppl", "tokens_per_s"};
  return h;
}

}  // namespace

uint64_t vocabulary_hash(const Dictionary& d) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](unsigned char c) {
    h ^= c;
    h *= 1099511628211ull;
  };
  for (const std::string& w : d.words()) {
    for (char c : w) mix(static_cast<unsigned char>(c));
    mix(0);  // words never hold NUL: "ab","c" and "a","bc" differ
  }
  return h;
}

TextCorpus synthetic_text_corpus(int64_t vocab, int64_t train_tokens, uint64_t seed) {
  HFTA_CHECK(vocab >= 2, "--vocab must be at least 2 for --dataset synthetic-text, got {}", vocab);
  HFTA_CHECK(train_tokens >= 2, "synthetic-text needs at least 2 training tokens, got {}",
             train_tokens);
  TextCorpus c;
  c.name = fmt::format("synthetic-text (V {}, seed {})", vocab, seed);
  c.dictionary.add(kEos);
  for (int64_t w = 1; w < vocab; ++w) c.dictionary.add(fmt::format("w{}", w));
  auto draw = [&](uint64_t stream, int64_t n) {
    RngStream rng = RngStream::for_model(seed, static_cast<int64_t>(stream), kRngData);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t& id : ids) id = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
    return ids;
  };
  c.train = draw(0, train_tokens);
  c.valid = draw(1, 16384);
  c.test = draw(2, 16384);
  return c;
}

TextCorpus load_lm_corpus(const LmCorpusSource& s) {
  if (s.dataset == "wikitext2") {
    HFTA_CHECK(!s.data_dir.empty(),
               "--dataset wikitext2 needs --data-dir, the directory of wiki.train.tokens, "
               "wiki.valid.tokens and wiki.test.tokens");
    return load_wikitext2(s.data_dir);
  }
  if (s.dataset == "synthetic-text" || s.dataset == "synthetic")
    return synthetic_text_corpus(s.vocab, s.synthetic_tokens, s.seed);
  HFTA_CHECK(s.dataset == "text",
             "--dataset {} holds no text: a language model reads --dataset text, wikitext2 or "
             "synthetic-text",
             s.dataset);
  HFTA_CHECK(!s.text_files.empty(),
             "--dataset text needs --text-files A,B,... (files or directories of plain UTF-8 "
             "text, e.g. /usr/share/games/fortunes)");
  return load_text_files(split_paths(s.text_files), {.seed = s.seed});
}

std::vector<double> evaluate_lm(LanguageModel& m, BpttReader& reader) {
  std::vector<double> total(static_cast<size_t>(m.B()), 0.0);
  TokenWindow w = reader.make_window();
  int64_t tokens = 0;
  reader.restart();
  while (reader.next(w)) {
    m.forward(w.inputs(), w.targets(), false);
    for (int64_t b = 0; b < m.B(); ++b)
      total[static_cast<size_t>(b)] +=
          static_cast<double>(m.losses()[static_cast<size_t>(b)]) * static_cast<double>(w.length);
    tokens += w.length;
  }
  for (double& t : total) t /= static_cast<double>(std::max<int64_t>(1, tokens));
  return total;
}

LmConfig lm_config_of(const LmCheckpointInfo& info) {
  return {.vocab = info.vocab,
          .emsize = info.emsize,
          .nhid = info.nhid,
          .nlayers = info.nlayers,
          .nhead = info.nhead,
          .bptt = info.bptt,
          .dropout = static_cast<float>(info.dropout)};
}

void check_lm_checkpoint(const Checkpoint& c, const std::string& path) {
  HFTA_CHECK(c.lm.has_value(), "{} holds {} models, not a language model", path, c.model);
  for (const CheckpointTensor& t : c.tensors) {
    if (t.name.find('#') != std::string::npos) continue;  // optimizer state: checked by restore
    // The embedding (BERT: its token table) is [B, V, D]; the decoder's weight [B, D, V] (rows
    // layout: in, out) and bias [B, V].
    int axis = 0;
    if (t.name.ends_with(".encoder.weight") || t.name.ends_with(".embedding.token.weight"))
      axis = 1;
    // BERT's output layer (models/zoo_bert.cpp) is the decoder's counterpart.
    if (t.name.ends_with(".decoder.weight") || t.name.ends_with(".decoder.bias") ||
        t.name.ends_with(".output.weight") || t.name.ends_with(".output.bias"))
      axis = t.shape.rank() - 1;
    if (axis >= 1 && t.shape[axis] != c.lm->vocab)
      fail(
          "token ids out of range in checkpoint {}: its header gives a vocabulary of {} words but "
          "tensor {} has shape {} ({} where the vocabulary belongs): the file does not match its "
          "own header (edited, or written by another hfta); use the run's own checkpoint or "
          "train again",
          path, c.lm->vocab, t.name, t.shape.str(), t.shape[axis]);
  }
}

void fill_lm_checkpoint(Checkpoint& c, const TrainOptions& o, const LmConfig& config,
                        const std::vector<int64_t>& group,
                        const std::map<std::string, std::vector<double>>& hyper,
                        const LmProgress& p, const Net& net, const Optimizer& optimizer,
                        const LmCheckpointInfo& info) {
  c.model = o.model;
  c.sample_shape = {config.bptt};
  c.num_classes = config.vocab;
  c.dropout = config.dropout;
  c.no_decay_norm_bias = o.no_decay_norm_bias;
  c.B = static_cast<int64_t>(group.size());
  c.seed = o.seed;
  c.batch_size = o.batch_size;
  c.model_ids = group;
  c.optimizer = o.optimizer;
  c.hyper = hyper;
  c.epoch = p.epochs_done;
  c.batch_in_epoch = p.batch_in_epoch;
  c.step = p.step;
  c.epoch_loss_sum = p.epoch_loss;
  c.last_train_loss = p.last_train_loss;
  const auto steps = optimizer.steps();
  c.optimizer_steps.assign(steps.begin(), steps.end());
  const auto skips = optimizer.skip_counts();
  c.skipped_steps.assign(skips.begin(), skips.end());
  c.lm = info;
  capture_tensors(net, &optimizer, c.tensors);
}

LmProgress restore_lm_checkpoint(const Checkpoint& c, Net& net, Optimizer& optimizer) {
  restore_tensors(c, net, &optimizer);
  return {.step = c.step,
          .epochs_done = c.epoch,
          .batch_in_epoch = c.batch_in_epoch,
          .epoch_loss = c.epoch_loss_sum,
          .last_train_loss = c.last_train_loss};
}

const StepReport& lm_array_step(Net& net, bool fused, Optimizer& optimizer,
                                std::span<const TensorView> grads, std::span<const float> clip,
                                const LmArrayForwardBackward& run) {
  float* params = reinterpret_cast<float*>(net.param_arena().data());
  const float* g = reinterpret_cast<const float*>(net.grad_arena().data());
  if (fused) {
    run({});
    if (!clip.empty()) clip_grad_norm_per_model(grads, net.B(), clip);
    return optimizer.step(params, g);
  }
  run([&](int64_t first, int64_t count) {
    if (!clip.empty()) clip_grad_norm_models(grads, net.B(), clip, first, count);
    optimizer.step_models(params, g, first, count);
  });
  return optimizer.finish_model_steps();
}

const StepReport& lm_train_step(LanguageModel& model, Optimizer& optimizer,
                                std::span<const TensorView> grads, std::span<const float> clip,
                                TokenWindow& window) {
  return lm_array_step(model.net(), model.layout().is_fused(), optimizer, grads, clip,
                       [&](const LanguageModel::AfterBackward& after_backward) {
                         model.train_step(window.inputs(), window.targets(), after_backward);
                       });
}

ExecutionPlan resolve_lm_plan(const std::string& asked, const std::string& model,
                              const LanguageModelSpec& spec, const std::string& optimizer,
                              TokenWindow window, int64_t memory_budget_bytes) {
  const ExecutionPlan plan = ExecutionPlan::parse(asked);
  if (plan.kind != ExecutionPlan::Kind::kAuto) return plan;
  // The window is the candidates' own copy: the caller's reader goes on.
  auto shared_window = std::make_shared<TokenWindow>(std::move(window));
  PlanTrialBuilder build = [&](const ExecutionPlan& candidate) {
    LanguageModelSpec s = spec;
    s.plan = candidate;
    auto lm = std::shared_ptr<LanguageModel>(make_language_model(model, s));
    // A first step records the groups' nets, whose activations are most of a plan's arenas.
    lm->train_step(shared_window->inputs(), shared_window->targets());
    struct State {
      std::unique_ptr<Optimizer> optimizer;
      std::vector<TensorView> grads;
      std::vector<float> clip;
    };
    auto state = std::make_shared<State>();
    return PlanTrialRun{
        .arena_bytes = static_cast<double>(lm->arena_bytes()),
        .step = [lm, state, shared_window, &optimizer] {
          Net& net = lm->net();
          if (!state->optimizer) {  // at the first step: a candidate over the budget makes none
            state->optimizer =
                make_optimizer(optimizer, net, resolve_hyper(optimizer, {}, lm->B()));
            for (const Param& p : net.params()) state->grads.push_back(p.grad);
            state->clip.assign(static_cast<size_t>(lm->B()), 0.25f);
          }
          lm_train_step(*lm, *state->optimizer, state->grads, state->clip, *shared_window);
        }};
  };
  const LmConfig& c = spec.config;
  const std::string configuration = fmt::format(
      "{} vocab {} emsize {} nhid {} nlayers {} nhead {} bptt {} dropout {} | B {} | streams {} | "
      "{}",
      model, c.vocab, c.emsize, c.nhid, c.nlayers, c.nhead, c.bptt, c.dropout, spec.B, spec.streams,
      optimizer);
  return resolve_plan(plan, spec.B, configuration, model, build, memory_budget_bytes,
                      [](const std::string& line) { fmt::print(stderr, "{}\n", line); })
      .plan;
}

namespace {

// A Transformer array of a `hfta train` run: epochs of --iters-per-epoch windows (each epoch
// reads on where the last stopped, around the pass), a metrics row per model and epoch with the
// validation loss, the test loss at the end.
class TransformerRun final : public LmRun {
 public:
  TransformerRun(const TrainOptions& o, std::unique_ptr<LanguageModel> model,
                 const std::vector<int64_t>& group, const LmRunHyper& hyper, const LmConfig& config,
                 const LmCheckpointInfo& info, BpttReader& train, BpttReader& valid,
                 BpttReader& test, int64_t steps_per_epoch, CsvWriter& metrics)
      : LmRun(o, model->net(), group, hyper, config, info),
        owned_(std::move(model)),
        model_(*owned_),
        train_(train),
        valid_(valid),
        test_(test),
        steps_per_epoch_(steps_per_epoch),
        metrics_(metrics),
        window_(train.make_window()) {}

  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  void fill_checkpoint(Checkpoint& c, const ArrayProgress& p) override {
    LmRun::fill_checkpoint(c, p);
    c.plan = model_.plan().str();
  }

  void begin_epoch(int64_t epoch, int64_t done) override {
    set_epoch_lr(epoch);
    done_ = done;
    tokens_ = 0;
    const int64_t windows = train_.windows_per_pass();
    train_.seek((lm_epoch_first_window(epoch, steps_per_epoch_, windows) + done) % windows);
  }

  void train_epoch(const std::function<void(const TrainedStepView&)>& after_step) override {
    while (done_ < steps_per_epoch_) {
      if (!train_.next(window_)) continue;  // the end of the pass: next() rewound, read window 0
      const std::vector<float>& losses = step(model_, window_);
      ++done_;
      tokens_ += window_.streams * window_.length;
      after_step({.losses = losses});
    }
  }

  void end_epoch(int64_t epoch, const ArrayProgress& p, int64_t, double seconds) override {
    const double tokens_per_s = static_cast<double>(tokens_ * models()) / std::max(seconds, 1e-9);
    valid_loss_ = evaluate_lm(model_, valid_);
    for (size_t g = 0; g < group_.size(); ++g) {
      const int64_t id = group_[g];
      const float lr = this->lr()[g];
      const double tl = p.last_train_loss[g], vl = valid_loss_[g];
      metrics_.row({std::to_string(id), std::to_string(epoch + 1), std::to_string(done_), num(lr),
                    num(tl), num(vl), num(std::exp(vl)), num(tokens_per_s)});
      fmt::print(
          "model {} epoch {}: lr {:g}, train loss {:.3f}, valid loss {:.3f}, valid ppl {:.1f}, "
          "{:.0f} tokens/s (array)\n",
          id, epoch + 1, lr, tl, vl, std::exp(vl), tokens_per_s);
    }
  }

  void finish(const ArrayProgress& p, bool trained, double wall,
              std::vector<ModelResult>& results) override {
    if (!trained) valid_loss_ = evaluate_lm(model_, valid_);  // a finished run resumed
    if (model_.profiling()) fmt::print(stderr, "{}\n", model_.profile_report());
    const std::vector<double> test_loss =
        o_.search_trial ? std::vector<double>(group_.size(), NAN) : evaluate_lm(model_, test_);
    for (size_t g = 0; g < group_.size(); ++g) {
      ModelResult& r = results[static_cast<size_t>(group_[g])];
      r.model = group_[g];
      r.final_train_loss = p.last_train_loss[g];
      r.valid_loss = valid_loss_[g];
      r.test_loss = test_loss[g];
      r.wall_seconds = wall;
    }
  }

 private:
  std::unique_ptr<LanguageModel> owned_;
  LanguageModel& model_;
  BpttReader &train_, &valid_, &test_;
  int64_t steps_per_epoch_;
  CsvWriter& metrics_;
  TokenWindow window_;
  int64_t done_ = 0, tokens_ = 0;
  std::vector<double> valid_loss_;
};

}  // namespace

TrainResult run_train_lm(const TrainOptions& o) {
  const auto start = Clock::now();
  HFTA_CHECK(o.epochs >= 1, "--epochs must be at least 1, got {}", o.epochs);
  HFTA_CHECK(o.batch_size >= 1, "--batch-size must be at least 1, got {}", o.batch_size);
  HFTA_CHECK(o.iters_per_epoch >= 0, "--iters-per-epoch must be >= 0, got {}", o.iters_per_epoch);
  const int64_t B = array_size(o.hyper);
  const LmRunHyper hyper = lm_run_hyper(o, B);
  prepare_runtime(o.threads);

  const TextCorpus corpus = load_lm_corpus({.dataset = o.dataset,
                                            .text_files = o.text_files,
                                            .data_dir = o.data_dir,
                                            .seed = o.seed,
                                            .vocab = o.vocab,
                                            .synthetic_tokens = o.synthetic_train_size * o.bptt});
  LmConfig config{.vocab = corpus.vocab_size(),
                  .emsize = o.emsize,
                  .nhid = o.nhid,
                  .nlayers = o.nlayers,
                  .nhead = o.nhead,
                  .bptt = o.bptt,
                  .dropout = o.dropout.value_or(0.2f)};
  BpttReader train(batchify(corpus.train, o.batch_size, corpus.name + " train"), o.bptt);
  BpttReader valid(
      batchify(corpus.valid, eval_streams(corpus.valid, o.batch_size, o.bptt, "validation"),
               corpus.name + " valid"),
      o.bptt);
  BpttReader test(batchify(corpus.test, eval_streams(corpus.test, o.batch_size, o.bptt, "test"),
                           corpus.name + " test"),
                  o.bptt);
  const LmCheckpointInfo info = lm_info(o, config, corpus);

  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  HFTA_CHECK(!ec, "cannot create --out directory {}: {}", o.out, ec.message());

  const std::vector<std::vector<int64_t>> groups = array_groups(B, o.serial);
  // One plan for every array (serial arrays of one model are fused); auto times the candidates
  // on the first training window (each epoch seeks its own first window).
  ExecutionPlan plan = ExecutionPlan::parse(o.plan);
  if (plan.kind == ExecutionPlan::Kind::kAuto) {
    TokenWindow first = train.make_window();
    train.next(first);
    plan = resolve_lm_plan(o.plan, o.model,
                           {.B = static_cast<int64_t>(groups[0].size()),
                            .streams = o.batch_size,
                            .seed = o.seed,
                            .model_ids = lm_model_streams(o, groups[0]),
                            .config = config,
                            .threads = o.threads},
                           o.optimizer, std::move(first), o.memory_budget_bytes);
  }
  const int64_t steps_per_epoch = o.iters_per_epoch > 0
                                      ? std::min(o.iters_per_epoch, train.windows_per_pass())
                                      : train.windows_per_pass();

  TrainResult result = train_arrays(
      o,
      {.B = B,
       .metrics_columns = metrics_header(),
       .metrics_per_epoch = true,
       .check_resumable =
           [&](const Checkpoint& c, const std::string& path, const std::vector<int64_t>& ids) {
             check_lm_resume(o, c, path, info, hyper, ids);
             // The plan the checkpoint's array ran, rather than the one timed now.
             if (o.plan == "auto" && !c.plan.empty()) plan = ExecutionPlan::parse(c.plan);
           },
       .make_array =
           [&](const std::vector<int64_t>& ids, CsvWriter& metrics) {
             auto model = make_language_model(o.model, {.B = static_cast<int64_t>(ids.size()),
                                                        .streams = o.batch_size,
                                                        .seed = o.seed,
                                                        .model_ids = lm_model_streams(o, ids),
                                                        .config = config,
                                                        .plan = plan,
                                                        .threads = o.threads});
             return std::make_unique<TransformerRun>(o, std::move(model), ids, hyper, config, info,
                                                     train, valid, test, steps_per_epoch, metrics);
           },
       .announce =
           [&] {
             fmt::print("{}\n", cpu::describe_runtime());
             fmt::print(
                 "training {} {} model{} ({}) on {}: vocabulary {}, {} / {} / {} train / valid / "
                 "test "
                 "tokens, {} streams x bptt {}, {} steps per epoch, {} epoch{}\n",
                 B, o.model, B == 1 ? "" : "s",
                 o.serial ? "serial: one after another" : fmt::format("fused, plan {}", plan.str()),
                 corpus.name, corpus.vocab_size(), corpus.train.size(), corpus.valid.size(),
                 corpus.test.size(), o.batch_size, o.bptt, steps_per_epoch, o.epochs,
                 o.epochs == 1 ? "" : "s");
             std::fflush(stdout);
           },
       .announce_checkpoints = true});
  result.wall_seconds = seconds_since(start);

  std::vector<std::string> header = hyper.summary_header();
  for (const char* c : {"train_loss", "valid_ppl", "test_loss", "test_ppl", "wall_s"})
    header.emplace_back(c);
  CsvWriter summary(o.out + "/summary.csv", header);
  for (int64_t b = 0; b < B; ++b) {
    const size_t i = static_cast<size_t>(b);
    const ModelResult& r = result.models[i];
    std::vector<std::string> row = hyper.summary_row(b);
    row.push_back(num(r.final_train_loss));
    row.push_back(num(std::exp(r.valid_loss)));
    row.push_back(num(r.test_loss));
    row.push_back(num(std::exp(r.test_loss)));
    row.push_back(num(r.wall_seconds));
    summary.row(row);
  }
  std::vector<double> valid_ppl;
  for (const ModelResult& r : result.models) valid_ppl.push_back(std::exp(r.valid_loss));
  const auto best = std::min_element(valid_ppl.begin(), valid_ppl.end());
  fmt::print(
      "done in {:.1f} s; vocabulary {}; best: model {} with validation perplexity {:.1f}; "
      "results in {}/summary.csv and {}/metrics.csv\n",
      result.wall_seconds, corpus.vocab_size(), best - valid_ppl.begin(), *best, o.out, o.out);
  return result;
}

LmEvaluation evaluate_lm_checkpoint(const Checkpoint& c, const std::string& path,
                                    const LmEvalOptions& options) {
  check_lm_checkpoint(c, path);
  const LmCheckpointInfo& info = *c.lm;
  LmCorpusSource source{
      .dataset = options.dataset.empty() ? info.dataset : options.dataset,
      .text_files = options.text_files.empty() ? info.text_files : options.text_files,
      .data_dir = options.data_dir.empty() ? info.data_dir : options.data_dir,
      .seed = c.seed,
      .vocab = info.vocab,
      .synthetic_tokens = 2};  // the test split does not depend on it
  const TextCorpus corpus = load_lm_corpus(source);
  const uint64_t hash = vocabulary_hash(corpus.dictionary);
  HFTA_CHECK(corpus.vocab_size() == info.vocab && hash == info.vocab_hash,
             "{} was trained on a vocabulary of {} words (hash {:016x}) from {}, but {} has {} "
             "words (hash {:016x}): evaluate it on the corpus it was trained on (--dataset {}{})",
             path, info.vocab, info.vocab_hash, info.corpus, corpus.name, corpus.vocab_size(), hash,
             info.dataset,
             info.text_files.empty() ? "" : fmt::format(" --text-files {}", info.text_files));
  const int64_t streams =
      eval_streams(corpus.test, std::max<int64_t>(1, c.batch_size), info.bptt, "test");
  const LmConfig config = lm_config_of(info);
  auto model = make_language_model(
      c.model,
      {.B = c.B, .streams = streams, .seed = c.seed, .model_ids = c.model_ids, .config = config});
  try {
    restore_tensors(c, model->net(), nullptr);
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
  BpttReader test(batchify(corpus.test, streams, corpus.name + " test"), info.bptt);
  LmEvaluation e;
  e.corpus = corpus.name;
  e.tokens = streams * test.tokens_per_pass();
  e.loss = evaluate_lm(*model, test);
  for (double l : e.loss) e.perplexity.push_back(std::exp(l));
  return e;
}

}  // namespace hfta
