#include "workflows/train.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>

#include "backend/cpu/runtime.h"
#include "core/error.h"
#include "core/rng.h"
#include "datasets/fashion_mnist.h"
#include "datasets/loader.h"
#include "datasets/synthetic.h"
#include "models/model.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "workflows/checkpoint.h"
#include "workflows/csv.h"
#include "workflows/progress.h"
#include "workflows/trial.h"

namespace hfta {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The per-model hyperparameter lists with the flag each came from.
struct HyperList {
  const char* flag;
  size_t size;
};
std::vector<HyperList> hyper_lists(const TrainOptions& o) {
  return {{"--lr", o.lr.size()},
          {"--beta1", o.beta1.size()},
          {"--beta2", o.beta2.size()},
          {"--eps", o.eps.size()},
          {"--weight-decay", o.weight_decay.size()},
          {"--momentum", o.momentum.size()},
          {"--nesterov", o.nesterov.size()}};
}

template <typename T>
std::vector<T> pick(const std::vector<T>& all, const std::vector<int64_t>& ids) {
  std::vector<T> out;
  for (int64_t id : ids) out.push_back(all[static_cast<size_t>(id)]);
  return out;
}

// Every hyperparameter expanded to one value per model of the whole run.
struct Hyper {
  std::vector<float> lr, beta1, beta2, eps, weight_decay, momentum;
  std::vector<uint8_t> nesterov;
};
Hyper expand(const TrainOptions& o, int64_t B) {
  return {expand_per_model(o.lr, B, "--lr"),
          expand_per_model(o.beta1, B, "--beta1"),
          expand_per_model(o.beta2, B, "--beta2"),
          expand_per_model(o.eps, B, "--eps"),
          expand_per_model(o.weight_decay, B, "--weight-decay"),
          expand_per_model(o.momentum, B, "--momentum"),
          expand_per_model(o.nesterov, B, "--nesterov")};
}

bool is_adam(const std::string& kind) { return kind == "adam" || kind == "adamw"; }

// The hyperparameters of models `ids` for the optimizer `kind`; throws hfta::Error on an
// unknown kind.
AdamHyper adam_hyper(const Hyper& h, const std::vector<int64_t>& ids) {
  return {pick(h.lr, ids), pick(h.beta1, ids), pick(h.beta2, ids), pick(h.eps, ids),
          pick(h.weight_decay, ids)};
}
SgdHyper sgd_hyper(const Hyper& h, const std::vector<int64_t>& ids) {
  return {pick(h.lr, ids), pick(h.momentum, ids), std::vector<float>{0.0f},
          pick(h.weight_decay, ids), pick(h.nesterov, ids)};
}
void check_optimizer_kind(const std::string& kind) {
  HFTA_CHECK(is_adam(kind) || kind == "sgd",
             "--optimizer {} is not known: choose adam, adamw or sgd", kind);
}

// Throws hfta::Error naming the model and value out of range, without building anything.
void check_optimizer_hyper(const std::string& kind, const Hyper& h,
                           const std::vector<int64_t>& ids) {
  check_optimizer_kind(kind);
  if (is_adam(kind))
    adam_hyper(h, ids).check();
  else
    sgd_hyper(h, ids).check();
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& kind, const Model& model,
                                          const Hyper& h, const std::vector<int64_t>& ids) {
  check_optimizer_kind(kind);
  std::vector<TensorView> values;
  for (const Param& p : model.params()) values.push_back(p.value);
  ParamTable table = ParamTable::from_arena(model.param_arena(), values);
  if (kind == "adam") return std::make_unique<FusedAdam>(std::move(table), adam_hyper(h, ids));
  if (kind == "adamw") return std::make_unique<FusedAdamW>(std::move(table), adam_hyper(h, ids));
  return std::make_unique<FusedSgd>(std::move(table), sgd_hyper(h, ids));
}

// The train and test splits the options name; synthetic data is shaped for the model.
struct Data {
  Dataset train, test;
};
Data load_data(const std::string& dataset, const std::string& dir, const Shape& sample_shape,
               int64_t num_classes, int64_t train_size, int64_t test_size, uint64_t seed) {
  if (dataset == "fashion-mnist") {
    std::string d = dir.empty() ? kFashionMnistDefaultDir : dir;
    return {load_fashion_mnist(d, Split::kTrain), load_fashion_mnist(d, Split::kTest)};
  }
  HFTA_CHECK(dataset == "synthetic", "--dataset {} is not known: choose fashion-mnist or synthetic",
             dataset);
  return {make_synthetic(sample_shape, static_cast<int>(num_classes), train_size, seed,
                         {.sample_stream = 0}),
          make_synthetic(sample_shape, static_cast<int>(num_classes), test_size, seed,
                         {.sample_stream = 1})};
}

struct Evaluation {
  std::vector<double> loss, accuracy;
};
Evaluation evaluate(Model& model, const Dataset& test) {
  Loader loader(test,
                {.batch_size = model.spec().batch_size, .shuffle = false, .drop_last = false});
  Batch batch = loader.make_batch();
  const size_t B = static_cast<size_t>(model.B());
  std::vector<double> loss_sum(B, 0.0);
  std::vector<int64_t> correct(B, 0);
  int64_t rows = 0;
  while (loader.next(batch)) {
    model.forward(batch.images(), batch.labels(), /*training=*/false);
    std::vector<int64_t> c = model.correct();
    for (size_t b = 0; b < B; ++b) {
      loss_sum[b] += static_cast<double>(model.losses()[b]) * static_cast<double>(batch.rows);
      correct[b] += c[b];
    }
    rows += batch.rows;
  }
  Evaluation e;
  for (size_t b = 0; b < B; ++b) {
    e.loss.push_back(loss_sum[b] / static_cast<double>(rows));
    e.accuracy.push_back(static_cast<double>(correct[b]) / static_cast<double>(rows));
  }
  return e;
}

std::string format_losses(const std::vector<float>& losses) {
  std::string s = "loss";
  for (float l : losses) s += fmt::format(" {:.4f}", l);
  return s;
}

// Set by SIGINT during `hfta train`: the loop finishes its step, saves a checkpoint and stops.
std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true); }

