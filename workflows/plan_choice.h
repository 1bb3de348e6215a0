// `--plan auto`: picks an execution plan (models/plan.h) for one array on this machine by timing
// a few training steps of each candidate, and remembers the choice per machine and
// configuration, so later runs (every trial of a sweep) start at once.
//
// The cache is a JSON file: $HFTA_PLAN_CACHE, else $XDG_CACHE_HOME/hfta/plans.json, else
// ~/.cache/hfta/plans.json. Its keys name the CPU, the thread count, the architecture, the sample
// shape, classes, B, the batch size, the optimizer and the build (a rebuilt hfta measures again);
// delete the file to measure again.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "models/plan.h"
#include "workflows/train_loop.h"

namespace hfta {

// The plans worth timing for B models on `threads` threads: fused; chunks of 1, 2, 4, ... models
// below B; threads when both B and threads exceed 1, and threads:1 when B exceeds threads.
std::vector<ExecutionPlan> plan_candidates(int64_t B, int threads);

struct PlanTiming {
  ExecutionPlan plan;
  double step_ms =
      0.0;  // median time of one optimizer step (forward, backward, update), all B models
  double arena_bytes = 0.0;  // parameters, gradients, buffers and activations under the plan
  bool over_budget = false;  // not run: its arenas exceed the memory budget
};

// The median time of a step (forward, backward and update of all models) of each of `plans` for
// the array of config's models `ids`, in their order; those whose arenas exceed
// `memory_budget_bytes` (0 = no limit) are marked over budget and not run. While the candidates'
// arrays fit in `interleave_bytes` together they are all built and timed in bursts of a few
// steps, round by round with the order rotating; otherwise each is built and timed alone, one
// after another.
std::vector<PlanTiming> time_plans(const std::vector<ExecutionPlan>& plans,
                                   const ModelConfig& config, const std::vector<int64_t>& ids,
                                   int64_t batch_size, uint64_t seed, std::string_view optimizer,
                                   int64_t memory_budget_bytes, double interleave_bytes);

struct PlanChoice {
  ExecutionPlan plan;
  std::vector<PlanTiming> timings;  // empty when the choice came from the cache
  bool cached = false;
  std::string cache_path;
};

// Returns `asked` unless it is auto; then times every candidate (or reads the cache) for the
// array of config's models `ids` at `batch_size`, in interleaved bursts of steps (a neighbour's
// load slows all candidates alike), trained by `optimizer` (its defaults: the time
// of an update does not depend on the values), skipping candidates whose arenas exceed
// `memory_budget_bytes` (0 = no limit), and says what it measured and chose through `log`.
PlanChoice resolve_plan(const ExecutionPlan& asked, const ModelConfig& config,
                        const std::vector<int64_t>& ids, int64_t batch_size, uint64_t seed,
                        std::string_view optimizer, int64_t memory_budget_bytes,
                        const std::function<void(const std::string&)>& log);

// The processor's name ("AMD EPYC 9B45", from /proc/cpuinfo), or "unknown cpu".
std::string cpu_model_name();
// Where the plan cache lives (see the top of the file).
std::string plan_cache_path();

}  // namespace hfta
