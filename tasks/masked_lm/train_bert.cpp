#include "tasks/masked_lm/train_bert.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <optional>

#include "backend/cpu/runtime.h"
#include "core/clock.h"
#include "core/device_memory.h"
#include "core/error.h"
#include "datasets/bert_data.h"
#include "datasets/text_corpus.h"
#include "io/checkpoint.h"
#include "io/csv.h"
#include "io/interrupt.h"
#include "models/masked_lm.h"
#include "models/slots.h"
#include "optim/optimizer.h"
#include "run/epoch_loop.h"
#include "run/export.h"
#include "run/hyper.h"
#include "run/plan_choice.h"
#include "run/train_run.h"
#include "tasks/classifier/resume.h"
#include "tasks/language_model/lm_run.h"
#include "tasks/language_model/train_lm.h"
#include "tasks/masked_lm/export_bert.h"
#include "tasks/tasks.h"

namespace hfta {

namespace {

void check_bert_options(const TrainOptions& o) {
  HFTA_CHECK(o.bptt >= 1 && o.bptt <= kBertMaxPositions,
             "--bptt must be in [1, {}] for BERT (its position table), got {}", kBertMaxPositions,
             o.bptt);
}

// The validation and test masks: fixed per window, different from every training step's.
constexpr uint64_t kEvalSeedMix = 0x5EA1ED0000000001ull;

TextCorpus load_bert_corpus(const TrainOptions& o) {
  if (o.dataset == "wikitext2") {
    HFTA_CHECK(!o.data_dir.empty(),
               "--dataset wikitext2 needs --data-dir, the directory of wiki.train.tokens, "
               "wiki.valid.tokens and wiki.test.tokens");
    return load_wikitext2(o.data_dir);
  }
  HFTA_CHECK(o.dataset == "text", "--model {} reads text: use --dataset text or wikitext2",
             o.model);
  HFTA_CHECK(!o.text_files.empty(),
             "--dataset text needs --text-files A,B,... (files or directories of plain UTF-8 "
             "text, e.g. /usr/share/games/fortunes)");
  return load_text_files(split_paths(o.text_files), {.seed = o.seed});
}

// An evaluation split: at most --batch-size streams, few enough that each holds one window.
MlmReader eval_reader(const TextCorpus& corpus, const std::string& which, int64_t batch_size,
                      int64_t bptt, const MlmMasking& masking) {
  const std::vector<int32_t>& ids = corpus.split(which);
  const int64_t most = static_cast<int64_t>(ids.size()) / bptt;
  HFTA_CHECK(most >= 1,
             "the {} split of {} has {} tokens, fewer than one window of --bptt {}: lower --bptt "
             "or give more text",
             which, corpus.name, ids.size(), bptt);
  return MlmReader(batchify(ids, std::min(batch_size, most), corpus.name + " " + which), bptt,
                   masking);
}

struct EvalResult {
  std::vector<double> loss, accuracy;
};

// Per model: the mean loss per masked position over the whole split, and the accuracy there.
EvalResult evaluate(MaskedLm& m, const MlmReader& reader, uint64_t seed) {
  const size_t B = static_cast<size_t>(m.B());
  EvalResult r{std::vector<double>(B, 0.0), std::vector<double>(B, 0.0)};
  MlmWindow w = reader.make_window();
  int64_t predicted = 0;
  for (int64_t i = 0; i < reader.windows(); ++i) {
    reader.fill(i, seed ^ kEvalSeedMix, static_cast<uint64_t>(i), w);
    m.forward(w.batch(), false);
    const std::vector<int64_t> correct = m.correct();
    for (size_t b = 0; b < B; ++b) {
      r.loss[b] += static_cast<double>(m.losses()[b]) * static_cast<double>(m.predicted());
      r.accuracy[b] += static_cast<double>(correct[b]);
    }
    predicted += m.predicted();
  }
  for (size_t b = 0; b < B; ++b) {
    r.loss[b] /= static_cast<double>(std::max<int64_t>(1, predicted));
    r.accuracy[b] /= static_cast<double>(std::max<int64_t>(1, predicted));
  }
  return r;
}

std::string num(double v) { return fmt::format("{:.6g}", v); }

// What an array of a BERT run reads: the corpus' splits in the run's streams with their masking,
// and the sizes its checkpoints record.
struct BertData {
  LmConfig config;
  int64_t predicted_per_stream = 0;
  MlmReader train, valid, test;
  LmCheckpointInfo info;
  int64_t steps_per_epoch = 0;
};

std::unique_ptr<BertData> bert_data(const TrainOptions& o, const TextCorpus& corpus) {
  // Masked-only output (models/masked_lm.h): K output rows per stream, and masks capped to fit.
  const int64_t predicted_per_stream = mlm_predicted_per_stream(o.bptt, o.batch_size);
  const MlmMasking masking{.words = corpus.vocab_size(),
                           .eos = corpus.dictionary.find(kEos),
                           .max_per_stream = predicted_per_stream};
  const LmConfig config{.vocab = corpus.vocab_size() + 1,  // + the mask token
                        .emsize = o.emsize,
                        .nhid = o.nhid,
                        .nlayers = o.nlayers,
                        .nhead = o.nhead,
                        .bptt = o.bptt,
                        .dropout = o.dropout.value_or(0.1f)};
  MlmReader train(batchify(corpus.train, o.batch_size, corpus.name + " train"), o.bptt, masking);
  const int64_t windows = train.windows();
  return std::make_unique<BertData>(BertData{
      .config = config,
      .predicted_per_stream = predicted_per_stream,
      .train = std::move(train),
      .valid = eval_reader(corpus, "valid", o.batch_size, o.bptt, masking),
      .test = eval_reader(corpus, "test", o.batch_size, o.bptt, masking),
      // The checkpoint header of the Transformer LM's (tasks/language_model/train_lm.h): vocab
      // counts the mask.
      .info = lm_info(o, config, corpus),
      .steps_per_epoch = o.iters_per_epoch > 0 ? std::min(o.iters_per_epoch, windows) : windows});
}

// The array of models `ids` (`plan`: a resumed checkpoint's, else --plan, auto timed on the first
// training window).
std::unique_ptr<MaskedLm> make_bert_array(const TrainOptions& o, const BertData& d,
                                          const std::vector<int64_t>& ids,
                                          const std::optional<ExecutionPlan>& plan) {
  LanguageModelSpec spec{.B = static_cast<int64_t>(ids.size()),
                         .streams = o.batch_size,
                         .seed = o.seed,
                         .model_ids = lm_model_streams(o, ids),
                         .config = d.config,
                         .device = parse_device(o.device)};
  if (spec.device != Device::kCpu) {
    spec.plan = ExecutionPlan::fused();  // the one plan a device array runs (checked_device)
  } else if (plan) {
    spec.plan = *plan;
  } else {
    MlmWindow w = d.train.make_window();
    d.train.fill(0, o.seed, 0, w);
    spec.plan = resolve_mlm_plan(o.plan, o.model, spec, d.predicted_per_stream, o.optimizer, w,
                                 o.memory_budget_bytes);
  }
  return make_masked_lm(o.model, spec, d.predicted_per_stream);
}

}  // namespace

ExecutionPlan resolve_mlm_plan(const std::string& asked, const std::string& model,
                               const LanguageModelSpec& spec, int64_t predicted_per_stream,
                               const std::string& optimizer, MlmWindow window,
                               int64_t memory_budget_bytes) {
  const ExecutionPlan plan = ExecutionPlan::parse(asked);
  if (plan.kind != ExecutionPlan::Kind::kAuto) return plan;
  // The window is the candidates' own copy: the caller's reader goes on.
  auto shared_window = std::make_shared<MlmWindow>(std::move(window));
  PlanTrialBuilder build = [&](const ExecutionPlan& candidate) {
    LanguageModelSpec s = spec;
    s.plan = candidate;
    auto mlm = std::shared_ptr<MaskedLm>(make_masked_lm(model, s, predicted_per_stream));
    // A first step records the groups' nets, whose activations are most of a plan's arenas.
    mlm->train_step(shared_window->batch());
    struct State {
      std::unique_ptr<Optimizer> optimizer;
      std::vector<TensorView> grads;
    };
    auto state = std::make_shared<State>();
    return PlanTrialRun{
        .arena_bytes = static_cast<double>(mlm->arena_bytes()),
        .step = [mlm, state, shared_window, &optimizer] {
          Net& net = mlm->net();
          if (!state->optimizer)  // at the first step: a candidate over the budget makes none
            state->optimizer =
                make_optimizer(optimizer, net, resolve_hyper(optimizer, {}, mlm->B()));
          lm_array_step(net, mlm->layout().is_fused(), *state->optimizer, state->grads, {},
                        [&](const MaskedLm::AfterBackward& after_backward) {
                          mlm->train_step(shared_window->batch(), after_backward);
                        });
        }};
  };
  const LmConfig& c = spec.config;
  const std::string configuration = fmt::format(
      "{} vocab {} emsize {} nhid {} nlayers {} nhead {} bptt {} dropout {} predicted {} | B {} | "
      "streams {} | {}",
      model, c.vocab, c.emsize, c.nhid, c.nlayers, c.nhead, c.bptt, c.dropout, predicted_per_stream,
      spec.B, spec.streams, optimizer);
  return resolve_plan(plan, spec.B, configuration, model, build, memory_budget_bytes,
                      [](const std::string& line) { fmt::print(stderr, "{}\n", line); })
      .plan;
}

void apply_bert_defaults(TrainOptions& o, const std::function<bool(const char*)>& given) {
  if (!given("--emsize")) o.emsize = 512;
  if (!given("--nhid")) o.nhid = 2048;
  if (!given("--nlayers")) o.nlayers = 8;
  if (!given("--nhead")) o.nhead = 8;
  if (!given("--bptt")) o.bptt = 32;
  if (!given("--batch-size")) o.batch_size = 32;
  if (!given("--optimizer")) o.optimizer = "adadelta";
  if (!given("--clip")) o.clip.clear();
  if (!given("--lr-step-size")) o.lr_step_size = {3};
  if (!given("--lr-gamma")) o.lr_gamma = {0.25f};
}

namespace {

// A BERT array of a `hfta train` run: epochs of masked windows (a window's tokens and mask follow
// from the epoch and step alone), a metrics row per model and epoch with the validation
// masked-LM loss and accuracy; at the end the test split's and each model's safetensors.
class BertRun final : public LmRun {
 public:
  BertRun(const TrainOptions& o, std::unique_ptr<MaskedLm> model, const std::vector<int64_t>& group,
          const LmRunHyper& hyper, const BertData& data, CsvWriter& metrics)
      : LmRun(o, model->net(), group, hyper, data.config, data.info),
        model_(std::move(model)),
        config_(data.config),
        train_(data.train),
        valid_reader_(data.valid),
        test_(data.test),
        steps_per_epoch_(data.steps_per_epoch),
        metrics_(metrics),
        window_(data.train.make_window()) {}