// Installs the Ctrl-C handler for the lifetime of a training run.
class InterruptGuard {
 public:
  InterruptGuard() {
    g_interrupted.store(false);
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &previous_);
  }
  ~InterruptGuard() { sigaction(SIGINT, &previous_, nullptr); }

 private:
  struct sigaction previous_ {};
};

// The hyperparameters of models `ids`, by name, as checkpoints record them.
std::map<std::string, std::vector<double>> hyper_of(const Hyper& h,
                                                    const std::vector<int64_t>& ids) {
  std::map<std::string, std::vector<double>> out;
  auto put = [&](const char* name, const auto& all) {
    for (int64_t id : ids) out[name].push_back(static_cast<double>(all[static_cast<size_t>(id)]));
  };
  put("lr", h.lr);
  put("beta1", h.beta1);
  put("beta2", h.beta2);
  put("eps", h.eps);
  put("weight_decay", h.weight_decay);
  put("momentum", h.momentum);
  put("nesterov", h.nesterov);
  return out;
}

// Where the array of models `ids` keeps its checkpoint: one file for a fused run, one per model
// for a serial run.
std::string checkpoint_path(const TrainOptions& o, const std::vector<int64_t>& ids) {
  return o.serial ? fmt::format("{}/checkpoint-model{}.bin", o.out, ids[0])
                  : o.out + "/checkpoint.bin";
}

