#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <numeric>

#include "backend/cpu/runtime.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/rng.h"
#include "run/data.h"
#include "run/plan_choice.h"
#include "tasks/classifier/classifier.h"
#include "tasks/classifier/train_loop.h"

namespace hfta {

TrialResult run_trial_classifier(const TrialOptions& o) {
  HFTA_CHECK(o.B >= 1, "--B must be at least 1, got {}", o.B);
  HFTA_CHECK(o.steps >= 1, "--steps must be at least 1, got {}", o.steps);
  HFTA_CHECK(o.warmup_steps >= 0, "--warmup must be >= 0, got {}", o.warmup_steps);
  HFTA_CHECK(o.batch_size >= 1, "--batch-size must be at least 1, got {}", o.batch_size);
  HFTA_CHECK(o.threads >= 0, "--threads must be 0 or more, got {}", o.threads);
  prepare_runtime(o.threads);

  // Learning rates log-uniform in [1e-4, 1e-2], drawn per model from the hyperparameter stream;
  // Adam's defaults for the rest.
  std::vector<float> lr;
  for (int64_t b = 0; b < o.B; ++b) {
    RngStream rng = RngStream::for_model(o.seed, b, kRngHyper);
    lr.push_back(std::pow(10.0f, rng.uniform(-4.0f, -2.0f)));
  }
  const HyperValues h = resolve_hyper("adam", {{"lr", lr}}, o.B);

  const ModelInfo& info = model_info(o.model);
  // Enough samples for a few distinct batches; real data is the full training split.
  HFTA_CHECK(o.npoints >= 0, "--npoints must be 0 (the model's) or more, got {}", o.npoints);
  Shape sample_shape = info.default_sample_shape;
  if (o.npoints > 0) {
    HFTA_CHECK(sample_shape.rank() == 2, "--npoints: {} does not take point clouds", o.model);
    sample_shape[0] = o.npoints;
  }
  Data data = load_data(o.dataset, o.data_dir, sample_shape, info.default_num_classes,
                        8 * o.batch_size, o.batch_size, o.seed, info.task == ModelTask::kSegment);
  ModelConfig config = model_config(o.model, data);
  config.plan = ExecutionPlan::parse(o.plan);
  const std::vector<std::vector<int64_t>> groups = array_groups(o.B, o.serial);

  TrialResult r{};
  for (const auto& ids : groups) {
    ModelArray array = make_array(config, ids, o.batch_size, o.seed, "adam", h);
    Loader loader(data.train, {.batch_size = o.batch_size, .seed = o.seed});
    Batch batch = loader.make_batch();
    train_steps(array, loader, batch, o.warmup_steps);
    if (o.before_timed) o.before_timed();
    array.model->reset_profile();
    const auto start = std::chrono::steady_clock::now();
    train_steps(array, loader, batch, o.steps);
    r.seconds += seconds_since(start);
    if (array.model->profiling()) fmt::print(stderr, "{}\n", array.model->profile_report());
    r.params_per_model = array.model->params_per_model();
    r.plan = array.model->plan().str();
    r.flops_per_step +=
        static_cast<double>(ids.size() * o.batch_size) * array.model->train_flops_per_sample();
  }
  r.samples_per_second = static_cast<double>(o.B * o.steps * o.batch_size) / r.seconds;
  r.step_ms = r.seconds / static_cast<double>(o.steps) * 1000.0;
  return r;
}

}  // namespace hfta
