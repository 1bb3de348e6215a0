#include "run/trial_loop.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "core/clock.h"
#include "core/error.h"
#include "core/rng.h"
#include "run/train_run.h"

namespace hfta {

void check_trial_options(const TrialOptions& o, int64_t min_batch, std::string_view batch_what) {
  HFTA_CHECK(o.B >= 1, "--B must be at least 1, got {}", o.B);
  HFTA_CHECK(o.steps >= 1, "--steps must be at least 1, got {}", o.steps);
  HFTA_CHECK(o.warmup_steps >= 0, "--warmup must be >= 0, got {}", o.warmup_steps);
  HFTA_CHECK(o.batch_size >= min_batch, "--batch-size{} must be at least {}, got {}",
             batch_what.empty() ? std::string() : fmt::format(" ({})", batch_what), min_batch,
             o.batch_size);
  HFTA_CHECK(o.threads >= 0, "--threads must be 0 or more, got {}", o.threads);
}

std::vector<float> trial_learning_rates(const TrialOptions& o, float lo, float hi) {
  std::vector<float> lr;
  for (int64_t b = 0; b < o.B; ++b) {
    RngStream rng = RngStream::for_model(o.seed, b, kRngHyper);
    lr.push_back(std::pow(10.0f, rng.uniform(lo, hi)));
  }
  return lr;
}

TrialResult run_timed_trial(const TrialOptions& o, const TrialArrayBuilder& build) {
  TrialResult r{};
  r.flops_per_step = 0.0;
  double samples = 0.0;  // summed over models
  for (const std::vector<int64_t>& ids : array_groups(o.B, o.serial)) {
    std::unique_ptr<TrialArray> array = build(ids);
    array->steps(o.warmup_steps);
    if (o.before_timed) o.before_timed();
    array->reset_profile();
    const auto start = Clock::now();
    const double per_model = array->steps(o.steps);
    const double seconds = seconds_since(start);
    r.seconds += seconds;
    samples += static_cast<double>(ids.size()) * per_model;
    array->print_profile(seconds / static_cast<double>(o.steps) * 1000.0);
    r.params_per_model = array->params_per_model();
    r.plan = array->plan();
    r.flops_per_step += array->flops_per_step();
  }
  r.samples_per_second = samples / r.seconds;
  r.step_ms = r.seconds / static_cast<double>(o.steps) * 1000.0;
  return r;
}

}  // namespace hfta