// Throws hfta::Error naming the first setting in which the checkpoint differs from this run.
void check_resumable(const Checkpoint& c, const TrainOptions& o, const Hyper& h,
                     const std::vector<int64_t>& ids, const std::string& path) {
  auto differs = [&](const std::string& what, const std::string& was, const std::string& is) {
    fail(
        "cannot resume from {}: it was trained with {} {}, this command gives {}; resume with "
        "the same flags or choose another --out",
        path, what, was, is);
  };
  if (c.model != o.model) differs("--model", c.model, o.model);
  if (c.optimizer != o.optimizer) differs("--optimizer", c.optimizer, o.optimizer);
  if (c.seed != o.seed) differs("--seed", std::to_string(c.seed), std::to_string(o.seed));
  if (c.batch_size != o.batch_size)
    differs("--batch-size", std::to_string(c.batch_size), std::to_string(o.batch_size));
  if (c.model_ids != ids)
    differs("models", fmt::format("{}", fmt::join(c.model_ids, ",")),
            fmt::format("{}", fmt::join(ids, ",")));
  for (const auto& [name, values] : hyper_of(h, ids)) {
    auto it = c.hyper.find(name);
    if (it == c.hyper.end() || it->second != values)
      differs("--" + name,
              it == c.hyper.end() ? "nothing" : fmt::format("{}", fmt::join(it->second, ",")),
              fmt::format("{}", fmt::join(values, ",")));
  }
  if (c.epoch > o.epochs) differs("--epochs", std::to_string(c.epoch), std::to_string(o.epochs));
}

// Trains the models `ids` (global indices) as one array of ids.size() models, from `resume_from`
// when given. Saves a checkpoint after every epoch and when interrupted.
void train_array(const TrainOptions& o, const Hyper& h, const std::vector<int64_t>& ids,
                 const Data& data, const Checkpoint* resume_from, CsvWriter& metrics,
                 std::vector<ModelResult>& results) {
  const auto start = Clock::now();
  const int64_t B = static_cast<int64_t>(ids.size());
  const size_t nB = static_cast<size_t>(B);
  auto model =
      make_model(o.model, {.B = B, .batch_size = o.batch_size, .seed = o.seed, .model_ids = ids});
  auto optimizer = make_optimizer(o.optimizer, *model, h, ids);
  Loader loader(data.train, {.batch_size = o.batch_size,
                             .shuffle = true,
                             .seed = o.seed,
                             .drop_last = true,
                             .iters_per_epoch = o.iters_per_epoch});
  Batch batch = loader.make_batch();
  const std::string who = o.serial ? fmt::format("model {}", ids[0]) : fmt::format("{} models", B);

  // Progress, restored from the checkpoint when resuming.
  int64_t step = 0, first_epoch = 1, skip_batches = 0;
  std::vector<int64_t> skipped(nB, 0);
  std::vector<double> epoch_loss(nB, 0.0), last_train_loss(nB, 0.0);
  if (resume_from != nullptr) {
    restore_tensors(*resume_from, *model, optimizer.get());
    step = resume_from->step;
    first_epoch = resume_from->epoch + 1;
    skip_batches = resume_from->batch_in_epoch;
    skipped = resume_from->skipped_steps;
    epoch_loss = resume_from->epoch_loss_sum;
    last_train_loss = resume_from->last_train_loss;
    fmt::print("{}: resuming after step {} (epoch {}, batch {})\n", who, step, first_epoch,
               skip_batches);
  }
  const std::string path = checkpoint_path(o, ids);
  auto save = [&](int64_t epochs_done, int64_t batch_in_epoch) {
    if (!o.checkpoint) return;
    Checkpoint c;
    c.model = o.model;
    c.B = B;
    c.seed = o.seed;
    c.batch_size = o.batch_size;
    c.model_ids = ids;
    c.optimizer = o.optimizer;
    c.hyper = hyper_of(h, ids);
    c.epoch = epochs_done;
    c.batch_in_epoch = batch_in_epoch;
    c.step = step;
    c.epoch_loss_sum = epoch_loss;
    c.last_train_loss = last_train_loss;
    auto steps = optimizer->steps();
    c.optimizer_steps.assign(steps.begin(), steps.end());
    c.skipped_steps = skipped;
    c.tensors = capture_tensors(*model, optimizer.get());
    save_checkpoint(path, c);
  };

  Evaluation eval;
  for (int64_t epoch = first_epoch; epoch <= o.epochs; ++epoch) {
    loader.start_epoch(epoch - 1);  // the loader counts epochs from 0
    int64_t epoch_steps = 0;
    if (skip_batches > 0) {  // resuming inside this epoch: its first batches are done
      for (; epoch_steps < skip_batches && loader.next(batch);) ++epoch_steps;
      skip_batches = 0;
    } else {
      std::fill(epoch_loss.begin(), epoch_loss.end(), 0.0);
    }
    ProgressBar bar(fmt::format("epoch {}/{} {}", epoch, o.epochs, who), loader.batches_per_epoch(),
                    o.progress && stdout_is_terminal());
    const int64_t resumed_steps = epoch_steps;
    const auto epoch_start = Clock::now();
    while (loader.next(batch)) {
      model->forward(batch.images(), batch.labels(), /*training=*/true);
      model->backward();
      const StepReport& report = optimizer->step(model->param_arena(), model->grad_arena());
      ++step;
      ++epoch_steps;
      for (int64_t b = 0; b < B; ++b) {
        const float loss = model->losses()[b];
        epoch_loss[b] += loss;
        if (report.any_skipped() && report.skipped[b]) ++skipped[b];
        metrics.row({std::to_string(ids[b]), std::to_string(step), std::to_string(epoch),
                     fmt::format("{:g}", optimizer->lr()[b]), fmt::format("{:.6g}", loss)});
      }
      bar.update(epoch_steps, format_losses(model->losses()));
      if (g_interrupted.load()) {
        bar.finish();
        save(epoch - 1, epoch_steps);
        fail("interrupted (Ctrl-C) after step {}{}", step,
             o.checkpoint ? fmt::format("; checkpoint saved in {}: run the same command with "
                                        "--resume to continue",
                                        path)
                          : "");
      }
    }
    bar.finish();
    const double train_seconds = seconds_since(epoch_start);
    eval = evaluate(*model, data.test);
    const double samples_per_s =
        static_cast<double>(B * (epoch_steps - resumed_steps) * o.batch_size) / train_seconds;
    fmt::print("epoch {}/{} ({}): {:.1f} s, {:.0f} samples/s over all models\n", epoch, o.epochs,
               who, train_seconds, samples_per_s);
    for (int64_t b = 0; b < B; ++b) {
      last_train_loss[b] = epoch_loss[b] / static_cast<double>(std::max<int64_t>(1, epoch_steps));
      fmt::print(
          "  model {:>2}  lr {:<8g} train loss {:.4f}  test loss {:.4f}  test acc {:.2f}%{}\n",
          ids[b], h.lr[ids[b]], last_train_loss[b], eval.loss[b], 100.0 * eval.accuracy[b],
          skipped[b] ? fmt::format("  ({} steps skipped: NaN/Inf gradients)", skipped[b]) : "");
    }
    std::fflush(stdout);
    std::fill(epoch_loss.begin(), epoch_loss.end(), 0.0);
    save(epoch, 0);
  }
  if (first_epoch > o.epochs) {  // resumed a finished run: just report it again
    eval = evaluate(*model, data.test);
    fmt::print("{}: already trained for {} epochs\n", who, o.epochs);
  }
  const double wall = seconds_since(start);
  for (int64_t b = 0; b < B; ++b) {
    ModelResult& r = results[static_cast<size_t>(ids[b])];
    r.model = ids[b];
    r.final_train_loss = last_train_loss[b];
    r.test_loss = eval.loss[b];
    r.test_accuracy = eval.accuracy[b];
    r.skipped_steps = skipped[b];
    r.wall_seconds = wall;
  }
}