  // A search's array owns its data.
  void own(std::unique_ptr<BertData> data) { data_ = std::move(data); }

  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  void fill_checkpoint(Checkpoint& c, const ArrayProgress& p) override {
    LmRun::fill_checkpoint(c, p);
    c.plan = model_->plan().str();
  }

  void begin_epoch(int64_t epoch, int64_t done) override {
    set_epoch_lr(epoch);
    epoch_ = epoch;
    done_ = done;
    tokens_ = 0;
  }

  void train_epoch(const std::function<void(const TrainedStepView&)>& after_step) override {
    const int64_t first = lm_epoch_first_window(epoch_, steps_per_epoch_, train_.windows());
    for (; done_ < steps_per_epoch_;) {
      // Window `done_` of the epoch, masked by the run's global step: a new mask every epoch.
      train_.fill((first + done_) % train_.windows(), o_.seed,
                  static_cast<uint64_t>(epoch_ * steps_per_epoch_ + done_), window_);
      const std::vector<float>& losses = step(*model_, window_.batch());
      ++done_;
      tokens_ += window_.streams * window_.length;
      after_step({.losses = losses});
    }
  }

  void end_epoch(int64_t epoch, const ArrayProgress& p, int64_t, double seconds) override {
    const double tokens_per_s = static_cast<double>(tokens_ * models()) / std::max(seconds, 1e-9);
    valid_eval_ = evaluate(*model_, valid_reader(), o_.seed);
    for (size_t g = 0; g < group_.size(); ++g) {
      const int64_t id = group_[g];
      const float lr = this->lr()[g];
      const double tl = p.last_train_loss[g];
      metrics_.row({std::to_string(id), std::to_string(epoch + 1), std::to_string(steps_per_epoch_),
                    num(lr), num(tl), num(valid_eval_.loss[g]), num(valid_eval_.accuracy[g]),
                    num(tokens_per_s)});
      fmt::print(
          "model {} epoch {}: lr {:g}, train loss {:.3f}, valid MLM loss {:.3f}, valid MLM "
          "accuracy {:.2f}%, {:.0f} tokens/s (array)\n",
          id, epoch + 1, lr, tl, valid_eval_.loss[g], 100.0 * valid_eval_.accuracy[g],
          tokens_per_s);
    }
  }

