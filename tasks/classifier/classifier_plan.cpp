#include "tasks/classifier/classifier_plan.h"

#include <fmt/format.h>

#include <memory>

#include "core/rng.h"
#include "run/hyper.h"

namespace hfta {

namespace {

// A classifier's configuration: what besides the plan decides the time of its step.
std::string model_configuration(const ModelConfig& config, int64_t B, int64_t batch_size,
                                std::string_view optimizer) {
  return fmt::format("{} {} {} classes{} | B {} | batch {} | {}", config.name,
                     config.sample_shape.str(), config.num_classes,
                     config.dropout ? fmt::format(" dropout {}", *config.dropout) : "", B,
                     batch_size, optimizer);
}

// Builds a classifier's candidate arrays, stepping them on random inputs (the time of a step
// does not depend on the values), made at the first build: a plan read from the cache needs none.
class ClassifierTrials {
 public:
  ClassifierTrials(const ModelConfig& config, const std::vector<int64_t>& ids, int64_t batch_size,
                   uint64_t seed, std::string_view optimizer)
      : config_(config), ids_(ids), batch_size_(batch_size), seed_(seed), optimizer_(optimizer) {}

  PlanTrialRun operator()(const ExecutionPlan& plan) {
    if (images_.empty()) make_inputs();
    ModelConfig c = config_;
    c.plan = plan;
    auto array = std::make_shared<ModelArray>(
        ModelArray{.ids = ids_, .model = make_model(c.name, c.spec(ids_, batch_size_, seed_))});
    PlanTrialRun run{.arena_bytes = static_cast<double>(array->model->arena_bytes())};
    // A call is one visit: the plan's steps per visit (1 unless /K), each on the same inputs.
    run.steps_per_call = array->model->layout().steps_per_visit;
    if (static_cast<int64_t>(visit_.size()) < run.steps_per_call)
      visit_.resize(static_cast<size_t>(run.steps_per_call), {x_, y_});
    run.step = [this, array, n = static_cast<size_t>(run.steps_per_call)] {
      if (!array->optimizer)  // at the first step: a candidate over the budget makes none
        array->optimizer =
            make_optimizer(optimizer_, *array->model,
                           resolve_hyper(optimizer_, {}, static_cast<int64_t>(ids_.size())),
                           config_.no_decay_norm_bias);
      array_steps(*array, std::span<const Model::StepBatch>(visit_).first(n));
    };
    return run;
  }

 private:
  void make_inputs() {
    RngStream rng(seed_, kPlanTimingInputs);
    images_.resize(static_cast<size_t>(batch_size_ * config_.sample_shape.numel()));
    for (float& v : images_) v = rng.normal();
    // One label per sample, or per point for a segmentation model.
    ModelConfig one = config_;
    one.plan = ExecutionPlan::fused();
    const int64_t per_sample =
        make_model(one.name, one.spec({ids_[0]}, 1, seed_))->labels_per_sample();
    labels_.resize(static_cast<size_t>(batch_size_ * per_sample));
    for (size_t i = 0; i < labels_.size(); ++i)
      labels_[i] = static_cast<int32_t>(i % static_cast<size_t>(config_.num_classes));
    Shape shape{batch_size_};
    for (int64_t d : config_.sample_shape) shape.push_back(d);
    x_ = TensorView(images_.data(), shape);
    y_ = IndexView(labels_.data(),
                   per_sample == 1 ? Shape{batch_size_} : Shape{batch_size_, per_sample});
  }

  ModelConfig config_;
  std::vector<int64_t> ids_;
  int64_t batch_size_;
  uint64_t seed_;
  std::string optimizer_;
  std::vector<float> images_;
  std::vector<int32_t> labels_;
  TensorView x_;
  IndexView y_;
  // The minibatch of each step of a visit: the same inputs (only the time is measured).
  std::vector<Model::StepBatch> visit_;
};
}  // namespace

std::vector<PlanTiming> time_plans(const std::vector<ExecutionPlan>& plans,
                                   const ModelConfig& config, const std::vector<int64_t>& ids,
                                   int64_t batch_size, uint64_t seed, std::string_view optimizer,
                                   int64_t memory_budget_bytes, double interleave_bytes) {
  ClassifierTrials trials(config, ids, batch_size, seed, optimizer);
  return time_plans(plans, std::ref(trials), memory_budget_bytes, interleave_bytes);
}

PlanChoice resolve_plan(const ExecutionPlan& asked, const ModelConfig& config,
                        const std::vector<int64_t>& ids, int64_t batch_size, uint64_t seed,
                        std::string_view optimizer, int64_t memory_budget_bytes,
                        const std::function<void(const std::string&)>& log) {
  const int64_t B = static_cast<int64_t>(ids.size());
  ClassifierTrials trials(config, ids, batch_size, seed, optimizer);
  return resolve_plan(asked, B, model_configuration(config, B, batch_size, optimizer), config.name,
                      std::ref(trials), memory_budget_bytes, log, /*visits=*/true);
}

}  // namespace hfta