// Keeps the metrics rows a resumed run does not redo: those of models resuming from a checkpoint,
// up to its step. Rows of models that start over are dropped.
void prune_metrics(const std::string& path, const std::map<int64_t, int64_t>& resumed_step) {
  if (!std::filesystem::exists(path)) return;
  CsvTable t = read_csv(path);
  const size_t model_col = t.column("model"), step_col = t.column("step");
  CsvWriter rewrite(path, t.header);
  for (const auto& row : t.rows) {
    auto it = resumed_step.find(std::stoll(row[model_col]));
    if (it != resumed_step.end() && std::stoll(row[step_col]) <= it->second) rewrite.row(row);
  }
}

}  // namespace

int64_t array_size(const TrainOptions& o) {
  auto lists = hyper_lists(o);
  const HyperList* longest = &lists[0];
  for (const HyperList& l : lists) {
    HFTA_CHECK(l.size >= 1, "{} needs at least one value", l.flag);
    if (l.size > longest->size) longest = &l;
  }
  for (const HyperList& l : lists)
    HFTA_CHECK(l.size == 1 || l.size == longest->size,
               "{} has {} values but {} has {}: give each hyperparameter one value (shared by "
               "all models) or one value per model",
               l.flag, l.size, longest->flag, longest->size);
  return static_cast<int64_t>(longest->size);
}

