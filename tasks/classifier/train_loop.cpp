#include "tasks/classifier/train_loop.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "core/clock.h"
#include "core/error.h"
#include "io/checkpoint_writer.h"
#include "io/csv.h"
#include "io/interrupt.h"
#include "io/progress.h"
#include "run/plan_choice.h"
#include "tasks/classifier/classifier_plan.h"
#include "tasks/classifier/evaluate.h"
#include "tasks/classifier/results.h"
#include "tasks/classifier/resume.h"

namespace hfta {

namespace {}  // namespace

ModelSpec ModelConfig::spec(const std::vector<int64_t>& ids, int64_t batch_size,
                            uint64_t seed) const {
  std::vector<int64_t> streams = ids;
  for (int64_t& id : streams) id += first_model_id;
  return {.B = static_cast<int64_t>(ids.size()),
          .batch_size = batch_size,
          .seed = seed,
          .model_ids = streams,
          .sample_shape = sample_shape,
          .num_classes = num_classes,
          .dropout = dropout,
          .plan = plan};
}

ModelConfig model_config(const std::string& name, const Data& data, std::optional<float> dropout,
                         bool no_decay_norm_bias) {
  return {.name = model_info(name).name,
          .sample_shape = data.train.sample_shape,
          .num_classes = data.train.num_classes,
          .dropout = dropout,
          .no_decay_norm_bias = no_decay_norm_bias};
}

std::vector<std::vector<int64_t>> array_groups(int64_t B, bool serial) {
  std::vector<std::vector<int64_t>> groups;
  if (serial) {
    for (int64_t b = 0; b < B; ++b) groups.push_back({b});
  } else {
    groups.emplace_back(static_cast<size_t>(B));
    std::iota(groups[0].begin(), groups[0].end(), 0);
  }
  return groups;
}

ModelArray make_array(const ModelConfig& config, const std::vector<int64_t>& ids,
                      int64_t batch_size, uint64_t seed, std::string_view optimizer,
                      const HyperValues& all_values) {
  ModelArray a;
  a.ids = ids;
  ModelConfig resolved = config;
  resolved.plan =
      resolve_plan(config.plan, config, ids, batch_size, seed, optimizer, config.plan_memory_budget,
                   [](const std::string& line) { fmt::print(stderr, "{}\n", line); })
          .plan;
  a.model = make_model(config.name, resolved.spec(ids, batch_size, seed));
  a.optimizer =
      make_optimizer(optimizer, *a.model, pick_models(all_values, ids), config.no_decay_norm_bias);
  return a;
}

std::span<const StepReport> array_steps(ModelArray& array,
                                        std::span<const Model::StepBatch> steps) {
  Model& model = *array.model;
  Optimizer& optimizer = *array.optimizer;
  float* params = reinterpret_cast<float*>(model.param_arena().data());
  const float* grads = reinterpret_cast<const float*>(model.grad_arena().data());
  const size_t n = steps.size();
  if (array.reports.size() < n)
    array.reports.resize(
        n, StepReport{.skipped = std::vector<uint8_t>(static_cast<size_t>(model.B()), uint8_t{0})});
  const bool fused = model.layout().is_fused();
  model.train_steps(steps, [&](int64_t k, int64_t first, int64_t count) {
    StepReport& report = array.reports[static_cast<size_t>(k)];
    if (fused) {
      report = optimizer.step(params, grads);  // same size: copies without allocating
      return;
    }
    optimizer.step_models(params, grads, first, count);
    for (int64_t b = first; b < first + count; ++b)
      report.skipped[static_cast<size_t>(b)] = optimizer.skipped_last_step(b) ? 1 : 0;
  });
  if (!fused) {
    optimizer.finish_model_steps();
    for (size_t k = 0; k < n; ++k)
      array.reports[k].num_skipped =
          std::count(array.reports[k].skipped.begin(), array.reports[k].skipped.end(), 1);
  }
  return std::span<const StepReport>(array.reports).first(n);
}

const StepReport& array_step(ModelArray& array, const TensorView& images, const IndexView& labels) {
  const Model::StepBatch step{images, labels};
  return array_steps(array, {&step, 1}).front();
}

int64_t train_steps(ModelArray& array, Loader& loader, Batch& batch, int64_t max_steps,
                    const std::function<void(const TrainedStep&)>& after_step) {
  const int64_t per_visit = array.model->layout().steps_per_visit;
  // The visit's batches: the caller's, then per_visit - 1 more (once per call: an epoch).
  std::vector<Batch> more;
  for (int64_t k = 1; k < per_visit; ++k) more.push_back(loader.make_batch());
  auto batch_at = [&](int64_t k) -> Batch& {
    return k == 0 ? batch : more[static_cast<size_t>(k - 1)];
  };
  std::vector<Model::StepBatch> visit;
  int64_t steps = 0;
  const bool whole_epoch = max_steps == kUntilEpochEnds;
  bool epoch_ended = false;
  while (!epoch_ended && (whole_epoch || steps < max_steps)) {
    visit.clear();
    while (static_cast<int64_t>(visit.size()) < per_visit &&
           (whole_epoch || steps + static_cast<int64_t>(visit.size()) < max_steps)) {
      Batch& b = batch_at(static_cast<int64_t>(visit.size()));
      if (!loader.next(b)) {  // the epoch ended
        if (whole_epoch || !loader.next(b)) {
          epoch_ended = true;
          break;
        }
      }
      visit.push_back({b.images(), b.labels()});
    }
    if (visit.empty()) break;
    const std::span<const StepReport> reports = array_steps(array, visit);
    const int64_t n = static_cast<int64_t>(visit.size());
    steps += n;
    if (!after_step) continue;
    for (int64_t k = 0; k < n; ++k)
      after_step({.report = reports[static_cast<size_t>(k)],
                  .losses = array.model->step_losses(k),
                  .arrays_current = k == n - 1});
  }
  return steps;
}

void train_array(const TrainOptions& o, const ModelConfig& config, const HyperValues& all_values,
                 const std::vector<int64_t>& ids, const Data& data, const Checkpoint* resume_from,
                 CsvWriter& metrics, std::vector<ModelResult>& results) {
  const auto start = Clock::now();
  const int64_t B = static_cast<int64_t>(ids.size());
  const size_t nB = static_cast<size_t>(B);
  const HyperValues values = pick_models(all_values, ids);
  ModelArray array = make_array(config, ids, o.batch_size, o.seed, o.optimizer, all_values);
  Model& model = *array.model;
  Loader loader(data.train, {.batch_size = o.batch_size,
                             .shuffle = true,
                             .seed = o.seed,
                             .drop_last = true,
                             .iters_per_epoch = o.iters_per_epoch});
  Batch batch = loader.make_batch();
  const std::string who = o.serial ? fmt::format("model {}", ids[0]) : fmt::format("{} models", B);
  if (ids.front() == 0)  // once per run
    fmt::print(
        "{}: {} parameters per model; {:.1f} MiB of parameters, gradients, buffers and "
        "activations per model at batch {}\n",
        config.name, model.params_per_model(),
        static_cast<double>(model.arena_bytes()) / static_cast<double>(B) / (1 << 20),
        o.batch_size);

  ArrayProgress p{.epoch_loss = std::vector<double>(nB, 0.0),
                  .last_train_loss = std::vector<double>(nB, 0.0),
                  .skipped = std::vector<int64_t>(nB, 0)};
  if (resume_from != nullptr) {
    p = restore_checkpoint(*resume_from, array);
    fmt::print("{}: resuming after step {} (epoch {}, batch {})\n", who, p.step, p.epochs_done + 1,
               p.batch_in_epoch);
  }
  const std::string path = checkpoint_path(o.out, o.serial, ids);
  // Mid-epoch lines must not land inside a progress bar: the bar in use is cleared first.
  ProgressBar* current_bar = nullptr;
  PeriodicCheckpoints periodic(
      path,
      {.every_steps = o.checkpoint ? o.checkpoint_every : 0,
       .interval_seconds = o.checkpoint ? o.checkpoint_interval_seconds : 0.0},
      [&](Checkpoint& c) { fill_checkpoint(c, o, config, values, p, array); },
      [&](const std::string& line) {
        if (current_bar != nullptr) current_bar->finish();
        fmt::print("{}: {}\n", who, line);
        std::fflush(stdout);  // a killed run's log shows every checkpoint it wrote
      },
      [&](Checkpoint& c) {  // on the writer thread: shapes only, never the training's values
        capture_tensors(*array.model, array.optimizer.get(), c.tensors, /*values=*/false);
      });
  periodic.start(p.step);
  if (o.checkpoint && (o.checkpoint_every > 0 || o.checkpoint_interval_seconds > 0) &&
      ids.front() == 0)
    fmt::print("checkpoints {} in the background, and after every epoch\n",
               o.checkpoint_every > 0 && o.checkpoint_interval_seconds > 0
                   ? fmt::format("every {} steps and every {:g} s", o.checkpoint_every,
                                 o.checkpoint_interval_seconds)
               : o.checkpoint_every > 0
                   ? fmt::format("every {} steps", o.checkpoint_every)
                   : fmt::format("every {:g} s", o.checkpoint_interval_seconds));
  auto save = [&] {
    if (o.checkpoint) periodic.save_now(p.step);
  };

  Evaluation eval;
  const int64_t first_epoch = p.epochs_done + 1;
  for (int64_t epoch = first_epoch; epoch <= o.epochs; ++epoch) {
    loader.start_epoch(o.first_epoch + epoch - 1);  // the loader counts epochs from 0
    int64_t epoch_steps = 0;
    if (p.batch_in_epoch > 0) {  // resuming inside this epoch: its first batches are done
      for (; epoch_steps < p.batch_in_epoch && loader.next(batch);) ++epoch_steps;
    } else {
      std::fill(p.epoch_loss.begin(), p.epoch_loss.end(), 0.0);
    }
    ProgressBar bar(fmt::format("epoch {}/{} {}", epoch, o.epochs, who), loader.batches_per_epoch(),
                    o.progress && stdout_is_terminal());
    current_bar = &bar;
    const int64_t resumed_steps = epoch_steps;
    const auto epoch_start = Clock::now();
    train_steps(array, loader, batch, kUntilEpochEnds, [&](const TrainedStep& step) {
      ++p.step;
      p.batch_in_epoch = ++epoch_steps;
      for (int64_t b = 0; b < B; ++b) {
        const float loss = step.losses[static_cast<size_t>(b)];
        p.epoch_loss[b] += loss;
        if (step.report.any_skipped() && step.report.skipped[b]) ++p.skipped[b];
        metrics.row(metrics_row(ids[b], p.step, epoch, array.optimizer->lr()[b], loss));
      }
      bar.update(epoch_steps, format_losses(step.losses));
      if (!step.arrays_current) return;  // the models are steps ahead: no checkpoint here
      periodic.after_step(p.step);       // after the step's metrics rows: a checkpoint has them all
      if (InterruptGuard::interrupted()) {
        bar.finish();
        save();
        fail_interrupted(p.step, o.checkpoint ? path : "");
      }
    });
    bar.finish();
    current_bar = nullptr;
    const double train_seconds = seconds_since(epoch_start);
    eval = evaluate(model, data.test, &data.parts);
    const double samples_per_s =
        static_cast<double>(B * (epoch_steps - resumed_steps) * o.batch_size) / train_seconds;
    fmt::print("epoch {}/{} ({}): {:.1f} s, {:.0f} samples/s over all models\n", epoch, o.epochs,
               who, train_seconds, samples_per_s);
    for (int64_t b = 0; b < B; ++b) {
      p.last_train_loss[b] =
          p.epoch_loss[b] / static_cast<double>(std::max<int64_t>(1, epoch_steps));
      fmt::print(
          "  model {:>2}  lr {:<8g} train loss {:.4f}  test loss {:.4f}  test acc {:.2f}%{}{}\n",
          ids[b], values.at("lr")[b], p.last_train_loss[b], eval.loss[b], 100.0 * eval.accuracy[b],
          eval.miou.empty() ? "" : fmt::format(" of points  mIoU {:.4f}", eval.miou[b]),
          p.skipped[b] ? fmt::format("  ({} steps skipped: NaN/Inf gradients)", p.skipped[b]) : "");
    }
    std::fflush(stdout);
    std::fill(p.epoch_loss.begin(), p.epoch_loss.end(), 0.0);
    p.epochs_done = epoch;
    p.batch_in_epoch = 0;
    save();
  }
  periodic.wait();               // an error of the last background write fails the run
  if (first_epoch > o.epochs) {  // resumed a finished run: just report it again
    eval = evaluate(model, data.test, &data.parts);
    fmt::print("{}: already trained for {} epochs\n", who, o.epochs);
  }
  const double wall = seconds_since(start);
  for (int64_t b = 0; b < B; ++b) {
    ModelResult& r = results[static_cast<size_t>(ids[b])];
    r.model = ids[b];
    r.final_train_loss = p.last_train_loss[b];
    r.test_loss = eval.loss[b];
    r.test_accuracy = eval.accuracy[b];
    if (!eval.miou.empty()) r.test_miou = eval.miou[b];
    r.skipped_steps = p.skipped[b];
    r.wall_seconds = wall;
  }
}

}  // namespace hfta
