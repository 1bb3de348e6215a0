// run_train: validates the options, loads the data, resumes, trains the arrays (train_loop.h)
// and writes the summary (results.h).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>

#include "backend/cpu/runtime.h"
#include "core/clock.h"
#include "core/device_memory.h"
#include "core/error.h"
#include "io/csv.h"
#include "io/interrupt.h"
#include "run/data.h"
#include "run/plan_choice.h"
#include "run/train_run.h"
#include "tasks/classifier/classifier.h"
#include "tasks/classifier/results.h"
#include "tasks/classifier/resume.h"
#include "tasks/classifier/train_loop.h"

namespace hfta {

TrainResult run_train_classifier(const TrainOptions& options) {
  TrainOptions o = options;
  if (o.feature_transform) {  // --feature-transform names the _ft variant from here on
    o.model = feature_transform_variant(o.model);
    o.feature_transform = false;
  }
  // The command line refuses them by name (run/task.h); a caller of the library too.
  HFTA_CHECK(o.lr_d.empty() && o.image_size == 0,
             "--lr-d and --image-size are DCGAN flags: --model {} does not read them", o.model);
  const auto start = std::chrono::steady_clock::now();
  HFTA_CHECK(o.epochs >= 1, "--epochs must be at least 1, got {}", o.epochs);
  HFTA_CHECK(o.batch_size >= 1, "--batch-size must be at least 1, got {}", o.batch_size);
  HFTA_CHECK(o.iters_per_epoch >= 0, "--iters-per-epoch must be >= 0, got {}", o.iters_per_epoch);
  HFTA_CHECK(o.first_epoch >= 0, "--first-epoch must be >= 0, got {}", o.first_epoch);
  HFTA_CHECK(o.threads >= 0, "--threads must be 0 (all cores) or more, got {}", o.threads);
  // Validate the hyperparameters and the model name before the (slow) data load.
  const int64_t B = array_size(o.hyper);
  const HyperValues h = resolve_hyper(o.optimizer, o.hyper, B);
  prepare_runtime(o.threads, o.deterministic);
  const Device device = checked_device(o.device, o.model, o.plan);
  const ModelInfo& info = model_info(o.model);
  Shape sample_shape = info.default_sample_shape;
  if (o.npoints > 0 && sample_shape.rank() == 2) sample_shape[0] = o.npoints;  // [L, 3] clouds
  Data data = load_data(o.dataset, o.data_dir, sample_shape, info.default_num_classes,
                        o.synthetic_train_size, o.synthetic_test_size, o.seed,
                        info.task == ModelTask::kSegment);
  ModelConfig config = model_config(o.model, data, o.dropout, o.no_decay_norm_bias);
  config.device = device;
  // Builds one model now, so that data the architecture cannot take fails before training.
  make_model(config.name, config.spec({0}, o.batch_size, o.seed));
  config.plan = ExecutionPlan::parse(o.plan);
  config.first_model_id = o.first_model_id;
  config.plan_memory_budget = o.memory_budget_bytes;

  TrainResult result = train_arrays(
      o, {.B = B,
          .metrics_columns = metrics_columns(),
          .check_resumable =
              [&](const Checkpoint& c, const std::string& path, const std::vector<int64_t>& ids) {
                check_resumable(c, o, config, pick_models(h, ids), ids, path);
                // The plan the checkpoint's array ran, rather than timing them again.
                if (config.plan.kind == ExecutionPlan::Kind::kAuto && !c.plan.empty())
                  config.plan = ExecutionPlan::parse(c.plan);
              },
          .make_array =
              [&](const std::vector<int64_t>& ids, CsvWriter& metrics) {
                return make_classifier_run(o, config, h, ids, data, metrics);
              },
          .announce =
              [&] {
                fmt::print("{}\n", cpu::describe_runtime());
                if (config.device != Device::kCpu)
                  fmt::print("{}\n", describe_device(config.device));
                fmt::print(
                    "training {} {} model{} ({}) on {}: {} train / {} test samples, batch {}, {} "
                    "epoch{}{}\n",
                    B, o.model, B == 1 ? "" : "s", o.serial ? "serial: one after another" : "fused",
                    o.dataset, data.train.size, data.test.size, o.batch_size, o.epochs,
                    o.epochs == 1 ? "" : "s",
                    o.iters_per_epoch
                        ? fmt::format(", at most {} steps per epoch", o.iters_per_epoch)
                        : "");
                std::fflush(stdout);
              },
          .announce_checkpoints = true});
  result.wall_seconds = seconds_since(start);  // data loading included

  write_summary(o, h, result.models);
  // Segmentation: the best model is the one of the best mean IoU.
  const bool seg = info.task == ModelTask::kSegment;
  auto best =
      std::max_element(result.models.begin(), result.models.end(),
                       [seg](const ModelResult& a, const ModelResult& b) {
                         return seg ? a.test_miou < b.test_miou : a.test_accuracy < b.test_accuracy;
                       });
  fmt::print(
      "done in {:.1f} s; best: model {} (lr {:g}) with {}; results in "
      "{}/summary.csv and {}/metrics.csv\n",
      result.wall_seconds, best->model, h.at("lr")[static_cast<size_t>(best->model)],
      seg ? fmt::format("mean IoU {:.4f} ({:.2f}% of test points right)", best->test_miou,
                        100.0 * best->test_accuracy)
          : fmt::format("{:.2f}% test accuracy", 100.0 * best->test_accuracy),
      o.out, o.out);
  return result;
}

}  // namespace hfta