TrainResult run_train(const TrainOptions& o) {
  const auto start = Clock::now();
  const int64_t B = array_size(o);
  HFTA_CHECK(o.epochs >= 1, "--epochs must be at least 1, got {}", o.epochs);
  HFTA_CHECK(o.batch_size >= 1, "--batch-size must be at least 1, got {}", o.batch_size);
  HFTA_CHECK(o.iters_per_epoch >= 0, "--iters-per-epoch must be >= 0, got {}", o.iters_per_epoch);
  const Hyper h = expand(o, B);
  if (o.threads > 0) cpu::set_num_threads(o.threads);

  // Validate the model name and hyperparameters before the (slow) data load.
  auto probe = make_model(o.model, {.B = 1, .batch_size = 1, .seed = o.seed, .model_ids = {}});
  std::vector<int64_t> all_models(static_cast<size_t>(B));
  std::iota(all_models.begin(), all_models.end(), 0);
  check_optimizer_hyper(o.optimizer, h, all_models);
  Data data = load_data(o.dataset, o.data_dir, probe->sample_shape(), probe->num_classes(),
                        o.synthetic_train_size, o.synthetic_test_size, o.seed);

  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  HFTA_CHECK(!ec, "cannot create --out directory {}: {}", o.out, ec.message());

  // The arrays this run trains: all B models at once, or each alone.
  std::vector<std::vector<int64_t>> groups;
  if (o.serial) {
    for (int64_t b = 0; b < B; ++b) groups.push_back({b});
  } else {
    groups.push_back(all_models);
  }
  std::vector<std::optional<Checkpoint>> resume(groups.size());
  if (o.resume) {
    std::map<int64_t, int64_t> resumed_step;
    for (size_t g = 0; g < groups.size(); ++g) {
      const std::string path = checkpoint_path(o, groups[g]);
      if (!std::filesystem::exists(path)) continue;
      resume[g] = load_checkpoint(path);
      check_resumable(*resume[g], o, h, groups[g], path);
      for (int64_t id : groups[g]) resumed_step[id] = resume[g]->step;
    }
    HFTA_CHECK(!resumed_step.empty(),
               "--resume: no checkpoint in {} (expected {}): run without --resume to start", o.out,
               checkpoint_path(o, groups[0]));
    prune_metrics(o.out + "/metrics.csv", resumed_step);
  }
  CsvWriter metrics(o.out + "/metrics.csv", {"model", "step", "epoch", "lr", "loss"}, o.resume);

  fmt::print("{}\n", cpu::describe_runtime());
  fmt::print(
      "training {} {} model{} ({}) on {}: {} train / {} test samples, batch {}, {} "
      "epoch{}{}\n",
      B, o.model, B == 1 ? "" : "s", o.serial ? "serial: one after another" : "fused", o.dataset,
      data.train.size, data.test.size, o.batch_size, o.epochs, o.epochs == 1 ? "" : "s",
      o.iters_per_epoch ? fmt::format(", at most {} steps per epoch", o.iters_per_epoch) : "");
  std::fflush(stdout);

  TrainResult result;
  result.B = B;
  result.models.resize(static_cast<size_t>(B));
  InterruptGuard interrupt_guard;
  for (size_t g = 0; g < groups.size(); ++g)
    train_array(o, h, groups[g], data, resume[g] ? &*resume[g] : nullptr, metrics, result.models);
  result.wall_seconds = seconds_since(start);

  CsvWriter summary(o.out + "/summary.csv",
                    {"model", "mode", "optimizer", "lr", "beta1", "beta2", "eps", "weight_decay",
                     "momentum", "nesterov", "epochs", "batch_size", "seed", "train_loss",
                     "test_loss", "test_accuracy", "skipped_steps", "wall_seconds"});
  for (const ModelResult& r : result.models) {
    const size_t b = static_cast<size_t>(r.model);
    summary.row({std::to_string(r.model), o.serial ? "serial" : "fused", o.optimizer,
                 fmt::format("{:g}", h.lr[b]), fmt::format("{:g}", h.beta1[b]),
                 fmt::format("{:g}", h.beta2[b]), fmt::format("{:g}", h.eps[b]),
                 fmt::format("{:g}", h.weight_decay[b]), fmt::format("{:g}", h.momentum[b]),
                 std::to_string(h.nesterov[b]), std::to_string(o.epochs),
                 std::to_string(o.batch_size), std::to_string(o.seed),
                 fmt::format("{:.6g}", r.final_train_loss), fmt::format("{:.6g}", r.test_loss),
                 fmt::format("{:.6g}", r.test_accuracy), std::to_string(r.skipped_steps),
                 fmt::format("{:.3f}", r.wall_seconds)});
  }
  auto best = std::max_element(
      result.models.begin(), result.models.end(),
      [](const ModelResult& a, const ModelResult& b) { return a.test_accuracy < b.test_accuracy; });
  fmt::print(
      "done in {:.1f} s; best: model {} (lr {:g}) with {:.2f}% test accuracy; results in "
      "{}/summary.csv and {}/metrics.csv\n",
      result.wall_seconds, best->model, h.lr[static_cast<size_t>(best->model)],
      100.0 * best->test_accuracy, o.out, o.out);
  return result;
}

