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
#include "core/device_memory.h"
#include "core/error.h"
#include "core/rng.h"
#include "datasets/text_corpus.h"
#include "io/checkpoint.h"
#include "io/csv.h"
#include "io/interrupt.h"
#include "models/language_model.h"
#include "models/plan.h"
#include "models/slots.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "run/epoch_loop.h"
#include "run/plan_choice.h"
#include "run/resume_check.h"
#include "run/train_run.h"
#include "tasks/classifier/resume.h"
#include "tasks/language_model/lm_run.h"
#include "tasks/tasks.h"

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

namespace {

const std::vector<std::string>& metrics_header() {
  static const std::vector<std::string> h = {
      "model", "epoch", "steps", "lr", "train_loss", "valid_loss", "valid_ppl", "tokens_per_s"};
  return h;
}

}  // namespace

const StepReport& lm_array_step(Net& net, bool fused, Optimizer& optimizer,
                                std::span<const TensorView> grads, std::span<const float> clip,
                                const LmArrayForwardBackward& run) {
  float* params = reinterpret_cast<float*>(net.param_arena().data());
  const float* g = reinterpret_cast<const float*>(net.grad_arena().data());
  if (fused) {
    run({});
    if (!clip.empty()) {
      if (net.device() == Device::kCpu)
        clip_grad_norm_per_model(grads, net.B(), clip);
      else
        optimizer.clip_grad_norm_on_device(clip, const_cast<float*>(g));
    }
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

// What an array of a Transformer run reads: the corpus' splits in the run's streams, and the
// sizes its checkpoints record.
struct TransformerData {
  LmConfig config;
  BpttReader train, valid, test;
  LmCheckpointInfo info;
  int64_t steps_per_epoch = 0;
};

std::unique_ptr<TransformerData> transformer_data(const TrainOptions& o, const TextCorpus& corpus) {
  const LmConfig config{.vocab = corpus.vocab_size(),
                        .emsize = o.emsize,
                        .nhid = o.nhid,
                        .nlayers = o.nlayers,
                        .nhead = o.nhead,
                        .bptt = o.bptt,
                        .dropout = o.dropout.value_or(0.2f)};
  BpttReader train(batchify(corpus.train, o.batch_size, corpus.name + " train"), o.bptt);
  const int64_t windows = train.windows_per_pass();
  return std::make_unique<TransformerData>(TransformerData{
      .config = config,
      .train = std::move(train),
      .valid = BpttReader(
          batchify(corpus.valid, eval_streams(corpus.valid, o.batch_size, o.bptt, "validation"),
                   corpus.name + " valid"),
          o.bptt),
      .test =
          BpttReader(batchify(corpus.test, eval_streams(corpus.test, o.batch_size, o.bptt, "test"),
                              corpus.name + " test"),
                     o.bptt),
      .info = lm_info(o, config, corpus),
      .steps_per_epoch = o.iters_per_epoch > 0 ? std::min(o.iters_per_epoch, windows) : windows});
}

// --plan of the arrays of models `ids`: auto times the candidates on the first training window
// (each epoch seeks its own first window).
ExecutionPlan transformer_plan(const TrainOptions& o, TransformerData& d,
                               const std::vector<int64_t>& ids) {
  const ExecutionPlan plan = ExecutionPlan::parse(o.plan);
  // A device runs its arrays under plan fused (checked_device has refused any other but auto).
  if (plan.kind != ExecutionPlan::Kind::kAuto || o.device != "cpu")
    return o.device != "cpu" ? ExecutionPlan::fused() : plan;
  TokenWindow first = d.train.make_window();
  d.train.seek(0);
  d.train.next(first);
  return resolve_lm_plan(o.plan, o.model,
                         {.B = static_cast<int64_t>(ids.size()),
                          .streams = o.batch_size,
                          .seed = o.seed,
                          .model_ids = lm_model_streams(o, ids),
                          .config = d.config,
                          .threads = o.threads},
                         o.optimizer, std::move(first), o.memory_budget_bytes);
}

// A Transformer array of a `hfta train` run: epochs of --iters-per-epoch windows (each epoch
// reads on where the last stopped, around the pass), a metrics row per model and epoch with the
// validation loss, the test loss at the end.
class TransformerRun final : public LmRun {
 public:
  TransformerRun(const TrainOptions& o, std::unique_ptr<LanguageModel> model,
                 const std::vector<int64_t>& group, const LmRunHyper& hyper, TransformerData& data,
                 CsvWriter& metrics)
      : LmRun(o, model->net(), group, hyper, data.config, data.info),
        model_(std::move(model)),
        train_(data.train),
        valid_(data.valid),
        test_(data.test),
        steps_per_epoch_(data.steps_per_epoch),
        metrics_(metrics),
        window_(data.train.make_window()) {}

  // A search's array owns its data.
  void own(std::unique_ptr<TransformerData> data) { data_ = std::move(data); }

  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  void fill_checkpoint(Checkpoint& c, const ArrayProgress& p) override {
    LmRun::fill_checkpoint(c, p);
    c.plan = model_->plan().str();
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
      const std::vector<float>& losses = step(*model_, window_);
      ++done_;
      tokens_ += window_.streams * window_.length;
      after_step({.losses = losses});
    }
  }

  void end_epoch(int64_t epoch, const ArrayProgress& p, int64_t, double seconds) override {
    const double tokens_per_s = static_cast<double>(tokens_ * models()) / std::max(seconds, 1e-9);
    valid_loss_ = evaluate_lm(*model_, valid_);
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
    if (!trained) valid_loss_ = evaluate_lm(*model_, valid_);  // a finished run resumed
    if (model_->profiling()) fmt::print(stderr, "{}\n", model_->profile_report());
    const std::vector<double> test_loss = evaluate_lm(*model_, test_);
    for (size_t g = 0; g < group_.size(); ++g) {
      ModelResult& r = results[static_cast<size_t>(group_[g])];
      r.model = group_[g];
      r.final_train_loss = p.last_train_loss[g];
      r.valid_loss = valid_loss_[g];
      r.test_loss = test_loss[g];
      r.wall_seconds = wall;
      r.state_crc32 = p.state_crc32.at(g);
    }
  }

  ValidationScores validate() override {
    std::vector<double> loss = evaluate_lm(*model_, valid_);
    return {.accuracy = std::vector<double>(loss.size(), NAN), .loss = std::move(loss)};
  }

  Net& compact_model(std::span<const int64_t> keep) override {
    model_ = compact(*model_, keep);
    return model_->net();
  }
  void reinit_model(int64_t slot, int64_t stream) override { model_->reinit_slot(slot, stream); }

 private:
  std::unique_ptr<TransformerData> data_;  // before the references into it
  std::unique_ptr<LanguageModel> model_;
  BpttReader &train_, &valid_, &test_;
  int64_t steps_per_epoch_;
  CsvWriter& metrics_;
  TokenWindow window_;
  int64_t done_ = 0, tokens_ = 0;
  std::vector<double> valid_loss_;
};

// `hfta tune`'s data of a Transformer search: the corpus, read once; each array batchifies it
// for its own streams.
class TransformerSearchData final : public SearchData {
 public:
  explicit TransformerSearchData(const TrainOptions& o)
      : device_(checked_device(o.device, o.plan)),  // before the corpus is read
        corpus_(load_lm_corpus({.dataset = o.dataset,
                                .text_files = o.text_files,
                                .data_dir = o.data_dir,
                                .seed = o.seed,
                                .vocab = o.vocab,
                                .synthetic_tokens = o.synthetic_train_size * o.bptt})) {}

  std::unique_ptr<RunArray> make_array(const TrainOptions& o) override {
    const int64_t B = array_size(o.hyper);
    const LmRunHyper hyper = lm_run_hyper(o, B);
    std::vector<int64_t> ids(static_cast<size_t>(B));
    std::iota(ids.begin(), ids.end(), 0);
    auto data = transformer_data(o, corpus_);
    auto model = make_language_model(o.model, {.B = B,
                                               .streams = o.batch_size,
                                               .seed = o.seed,
                                               .model_ids = lm_model_streams(o, ids),
                                               .config = data->config,
                                               .plan = transformer_plan(o, *data, ids),
                                               .threads = o.threads,
                                               .device = device_});
    auto run = std::make_unique<TransformerRun>(o, std::move(model), ids, hyper, *data, metrics_);
    run->own(std::move(data));
    return run;
  }

  int64_t bytes_per_model(const TrainOptions& o) override {
    const auto data = transformer_data(o, corpus_);
    return static_cast<int64_t>(
        make_language_model(
            o.model, {.B = 1, .streams = o.batch_size, .seed = o.seed, .config = data->config})
            ->net()
            .arena_bytes());
  }

  std::string describe() const override {
    return fmt::format("{} (vocabulary {}, {} train tokens)", corpus_.name, corpus_.vocab_size(),
                       corpus_.train.size());
  }

 private:
  Device device_;
  TextCorpus corpus_;
  CsvWriter metrics_{"", metrics_header()};  // a search keeps no per-epoch rows
};

}  // namespace

