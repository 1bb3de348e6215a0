// `--plan auto` of a classifier array (run/plan_choice.h): its candidates built on random inputs
// and stepped by the classifiers' loop (train_loop.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "run/plan_choice.h"
#include "tasks/classifier/train_loop.h"

namespace hfta {

// time_plans (run/plan_choice.h) for the array of config's models `ids` at `batch_size`, trained by
// `optimizer` (its defaults: the time of an update does not depend on the values), on random
// inputs.
std::vector<PlanTiming> time_plans(const std::vector<ExecutionPlan>& plans,
                                   const ModelConfig& config, const std::vector<int64_t>& ids,
                                   int64_t batch_size, uint64_t seed, std::string_view optimizer,
                                   int64_t memory_budget_bytes, double interleave_bytes);

// resolve_plan (run/plan_choice.h) for the array of config's models `ids` at `batch_size`, trained
// by `optimizer`.
PlanChoice resolve_plan(const ExecutionPlan& asked, const ModelConfig& config,
                        const std::vector<int64_t>& ids, int64_t batch_size, uint64_t seed,
                        std::string_view optimizer, int64_t memory_budget_bytes,
                        const std::function<void(const std::string&)>& log);

}  // namespace hfta