int64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

TrialResult run_trial(const TrialOptions& o) {
  HFTA_CHECK(o.B >= 1, "--B must be at least 1, got {}", o.B);
  HFTA_CHECK(o.steps >= 1, "--steps must be at least 1, got {}", o.steps);
  HFTA_CHECK(o.warmup_steps >= 0, "--warmup must be >= 0, got {}", o.warmup_steps);
  HFTA_CHECK(o.batch_size >= 1, "--batch-size must be at least 1, got {}", o.batch_size);
  if (o.threads > 0) cpu::set_num_threads(o.threads);

  // Learning rates log-uniform in [1e-4, 1e-2], drawn per model from the hyperparameter stream.
  Hyper h;
  for (int64_t b = 0; b < o.B; ++b) {
    RngStream rng = RngStream::for_model(o.seed, b, kRngHyper);
    h.lr.push_back(std::pow(10.0f, rng.uniform(-4.0f, -2.0f)));
  }
  h.beta1.assign(o.B, 0.9f);
  h.beta2.assign(o.B, 0.999f);
  h.eps.assign(o.B, 1e-8f);
  h.weight_decay.assign(o.B, 0.0f);

  auto probe = make_model(o.model, {.B = 1, .batch_size = 1, .seed = 0, .model_ids = {}});
  // Enough samples for a few distinct batches; real data is the full training split.
  Data data = load_data(o.dataset, o.data_dir, probe->sample_shape(), probe->num_classes(),
                        8 * o.batch_size, o.batch_size, o.seed);
  std::vector<std::vector<int64_t>> groups;
  if (o.serial) {
    for (int64_t b = 0; b < o.B; ++b) groups.push_back({b});
  } else {
    groups.emplace_back(static_cast<size_t>(o.B));
    std::iota(groups[0].begin(), groups[0].end(), 0);
  }

  TrialResult r{};
  for (const auto& ids : groups) {
    auto model = make_model(o.model, {.B = static_cast<int64_t>(ids.size()),
                                      .batch_size = o.batch_size,
                                      .seed = o.seed,
                                      .model_ids = ids});
    auto optimizer = make_optimizer("adam", *model, h, ids);
    Loader loader(data.train, {.batch_size = o.batch_size, .seed = o.seed});
    Batch batch = loader.make_batch();
    auto step = [&] {
      if (!loader.next(batch)) loader.next(batch);  // the next epoch starts
      model->forward(batch.images(), batch.labels(), true);
      model->backward();
      optimizer->step(model->param_arena(), model->grad_arena());
    };
    for (int64_t s = 0; s < o.warmup_steps; ++s) step();
    model->reset_profile();
    const auto start = Clock::now();
    for (int64_t s = 0; s < o.steps; ++s) step();
    r.seconds += seconds_since(start);
    if (model->profiling()) fmt::print(stderr, "{}\n", model->profile_report());
    r.params_per_model = model->params_per_model();
    r.flops_per_step +=
        static_cast<double>(ids.size() * o.batch_size) * model->train_flops_per_sample();
  }
  r.samples_per_second = static_cast<double>(o.B * o.steps * o.batch_size) / r.seconds;
  r.step_ms = r.seconds / static_cast<double>(o.steps) * 1000.0;
  return r;
}

