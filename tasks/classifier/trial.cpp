// `hfta trial` of a classifier: the arrays of run/trial_loop.h, trained by the loop of
// train_loop.h (the step `hfta train` runs) with Adam.
#include <fmt/format.h>

#include "core/device_memory.h"
#include "core/error.h"
#include "run/data.h"
#include "run/plan_choice.h"
#include "run/trial_loop.h"
#include "tasks/classifier/classifier.h"
#include "tasks/classifier/train_loop.h"

namespace hfta {

namespace {

class ClassifierTrialArray final : public TrialArray {
 public:
  ClassifierTrialArray(ModelArray array, const Dataset& train, int64_t batch_size, uint64_t seed)
      : array_(std::move(array)),
        loader_(train, {.batch_size = batch_size, .seed = seed}),
        batch_(loader_.make_batch()),
        batch_size_(batch_size) {}

  double steps(int64_t n) override {
    train_steps(array_, loader_, batch_, n);
    synchronize(array_.model->spec().device);  // the timed steps end when the device is done
    return static_cast<double>(n * batch_size_);
  }
  void reset_profile() override { array_.model->reset_profile(); }
  void print_profile(double) const override {
    if (array_.model->profiling()) fmt::print(stderr, "{}\n", array_.model->profile_report());
  }
  int64_t params_per_model() const override { return array_.model->params_per_model(); }
  std::string plan() const override { return array_.model->plan().str(); }
  double flops_per_step() const override {
    return static_cast<double>(array_.model->B() * batch_size_) *
           array_.model->train_flops_per_sample();
  }

 private:
  ModelArray array_;
  Loader loader_;
  Batch batch_;
  int64_t batch_size_;
};

}  // namespace

TrialResult run_trial_classifier(const TrialOptions& o) {
  check_trial_options(o);
  prepare_runtime(o.threads, o.deterministic);
  const Device device = checked_device(o.device, o.model, o.plan);
  // Learning rates log-uniform in [1e-4, 1e-2]; Adam's defaults for the rest.
  const HyperValues h = resolve_hyper("adam", {{"lr", trial_learning_rates(o, -4.0f, -2.0f)}}, o.B);

  const ModelInfo& info = model_info(o.model);
  // Enough samples for a few distinct batches; real data is the full training split.
  HFTA_CHECK(o.npoints >= 0, "--npoints must be 0 (the model's) or more, got {}", o.npoints);
  Shape sample_shape = info.default_sample_shape;
  if (o.npoints > 0) {
    HFTA_CHECK(sample_shape.rank() == 2, "--npoints: {} does not take point clouds", o.model);
    sample_shape[0] = o.npoints;
  }
  const Data data =
      load_data(o.dataset, o.data_dir, sample_shape, info.default_num_classes, 8 * o.batch_size,
                o.batch_size, o.seed, info.task == ModelTask::kSegment);
  ModelConfig config = model_config(o.model, data);
  config.plan = ExecutionPlan::parse(o.plan);
  config.device = device;
  return run_timed_trial(o, [&](const std::vector<int64_t>& ids) {
    return std::make_unique<ClassifierTrialArray>(
        make_array(config, ids, o.batch_size, o.seed, "adam", h), data.train, o.batch_size, o.seed);
  });
}

}  // namespace hfta