  void finish(const ArrayProgress& p, bool trained, double wall,
              std::vector<ModelResult>& results) override {
    if (!trained)
      valid_eval_ = evaluate(*model_, valid_reader(), o_.seed);  // a finished run resumed
    const size_t G = group_.size();
    const EvalResult t = evaluate(*model_, test_, o_.seed);
    for (size_t g = 0; g < G; ++g) {
      const int64_t id = group_[g];
      ModelResult& r = results[static_cast<size_t>(id)];
      r.model = id;
      r.final_train_loss = p.last_train_loss[g];
      r.valid_loss = valid_eval_.loss[g];
      r.valid_accuracy = valid_eval_.accuracy[g];
      r.test_loss = t.loss[g];
      r.test_accuracy = t.accuracy[g];
      r.wall_seconds = wall;
      r.state_crc32 = p.state_crc32.at(g);
      // Each model's trained weights with the example's state_dict names (as `hfta export`).
      write_safetensors(
          fmt::format("{}/model{}.safetensors", o_.out, id),
          state_dict(*net_, static_cast<int64_t>(g)),
          bert_export_metadata(o_.model, config_,
                               fmt::format("hfta train, model {}, {} epochs", id, o_.epochs)));
    }
  }

  Net& compact_model(std::span<const int64_t> keep) override {
    model_ = compact(*model_, keep);
    return model_->net();
  }
  void reinit_model(int64_t slot, int64_t stream) override { model_->reinit_slot(slot, stream); }