void add_train_command(CLI::App& app) {
  auto opts = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand(
      "train", "Train an array of models, one per hyperparameter setting, on one dataset");
  std::vector<std::string> models = model_names();
  cmd->add_option("--model", opts->model, "Architecture")
      ->check(CLI::IsMember(models))
      ->capture_default_str();
  cmd->add_option("--dataset", opts->dataset, "fashion-mnist or synthetic")
      ->check(CLI::IsMember({"fashion-mnist", "synthetic"}))
      ->capture_default_str();
  cmd->add_option("--data-dir", opts->data_dir,
                  fmt::format("Fashion-MNIST directory (default {})", kFashionMnistDefaultDir));
  cmd->add_option("--optimizer", opts->optimizer, "adam, adamw or sgd")
      ->check(CLI::IsMember({"adam", "adamw", "sgd"}))
      ->capture_default_str();
  const char* per_model = "one value (shared) or one per model, comma-separated";
  cmd->add_option("--lr", opts->lr, fmt::format("Learning rate: {}", per_model))
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--beta1", opts->beta1, "Adam beta1, per model")->delimiter(',');
  cmd->add_option("--beta2", opts->beta2, "Adam beta2, per model")->delimiter(',');
  cmd->add_option("--eps", opts->eps, "Adam epsilon, per model")->delimiter(',');
  cmd->add_option("--weight-decay", opts->weight_decay, "Weight decay, per model")->delimiter(',');
  cmd->add_option("--momentum", opts->momentum, "SGD momentum, per model")->delimiter(',');
  cmd->add_option("--nesterov", opts->nesterov, "SGD Nesterov (0 or 1), per model")->delimiter(',');
  cmd->add_option("--epochs", opts->epochs, "Epochs")->capture_default_str();
  cmd->add_option("--batch-size", opts->batch_size, "Minibatch rows, shared by all models")
      ->capture_default_str();
  cmd->add_option("--iters-per-epoch", opts->iters_per_epoch,
                  "At most this many steps per epoch (0: whole epochs)");
  cmd->add_option("--seed", opts->seed, "Seed of initialization and shuffling")
      ->capture_default_str();
  cmd->add_option("--threads", opts->threads, "CPU threads (0: all cores)");
  auto fused_flag = std::make_shared<bool>(false);
  auto* fused =
      cmd->add_flag("--fused", *fused_flag, "Train the models as one fused array (default)");
  cmd->add_flag("--serial", opts->serial,
                "Train the models one after another, each alone (the baseline)")
      ->excludes(fused);
  cmd->add_flag(
      "--no-progress", [opts](int64_t) { opts->progress = false; }, "No progress bar");
  cmd->add_option("--out", opts->out, "Directory for metrics.csv and summary.csv")
      ->capture_default_str();
  cmd->add_flag("--resume", opts->resume,
                "Continue the run in --out from its checkpoints (give the same flags)");
  cmd->add_flag(
      "--no-checkpoint", [opts](int64_t) { opts->checkpoint = false; },
      "Do not save checkpoints (after every epoch and on Ctrl-C by default)");
  cmd->add_option("--synthetic-size", opts->synthetic_train_size,
                  "Training samples of --dataset synthetic");
  cmd->callback([opts, fused_flag] { run_train(*opts); });
}

