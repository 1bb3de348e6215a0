// `--plan auto`: picks an execution plan (models/plan.h) for one array on this machine by timing
// a few training steps of each candidate, and remembers the choice per machine and
// configuration (run/plan_cache.h), so later runs (every trial of a sweep) start at once.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/cpu/runtime.h"
#include "models/plan.h"
#include "run/plan_cache.h"

namespace hfta {

// The plans worth timing for B models on `threads` threads: fused; chunks of 1, 2, 4, ... models
// below B; threads when both B and threads exceed 1, and threads:1 when B exceeds threads.
std::vector<ExecutionPlan> plan_candidates(int64_t B, int threads);

// Arrays that can visit a group for several steps (classifiers) also get the plan that gives
// each worker one model at a time (visited_plan) timed with /K when a visit of it is short (a
// visit's K steps of a slow model would make the timing long, and its models' state outgrows the
// caches anyway): K steps per visit, at most kCheapVisitMs a visit, which LeNet's visits at B =
// threads fit (docs/benchmarks.md, "Plan auto: visits at B = threads"); at B not a multiple of
// the threads, threads:1+balanced/K too (visits_round_plans, below).
inline constexpr int64_t kVisitSteps = 8;

// The RNG stream (with the run's seed) of the random inputs candidates are timed on, where an
// array has no batch of its own at hand (classifiers, DCGAN): values do not change the time.
inline constexpr uint64_t kPlanTimingInputs = 0x91a7;
inline constexpr double kCheapVisitMs = 400.0;

// The plan whose visits are timed: threads:1 when B exceeds the threads, else threads (a worker
// per model).
ExecutionPlan visited_plan(int64_t B, int threads);

struct PlanTiming {
  ExecutionPlan plan;
  // Median time of one optimizer step (forward, backward, update), all B models, with the share
  // of the machine that other load took while it ran removed (foreign_share, below).
  double step_ms = 0.0;
  double foreign_share = 0.0;   // mean share of the CPUs other load took while it was timed
  double arena_bytes = 0.0;     // parameters, gradients, buffers and activations under the plan
  bool over_budget = false;     // not run: its arenas exceed the memory budget, or (then
  bool over_available = false;  // also set) the memory the machine had available (core/arena.h)
  bool interleaved = false;     // timed in bursts side by side with the other plans of its round
  // resolve_plan's rounds, each choosing between fewer plans timed again: 1 for every candidate,
  // then the confirming round and the visits round where they run (below).
  int round = 1;
};

// The plans of the visits round for the rounds so far (`timings`) on `threads` threads: the last
// round's choice first, then, where a visit is cheap (kCheapVisitMs, judged by visited_plan's
// step), visited_plan/kVisitSteps (threads:1+fused/kVisitSteps when that plan is the choice), and
// where B exceeds the threads and is not a multiple of them, threads:1+balanced/K (models/plan.h:
// each thread B parts of a visit) with K = kVisitSteps, or the threads (a step a part) where
// those visits are not cheap. None when there is nothing to time against the choice.
std::vector<ExecutionPlan> visits_round_plans(const std::vector<PlanTiming>& timings, int64_t B,
                                              int threads);

// Candidates too big to hold together are timed one after another, minutes apart on a slow
// model, and a hypervisor's steal or a neighbour's process takes a share of the CPUs that changes
// from minute to minute, by as much as the plans differ (docs/benchmarks.md, "Plan auto's
// timings with other load removed"). A burst of at least kLoadCorrectedBurstMs is therefore timed
// as if the machine had been ours:
// each of its steps' times times (1 - foreign_share of the burst: the share of the CPUs' time
// that neither this process nor idleness took). Shorter bursts are left as measured: /proc/stat
// counts in 10 ms ticks, too coarse for them, and they are interleaved, so load slows every
// candidate alike.
inline constexpr double kLoadCorrectedBurstMs = 2000.0;
inline constexpr double kMaxForeignShare = 0.5;
// The share of `cpus` CPUs over `wall_ms` that `foreign_cpu_seconds` is, clamped to
// [0, kMaxForeignShare] (a tick-rounded negative, or a burst that was mostly someone else's).
double foreign_share(double wall_ms, double foreign_cpu_seconds, int cpus);

// One candidate plan's array, built for timing: its arenas' bytes and one training step
// (forward, backward and update of all its models) on fixed inputs. Whatever the step needs
// beyond the arenas (optimizer state) it may make at its first call, so that a candidate over
// the memory budget, never stepped, allocates only its arenas.
struct PlanTrialRun {
  double arena_bytes = 0.0;
  std::function<void()> step;
  int64_t steps_per_call = 1;  // steps one call of `step` takes (a plan's /K)
};
// Builds the array of one candidate plan (any kind of array: a classifier, a GAN).
using PlanTrialBuilder = std::function<PlanTrialRun(const ExecutionPlan&)>;

// Plan auto's timings of one plan vary by a few percent from run to run, so candidates within
// kPlanTieFraction of the fastest are taken as equally fast, and among them the fastest that runs
// like processes (below) is chosen: that layout gains whatever separate processes gain on the
// machine (a phase where one model per core runs faster than one model on all cores), which a
// plan of several models per thread or of models on all threads does not (docs/benchmarks.md,
// "Plan auto: ties go to the processes' layout").
inline constexpr double kPlanTieFraction = 0.03;
// Whether `plan` lays B models out over `threads` threads as single-thread processes would: at
// least two workers, each running one model at a time (threads:1 and its +fused and /K forms,
// threads when B <= threads).
bool runs_like_processes(const ExecutionPlan& plan, int64_t B, int threads);
// The timing plan auto chooses among `timings` of round `round` that were run (not over a
// budget): the fastest, or the fastest that runs like processes within kPlanTieFraction of it.
// Null when none of that round ran.
const PlanTiming* preferred_timing(const std::vector<PlanTiming>& timings, int round, int64_t B,
                                   int threads);

// Round 1's candidates are timed one after another when their arrays are too big to hold
// together, seconds apart, and the machine's phase can change between two of them by more than
// the plans differ (docs/benchmarks.md, "LeNet's three sweeps again, in a slow phase": fused
// chosen for 10 LeNets at 189 ms a step against threads:1's 212, then run at 182-225 ms against
// ten processes' 181). Bursts of kLoadCorrectedBurstMs or more have other load removed; shorter
// ones do not. So when round 1 timed its candidates one after another in such short bursts, a
// confirming round times its choice again against every plan that runs like processes (at odd B
// both threads:1 and threads:1+fused: round 1 has timed those two alike where they ran 15%
// apart), alternately: each built, timed for a
// burst and freed in turn, kConfirmVisits times (side by side instead when they fit in the
// interleaving bytes below together), and the choice is made among them (preferred_timing, ties
// included).
inline constexpr int kConfirmVisits = 3;
// The plans of the confirming round (above) for round 1's `timings` on `threads` threads, round
// 1's choice first; none when no round is needed (round 1 timed side by side or in long bursts,
// or no other plan to time against).
std::vector<ExecutionPlan> confirming_round_plans(const std::vector<PlanTiming>& timings, int64_t B,
                                                  int threads);

// Candidates are timed side by side (interleaved) only while all of them together take at most
// this many arena bytes: above it the peak memory of a first run, which times them, would be
// several arrays' instead of one (docs/benchmarks.md, "Plan auto's memory"), so each is built,
// timed and freed in turn, its long bursts load-corrected instead.
inline constexpr double kInterleaveBytes = 256.0 * (1 << 20);

// The median time of a step of each of `plans`, built by `build`, in their order; those whose
// arenas exceed `memory_budget_bytes` (0 = no limit) are marked over budget and not run. While
// the candidates' arrays fit in `interleave_bytes` together they are all built and timed in
// bursts of a few steps, round by round with the order rotating; otherwise each is built and
// timed alone, one after another.
std::vector<PlanTiming> time_plans(const std::vector<ExecutionPlan>& plans,
                                   const PlanTrialBuilder& build, int64_t memory_budget_bytes,
                                   double interleave_bytes);
// The median time of a step of each of `plans` whose arrays are not held together: kConfirmVisits
// times in turn (the order rotating), each is built, timed for a burst of about `burst_ms`, and
// freed. The first plan's time is its median step; every other plan's is that times the median
// of its visits' ratios to the first plan's in the same visit, so that a change of the machine's
// phase during the round moves one ratio, not a whole plan's timing.
std::vector<PlanTiming> time_alternately(const std::vector<ExecutionPlan>& plans,
                                         const PlanTrialBuilder& build, int64_t memory_budget_bytes,
                                         double burst_ms);
struct PlanChoice {
  ExecutionPlan plan;
  std::vector<PlanTiming> timings;  // empty when the choice came from the cache
  bool cached = false;
  std::string cache_path;
};

// Returns `asked` unless it is auto; then times every candidate for B models on this machine's
// threads (or reads the cache), each built by `build`, in interleaved bursts of steps (a
// neighbour's load slows all candidates alike), skipping candidates whose arenas exceed
// `memory_budget_bytes` (0 = no limit), and says what it measured and chose through `log`.
// Candidates timed one after another may get a confirming round (kConfirmVisits, above).
// With `visits` (the array takes K steps per visit), the visits round (visits_round_plans) is
// then timed. `configuration` names what else decides the timings (architecture, B, batch size,
// optimizer) in the cache's key; `model` names the array in errors.
PlanChoice resolve_plan(const ExecutionPlan& asked, int64_t B, const std::string& configuration,
                        std::string_view model, const PlanTrialBuilder& build,
                        int64_t memory_budget_bytes,
                        const std::function<void(const std::string&)>& log, bool visits = false);
}  // namespace hfta
