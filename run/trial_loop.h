// The timed trial loop of every task (`hfta trial`, the unit `hfta sweep` repeats): the task
// builds each array of the trial (its data, models, optimizer and step), this loop checks the
// options, warms every array up, times its steps and adds up what they report.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "run/trial.h"

namespace hfta {

// One array of a trial as its task builds it.
class TrialArray {
 public:
  virtual ~TrialArray() = default;
  // `n` training steps of every model of the array (forward, backward and update) on the next
  // minibatches; returns the samples each model trained on (rows, or tokens for text).
  virtual double steps(int64_t n) = 0;
  virtual void reset_profile() = 0;
  // With HFTA_PROFILE=1: the array's per-node profile on stderr, for steps of `step_ms`.
  virtual void print_profile(double step_ms) const = 0;
  virtual int64_t params_per_model() const = 0;
  // The plan its steps ran under (plan auto resolved).
  virtual std::string plan() const = 0;
  // Analytic forward + backward FLOPs of one step of all its models.
  virtual double flops_per_step() const = 0;
};
// Builds the array of models `ids` of the trial.
using TrialArrayBuilder =
    std::function<std::unique_ptr<TrialArray>(const std::vector<int64_t>& ids)>;

// Throws hfta::Error naming the first option out of range: B, steps, warm-up, threads, and a
// batch of fewer than `min_batch` rows (`batch_what` says what they are, e.g. "token streams").
void check_trial_options(const TrialOptions& options, int64_t min_batch = 1,
                         std::string_view batch_what = {});

// Model b's learning rate of a trial: 10^u, u uniform in [lo, hi] from the hyperparameter stream
// (seed, b), so every B measures distinct hyperparameters.
std::vector<float> trial_learning_rates(const TrialOptions& options, float lo, float hi);

// The trial: B models as one array, or with `serial` each alone one after another, each array
// built by `build`, stepped `warmup_steps` untimed, then (after options.before_timed) `steps`
// timed. Samples per second add up every model's samples.
TrialResult run_timed_trial(const TrialOptions& options, const TrialArrayBuilder& build);

}  // namespace hfta
