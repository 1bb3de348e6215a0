#include "tasks/tasks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/device_memory.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "run/train.h"
#include "run/trial.h"

namespace hfta {

std::span<const Task* const> all_tasks() {
  static const Task* const tasks[] = {&classifier_task(), &language_model_task(), &masked_lm_task(),
                                      &gan_task()};
  return tasks;
}

const Task& task_for_model(const std::string& model) {
  for (const Task* t : all_tasks()) {
    const std::vector<std::string> names = t->model_names();
    if (std::find(names.begin(), names.end(), model) != names.end()) return *t;
  }
  fail("unknown model '{}': choose one of {}", model, fmt::join(task_model_names(), ", "));
}

std::vector<std::string> task_model_names() {
  std::vector<std::string> names;
  for (const Task* t : all_tasks())
    for (std::string& m : t->model_names()) names.push_back(std::move(m));
  return names;
}

TrainResult run_train(const TrainOptions& options) {
  return task_for_model(options.model).train(options);
}

TrialResult run_trial(const TrialOptions& options) {
  const Task& task = task_for_model(options.model);
  HFTA_CHECK(options.device == "cpu" || task.reads_flag(options.model, "--device"),
             "--device {}: --model {} ({}) trains on the CPU only so far", options.device,
             options.model, task.kind());
  return task.trial(options);
}

Device checked_device(const std::string& name, const std::string& plan) {
  const Device device = parse_device(name);
  if (device == Device::kCpu) return device;
  HFTA_CHECK(plan == "auto" || plan == "fused",
             "--device {} runs plan fused (one call per op for all models), got --plan {}: use "
             "--plan fused or leave --plan out",
             name, plan);
  HFTA_CHECK(device_available(device), "--device {}: {}", name, describe_device(device));
  return device;
}

EvalReport run_eval(const Checkpoint& c, const std::string& path, const EvalOptions& options) {
  const Task& task = task_for_model(c.model);
  HFTA_CHECK(options.device == "cpu" || task.reads_flag(c.model, "--device"),
             "--device {}: {} holds {} models ({}), which run on the CPU only so far",
             options.device, path, c.model, task.kind());
  return task.evaluate(c, path, options);
}

}  // namespace hfta