std::unique_ptr<SearchData> load_transformer_search_data(const TrainOptions& options) {
  return std::make_unique<TransformerSearchData>(options);
}

TrainResult run_train_lm(const TrainOptions& o) {
  const auto start = Clock::now();
  HFTA_CHECK(o.epochs >= 1, "--epochs must be at least 1, got {}", o.epochs);
  HFTA_CHECK(o.batch_size >= 1, "--batch-size must be at least 1, got {}", o.batch_size);
  HFTA_CHECK(o.iters_per_epoch >= 0, "--iters-per-epoch must be >= 0, got {}", o.iters_per_epoch);
  const int64_t B = array_size(o.hyper);
  const LmRunHyper hyper = lm_run_hyper(o, B);
  const Device device = checked_device(o.device, o.plan);  // before the corpus is read
  prepare_runtime(o.threads, o.deterministic);

  const TextCorpus corpus = load_lm_corpus({.dataset = o.dataset,
                                            .text_files = o.text_files,
                                            .data_dir = o.data_dir,
                                            .seed = o.seed,
                                            .vocab = o.vocab,
                                            .synthetic_tokens = o.synthetic_train_size * o.bptt});
  const std::unique_ptr<TransformerData> data = transformer_data(o, corpus);
  const int64_t steps_per_epoch = data->steps_per_epoch;

  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  HFTA_CHECK(!ec, "cannot create --out directory {}: {}", o.out, ec.message());

  const std::vector<std::vector<int64_t>> groups = array_groups(B, o.serial);
  // One plan for every array (serial arrays of one model are fused).
  ExecutionPlan plan = transformer_plan(o, *data, groups[0]);

  TrainResult result = train_arrays(
      o,
      {.B = B,
       .metrics_columns = metrics_header(),
       .metrics_per_epoch = true,
       .check_resumable =
           [&](const Checkpoint& c, const std::string& path, const std::vector<int64_t>& ids) {
             check_lm_resume(o, c, path, data->info, hyper, ids);
             // The plan the checkpoint's array ran, rather than the one timed now.
             if (o.plan == "auto" && !c.plan.empty()) plan = ExecutionPlan::parse(c.plan);
           },
       .make_array =
           [&](const std::vector<int64_t>& ids, CsvWriter& metrics) {
             auto model = make_language_model(o.model, {.B = static_cast<int64_t>(ids.size()),
                                                        .streams = o.batch_size,
                                                        .seed = o.seed,
                                                        .model_ids = lm_model_streams(o, ids),
                                                        .config = data->config,
                                                        .plan = plan,
                                                        .threads = o.threads,
                                                        .device = device});
             return std::make_unique<TransformerRun>(o, std::move(model), ids, hyper, *data,
                                                     metrics);
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
  for (const char* c :
       {"train_loss", "valid_ppl", "test_loss", "test_ppl", "wall_s", "state_crc32"})
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
    row.push_back(r.state_crc32_text());
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