namespace {

// The checkpoint holding model `b` of the run in `dir` (fused: checkpoint.bin, serial: one file
// per model), as a B = 1 checkpoint.
Checkpoint model_from_run(const std::string& dir, int64_t b) {
  const std::string fused = dir + "/checkpoint.bin";
  const std::string serial = fmt::format("{}/checkpoint-model{}.bin", dir, b);
  if (std::filesystem::exists(fused)) {
    Checkpoint all = load_checkpoint(fused);
    for (int64_t i = 0; i < all.B; ++i)
      if (all.model_ids[i] == b) return extract_model(all, i);
    fail("{} holds models {}, not model {}", fused, fmt::join(all.model_ids, ","), b);
  }
  HFTA_CHECK(std::filesystem::exists(serial),
             "no checkpoint for model {} in {}: expected {} or {} (was the run started with "
             "--no-checkpoint?)",
             b, dir, fused, serial);
  return load_checkpoint(serial);
}

// The model with the highest test accuracy in <dir>/summary.csv.
int64_t best_model_of_run(const std::string& dir) {
  CsvTable summary = read_csv(dir + "/summary.csv");
  HFTA_CHECK(!summary.rows.empty(), "{}/summary.csv has no models", dir);
  const size_t acc = summary.column("test_accuracy"), model = summary.column("model");
  const auto* best = &summary.rows[0];
  for (const auto& row : summary.rows)
    if (std::stod(row[acc]) > std::stod((*best)[acc])) best = &row;
  return std::stoll((*best)[model]);
}

}  // namespace

void add_extract_command(CLI::App& app) {
  struct Args {
    std::string run, out;
    int64_t model = -1;
    bool best = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "extract", "Write one model of a trained array to its own checkpoint (B = 1)");
  cmd->add_option("--run", args->run, "The --out directory of `hfta train`")->required();
  auto* model = cmd->add_option("--model", args->model, "Model index (0-based) to extract");
  cmd->add_flag("--best", args->best, "Extract the model with the best test accuracy")
      ->excludes(model);
  cmd->add_option("--out", args->out, "Checkpoint file to write")->required();
  cmd->callback([args] {
    HFTA_CHECK(args->best || args->model >= 0, "give --model N or --best");
    const int64_t b = args->best ? best_model_of_run(args->run) : args->model;
    Checkpoint one = model_from_run(args->run, b);
    save_checkpoint(args->out, one);
    int64_t params = 0;
    for (const auto& t : one.tensors)
      if (t.name.find('#') == std::string::npos) params += t.shape.numel();
    fmt::print("model {} of {} ({} {}, lr {:g}, {} steps) written to {}: {} parameters\n", b,
               args->run, one.model, one.optimizer, one.hyper.at("lr")[0], one.step, args->out,
               params);
  });
}

void add_eval_command(CLI::App& app) {
  struct Args {
    std::string checkpoint, dataset = "fashion-mnist", data_dir;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("eval", "Evaluate the models of a checkpoint on a test set");
  cmd->add_option("--checkpoint", args->checkpoint, "Checkpoint file")->required();
  cmd->add_option("--dataset", args->dataset, "fashion-mnist or synthetic")
      ->check(CLI::IsMember({"fashion-mnist", "synthetic"}))
      ->capture_default_str();
  cmd->add_option("--data-dir", args->data_dir, "Fashion-MNIST directory");
  cmd->callback([args] {
    Checkpoint c = load_checkpoint(args->checkpoint);
    auto model = make_model(c.model, {.B = c.B,
                                      .batch_size = std::max<int64_t>(c.batch_size, 1),
                                      .seed = c.seed,
                                      .model_ids = c.model_ids});
    restore_tensors(c, *model, nullptr);
    TrainOptions defaults;
    Data data =
        load_data(args->dataset, args->data_dir, model->sample_shape(), model->num_classes(),
                  defaults.synthetic_train_size, defaults.synthetic_test_size, c.seed);
    Evaluation e = evaluate(*model, data.test);
    fmt::print("{}: {} {} model{} after {} steps, on {} test samples of {}\n", args->checkpoint,
               c.B, c.model, c.B == 1 ? "" : "s", c.step, data.test.size, args->dataset);
    for (int64_t b = 0; b < c.B; ++b)
      fmt::print("  model {:>2}  lr {:<8g} test loss {:.4f}  test acc {:.2f}%\n", c.model_ids[b],
                 c.hyper.at("lr")[b], e.loss[b], 100.0 * e.accuracy[b]);
  });
}

}  // namespace hfta
