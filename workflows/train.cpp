#include "workflows/train.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "backend/cpu/runtime.h"
#include "core/error.h"
#include "core/rng.h"
#include "datasets/fashion_mnist.h"
#include "datasets/loader.h"
#include "datasets/synthetic.h"
#include "models/model.h"
#include "optim/adam.h"
#include "optim/sgd.h"
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

std::unique_ptr<Optimizer> make_optimizer(const std::string& kind, const Model& model,
                                          const Hyper& h, const std::vector<int64_t>& ids) {
  std::vector<TensorView> values;
  for (const Param& p : model.params()) values.push_back(p.value);
  ParamTable table = ParamTable::from_arena(model.param_arena(), values);
  if (kind == "adam" || kind == "adamw") {
    AdamHyper a{pick(h.lr, ids), pick(h.beta1, ids), pick(h.beta2, ids), pick(h.eps, ids),
                pick(h.weight_decay, ids)};
    if (kind == "adam") return std::make_unique<FusedAdam>(std::move(table), a);
    return std::make_unique<FusedAdamW>(std::move(table), a);
  }
  HFTA_CHECK(kind == "sgd", "--optimizer {} is not known: choose adam, adamw or sgd", kind);
  SgdHyper s{pick(h.lr, ids), pick(h.momentum, ids), std::vector<float>{0.0f},
             pick(h.weight_decay, ids), pick(h.nesterov, ids)};
  return std::make_unique<FusedSgd>(std::move(table), s);
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

// Trains the models `ids` (global indices) as one array of ids.size() models.
void train_array(const TrainOptions& o, const Hyper& h, const std::vector<int64_t>& ids,
                 const Data& data, CsvWriter& metrics, std::vector<ModelResult>& results) {
  const auto start = Clock::now();
  const int64_t B = static_cast<int64_t>(ids.size());
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
  int64_t step = 0;
  std::vector<int64_t> skipped(static_cast<size_t>(B), 0);
  std::vector<double> epoch_loss(static_cast<size_t>(B), 0.0);
  for (int64_t epoch = 1; epoch <= o.epochs; ++epoch) {
    ProgressBar bar(fmt::format("epoch {}/{} {}", epoch, o.epochs, who), loader.batches_per_epoch(),
                    o.progress && stdout_is_terminal());
    std::fill(epoch_loss.begin(), epoch_loss.end(), 0.0);
    int64_t epoch_steps = 0;
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
    }
    bar.finish();
    const double train_seconds = seconds_since(epoch_start);
    Evaluation eval = evaluate(*model, data.test);
    const double samples_per_s =
        static_cast<double>(B * epoch_steps * o.batch_size) / train_seconds;
    fmt::print("epoch {}/{} ({}): {:.1f} s, {:.0f} samples/s over all models\n", epoch, o.epochs,
               who, train_seconds, samples_per_s);
    for (int64_t b = 0; b < B; ++b) {
      const double train_loss = epoch_loss[b] / static_cast<double>(epoch_steps);
      fmt::print(
          "  model {:>2}  lr {:<8g} train loss {:.4f}  test loss {:.4f}  test acc {:.2f}%{}\n",
          ids[b], h.lr[ids[b]], train_loss, eval.loss[b], 100.0 * eval.accuracy[b],
          skipped[b] ? fmt::format("  ({} steps skipped: NaN/Inf gradients)", skipped[b]) : "");
      ModelResult& r = results[static_cast<size_t>(ids[b])];
      r.model = ids[b];
      r.final_train_loss = train_loss;
      r.test_loss = eval.loss[b];
      r.test_accuracy = eval.accuracy[b];
      r.skipped_steps = skipped[b];
    }
    std::fflush(stdout);
  }
  const double wall = seconds_since(start);
  for (int64_t id : ids) results[static_cast<size_t>(id)].wall_seconds = wall;
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
  make_optimizer(o.optimizer,
                 *make_model(o.model, {.B = B, .batch_size = 1, .seed = 0, .model_ids = {}}), h,
                 [&] {
                   std::vector<int64_t> all(static_cast<size_t>(B));
                   std::iota(all.begin(), all.end(), 0);
                   return all;
                 }());
  Data data = load_data(o.dataset, o.data_dir, probe->sample_shape(), probe->num_classes(),
                        o.synthetic_train_size, o.synthetic_test_size, o.seed);

  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  HFTA_CHECK(!ec, "cannot create --out directory {}: {}", o.out, ec.message());
  CsvWriter metrics(o.out + "/metrics.csv", {"model", "step", "epoch", "lr", "loss"});

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
  if (o.serial) {
    for (int64_t b = 0; b < B; ++b) train_array(o, h, {b}, data, metrics, result.models);
  } else {
    std::vector<int64_t> all(static_cast<size_t>(B));
    std::iota(all.begin(), all.end(), 0);
    train_array(o, h, all, data, metrics, result.models);
  }
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
    const auto start = Clock::now();
    for (int64_t s = 0; s < o.steps; ++s) step();
    r.seconds += seconds_since(start);
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
  cmd->add_option("--synthetic-size", opts->synthetic_train_size,
                  "Training samples of --dataset synthetic");
  cmd->callback([opts, fused_flag] { run_train(*opts); });
}

}  // namespace hfta