  ValidationScores validate() override {
    EvalResult r = evaluate(*model_, valid_reader(), o_.seed);
    return {.accuracy = std::move(r.accuracy), .loss = std::move(r.loss)};
  }

 private:
  const MlmReader& valid_reader() const { return valid_reader_; }

  std::unique_ptr<BertData> data_;  // before the references into it
  std::unique_ptr<MaskedLm> model_;
  const LmConfig& config_;
  const MlmReader& train_;
  const MlmReader& valid_reader_;
  const MlmReader& test_;
  int64_t steps_per_epoch_;
  CsvWriter& metrics_;
  MlmWindow window_;
  int64_t epoch_ = 0, done_ = 0, tokens_ = 0;
  EvalResult valid_eval_;
};

}  // namespace

TrainResult run_train_bert(const TrainOptions& o) {
  const auto start = Clock::now();
  HFTA_CHECK(o.epochs >= 1, "--epochs must be at least 1, got {}", o.epochs);
  HFTA_CHECK(o.batch_size >= 1, "--batch-size must be at least 1, got {}", o.batch_size);
  HFTA_CHECK(o.iters_per_epoch >= 0, "--iters-per-epoch must be >= 0, got {}", o.iters_per_epoch);
  const int64_t B = array_size(o.hyper);
  const LmRunHyper hyper = lm_run_hyper(o, B);
  check_bert_options(o);
  checked_device(o.device, o.plan);  // before the corpus is read
  prepare_runtime(o.threads, o.deterministic);

  const TextCorpus corpus = load_bert_corpus(o);
  const std::unique_ptr<BertData> data = bert_data(o, corpus);
  const int64_t steps_per_epoch = data->steps_per_epoch;

  // A resumed array runs the plan its checkpoint ran (with --plan auto).
  std::optional<ExecutionPlan> resumed_plan;
  TrainResult result = train_arrays(
      o, {.B = B,
          .metrics_columns = {"model", "epoch", "steps", "lr", "train_loss", "valid_loss",
                              "valid_accuracy", "tokens_per_s"},
          .metrics_per_epoch = true,
          .check_resumable =
              [&](const Checkpoint& c, const std::string& path, const std::vector<int64_t>& ids) {
                check_lm_resume(o, c, path, data->info, hyper, ids);
                if (o.plan == "auto" && !c.plan.empty())
                  resumed_plan = ExecutionPlan::parse(c.plan);
              },
          .make_array =
              [&](const std::vector<int64_t>& ids, CsvWriter& metrics) {
                auto model = make_bert_array(o, *data, ids, resumed_plan);
                if (ids.size() > 1)
                  fmt::print("{} models: plan {}\n", ids.size(), model->plan().str());
                return std::make_unique<BertRun>(o, std::move(model), ids, hyper, *data, metrics);
              },
          .announce =
              [&] {
                fmt::print("{}\n", cpu::describe_runtime());
                fmt::print(
                    "training {} {} model{} ({}) on {}: vocabulary {} + [MASK], {} / {} / {} train "
                    "/ valid / "
                    "test tokens, {} streams x bptt {}, {} steps per epoch, {} epoch{}\n",
                    B, o.model, B == 1 ? "" : "s", o.serial ? "serial: one after another" : "fused",
                    corpus.name, corpus.vocab_size(), corpus.train.size(), corpus.valid.size(),
                    corpus.test.size(), o.batch_size, o.bptt, steps_per_epoch, o.epochs,
                    o.epochs == 1 ? "" : "s");
                std::fflush(stdout);
              },
          .announce_checkpoints = true});
  result.wall_seconds = seconds_since(start);

  std::vector<std::string> header = hyper.summary_header();
  for (const char* c : {"train_loss", "valid_loss", "valid_accuracy", "test_loss", "test_accuracy",
                        "wall_s", "state_crc32"})
    header.emplace_back(c);
  CsvWriter summary(o.out + "/summary.csv", header);
  for (int64_t b = 0; b < B; ++b) {
    const size_t i = static_cast<size_t>(b);
    const ModelResult& r = result.models[i];
    std::vector<std::string> row = hyper.summary_row(b);
    row.push_back(num(r.final_train_loss));
    row.push_back(num(r.valid_loss));
    row.push_back(num(r.valid_accuracy));
    row.push_back(num(r.test_loss));
    row.push_back(num(r.test_accuracy));
    row.push_back(num(r.wall_seconds));
    row.push_back(r.state_crc32_text());
    summary.row(row);
  }
  const std::string vocab_path = o.out + "/vocab.txt";
  std::ofstream vocab(vocab_path);
  for (const std::string& word : corpus.dictionary.words()) vocab << word << "\n";
  vocab << "[MASK]\n";
  HFTA_CHECK(vocab.good(), "cannot write the vocabulary to {}", vocab_path);
  std::vector<double> valid_loss, valid_acc;
  for (const ModelResult& r : result.models) {
    valid_loss.push_back(r.valid_loss);
    valid_acc.push_back(r.valid_accuracy);
  }
  const auto best = std::min_element(valid_loss.begin(), valid_loss.end());
  fmt::print(
      "done in {:.1f} s; vocabulary {} + [MASK]; best: model {} with validation MLM loss {:.3f} "
      "(accuracy {:.2f}%); results in {}/summary.csv and {}/metrics.csv\n",
      result.wall_seconds, corpus.vocab_size(), best - valid_loss.begin(), *best,
      100.0 * valid_acc[static_cast<size_t>(best - valid_loss.begin())], o.out, o.out);
  return result;
}

namespace {

// `hfta tune`'s data of a BERT search: the corpus, read once; each array batchifies it for its
// own streams.
class BertSearchData final : public SearchData {
 public:
  explicit BertSearchData(const TrainOptions& o)
      : corpus_([&] {
          checked_device(o.device, o.plan);  // before the corpus is read
          return load_bert_corpus(o);
        }()) {}

