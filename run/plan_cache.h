// Plan auto's cache (run/plan_choice.h) and the other choice kept in it, the sgemm library of
// each transposition case: measured once per machine, read by every later run.
//
// The cache is a JSON file: $HFTA_PLAN_CACHE, else $XDG_CACHE_HOME/hfta/plans.json, else
// ~/.cache/hfta/plans.json. Its keys name the CPU, the thread count, the configuration (for a
// classifier: the architecture, the sample shape, classes, B, the batch size and the optimizer)
// and the build (a rebuilt hfta measures again); delete the file to measure again.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/runtime.h"
#include "models/plan.h"

namespace hfta {

// The processor's name ("AMD EPYC 9B45", from /proc/cpuinfo), or "unknown cpu".
std::string cpu_model_name();
// Where the plan cache lives (see the top of the file).
std::string plan_cache_path();
// The key of `configuration`'s entry (what else decides the timings: the architecture, B, the
// batch size, the optimizer) on this machine, its thread count, mode and build.
std::string plan_cache_key(const std::string& configuration);

// The plan cache at `path`: `key`'s plan, or its sgemm routing (choose_gemm_library), or nothing
// when the file, the entry or its value is missing or malformed. It is only a cache: a bad entry
// is measured again, never an error.
std::optional<ExecutionPlan> cached_plan(const std::string& path, const std::string& key);
std::optional<cpu::GemmRouting> cached_gemm_routing(const std::string& path,
                                                    const std::string& key);
// Sets `key`'s entry of the cache at `path` to `plan` and the candidates' step times (by plan
// name; a later time of a name replaces an earlier). Best effort: a cache that cannot be written
// is said through `log`, and the next run measures again.
void cache_plan(const std::string& path, const std::string& key, const ExecutionPlan& plan,
                const std::vector<std::pair<std::string, double>>& timings_ms,
                const std::function<void(const std::string&)>& log);

// The sgemm library of each transposition case for this machine (backend/cpu/gemm_timing.h).
// HFTA_GEMM=onednn|openblas names one for all; unset or auto, the routing cached for this CPU
// and these library builds (OpenBLAS's kernel set included) is used, else both libraries are
// timed once (about half a second, said through `log`) and the routing is cached beside the
// plans, so that every process of a sweep or a resumed run uses the same one. Measured at most
// once per process; sets cpu::gemm_routing() on every call and returns it.
cpu::GemmRouting choose_gemm_library(const std::function<void(const std::string&)>& log);

// Start-up of every hfta command that trains or times: deterministic mode (core/determinism.h),
// the thread count (0 = leave OpenMP's default) and the sgemm library (above), whose
// measurement, when one runs, is printed.
void prepare_runtime(int threads, bool deterministic);

}  // namespace hfta