  std::unique_ptr<RunArray> make_array(const TrainOptions& o) override {
    check_bert_options(o);
    const int64_t B = array_size(o.hyper);
    const LmRunHyper hyper = lm_run_hyper(o, B);
    std::vector<int64_t> ids(static_cast<size_t>(B));
    std::iota(ids.begin(), ids.end(), 0);
    auto data = bert_data(o, corpus_);
    auto run = std::make_unique<BertRun>(o, make_bert_array(o, *data, ids, std::nullopt), ids,
                                         hyper, *data, metrics_);
    run->own(std::move(data));
    return run;
  }

  int64_t bytes_per_model(const TrainOptions& o) override {
    check_bert_options(o);
    const auto data = bert_data(o, corpus_);
    return static_cast<int64_t>(
        make_masked_lm(o.model,
                       {.B = 1, .streams = o.batch_size, .seed = o.seed, .config = data->config},
                       data->predicted_per_stream)
            ->net()
            .arena_bytes());
  }

  std::string describe() const override {
    return fmt::format("{} (vocabulary {} + [MASK], {} train tokens)", corpus_.name,
                       corpus_.vocab_size(), corpus_.train.size());
  }

 private:
  TextCorpus corpus_;
  CsvWriter metrics_{"", {"model"}};  // a search keeps no per-epoch rows
};

}  // namespace

std::unique_ptr<SearchData> load_bert_search_data(const TrainOptions& options) {
  return std::make_unique<BertSearchData>(options);
}

namespace {

// The corpus a BERT checkpoint was trained on (or `dataset`, `text_files`, `data_dir` where
// given), checked against the vocabulary it recorded: its words and the mask token.
TextCorpus checkpoint_corpus(const Checkpoint& c, const std::string& path,
                             const LmEvalOptions& options) {
  check_lm_checkpoint(c, path);
  const LmCheckpointInfo& info = *c.lm;
  TrainOptions o;
  o.model = c.model;
  o.dataset = options.dataset.empty() ? info.dataset : options.dataset;
  o.text_files = options.text_files.empty() ? info.text_files : options.text_files;
  o.data_dir = options.data_dir.empty() ? info.data_dir : options.data_dir;
  o.seed = c.seed;
  TextCorpus corpus = load_bert_corpus(o);
  const uint64_t hash = vocabulary_hash(corpus.dictionary);
  HFTA_CHECK(corpus.vocab_size() + 1 == info.vocab && hash == info.vocab_hash,
             "{} was trained on a vocabulary of {} words + [MASK] (hash {:016x}) from {}, but {} "
             "has {} words (hash {:016x}): use the corpus it was trained on (--dataset {}{})",
             path, info.vocab - 1, info.vocab_hash, info.corpus, corpus.name, corpus.vocab_size(),
             hash, info.dataset,
             info.text_files.empty() ? "" : fmt::format(" --text-files {}", info.text_files));
  return corpus;
}

}  // namespace

BertEvaluation evaluate_bert_checkpoint(const Checkpoint& c, const std::string& path,
                                        const LmEvalOptions& options) {
  const TextCorpus corpus = checkpoint_corpus(c, path, options);
  const LmConfig config = lm_config_of(*c.lm);
  const int64_t streams = std::max<int64_t>(1, c.batch_size);
  const int64_t predicted_per_stream = mlm_predicted_per_stream(config.bptt, streams);
  const MlmMasking masking{.words = corpus.vocab_size(),
                           .eos = corpus.dictionary.find(kEos),
                           .max_per_stream = predicted_per_stream};
  const MlmReader test = eval_reader(corpus, "test", streams, config.bptt, masking);
  auto model = make_masked_lm(
      c.model,
      {.B = c.B, .streams = streams, .seed = c.seed, .model_ids = c.model_ids, .config = config},
      predicted_per_stream);
  try {
    restore_tensors(c, model->net(), nullptr);
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
  const EvalResult r = evaluate(*model, test, c.seed);
  return {.corpus = corpus.name, .windows = test.windows(), .loss = r.loss, .accuracy = r.accuracy};
}

std::string export_bert_checkpoint(const Checkpoint& one, const std::string& out,
                                   const std::string& source) {
  const TextCorpus corpus = checkpoint_corpus(one, source, {});
  LmConfig config = lm_config_of(*one.lm);
  auto model = make_masked_lm(
      one.model,
      {.B = 1, .streams = 1, .seed = one.seed, .model_ids = one.model_ids, .config = config});
  restore_tensors(one, model->net(), nullptr);
  std::vector<std::string> words = corpus.dictionary.words();
  words.emplace_back("[MASK]");
  return write_bert_export(one.model, model->net(), config, words, out, source);
}

}  // namespace hfta
