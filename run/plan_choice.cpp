#include "run/plan_choice.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/arena.h"
#include "core/error.h"
#include "core/parallel.h"
#include "fused_ops/conv2d.h"
#include "fused_ops/conv_transpose2d.h"
#include "io/process_stats.h"

namespace hfta {

std::vector<ExecutionPlan> plan_candidates(int64_t B, int threads) {
  std::vector<ExecutionPlan> plans = {ExecutionPlan::fused()};
  if (B <= 1) return plans;
  for (int64_t c = 1; c < B; c *= 2) plans.push_back(ExecutionPlan::chunks(c));
  if (threads > 1) {
    plans.push_back(ExecutionPlan::threads());
    // Blocks of several models per thread: also one model at a time (B processes' working set).
    if (B > threads) plans.push_back(ExecutionPlan::threads(1));
    // B not a multiple of the threads: an even share each, the rest fused on all threads after
    // (threads:1 alone leaves threads idle while the others run their extra model).
    if (B > threads && B % threads != 0) plans.push_back(ExecutionPlan::threads(1, 1, true));
  }
  return plans;
}

namespace {

// One candidate under test: its step and what was measured.
struct Candidate {
  PlanTiming timing;
  std::function<void()> step;  // empty when over the budget
  int64_t steps_per_call = 1;
  std::vector<double> ms;              // timed steps (a call's time over its steps), load removed
  std::vector<double> foreign_shares;  // per burst (0 where too short to measure)
};

// What a freed candidate leaves behind, handed back: the conv primitive caches' entries for its
// shapes (blocked activation copies, about two activations per conv shape and calling thread),
// then the pages glibc keeps of freed blocks below its mmap threshold (which grows to 32 MiB as
// big blocks are freed). Without it the next candidate, and then the chosen array, sit on top of
// every earlier candidate's leftovers (docs/benchmarks.md, "Plan auto's memory").
void release_freed_memory() {
  cpu::clear_conv2d_cache();
  cpu::clear_conv_transpose2d_cache();
  malloc_trim(0);
}

// Builds `plan`'s array and, unless its arenas exceed the budget, runs its warm-up step.
Candidate build_candidate(const ExecutionPlan& plan, const PlanTrialBuilder& build,
                          int64_t memory_budget_bytes) {
  PlanTrialRun run;
  try {
    run = build(plan);
  } catch (const OutOfMemory& e) {  // refused before its arenas were zeroed
    return Candidate{.timing = {.plan = plan,
                                .arena_bytes = static_cast<double>(e.needed_bytes()),
                                .over_budget = true,
                                .over_available = true}};
  }
  Candidate k{.timing = {.plan = plan, .arena_bytes = run.arena_bytes}};
  if (memory_budget_bytes > 0 && run.arena_bytes > static_cast<double>(memory_budget_bytes)) {
    k.timing.over_budget = true;
    return k;
  }
  k.step = std::move(run.step);
  k.steps_per_call = std::max<int64_t>(1, run.steps_per_call);
  k.step();  // warm-up: primitives, caches, pages
  return k;
}

// A burst of calls of one candidate: one untimed (its data back in the caches after another
// candidate's burst), then `calls` timed, each with the burst's foreign load removed when the
// burst is long enough to measure it (kLoadCorrectedBurstMs). Returns the milliseconds timed
// (as measured).
double burst(Candidate& k, int calls) {
  k.step();
  const ForeignLoadMeter meter;
  const size_t first = k.ms.size();
  double total = 0.0;
  for (int i = 0; i < calls; ++i) {
    const auto start = std::chrono::steady_clock::now();
    k.step();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    k.ms.push_back(ms / static_cast<double>(k.steps_per_call));
    total += ms;
  }
  double share = 0.0;
  if (total >= kLoadCorrectedBurstMs && meter.readable()) {
    // /proc/stat counts every online CPU, so the share is of all of them.
    share = foreign_share(total, meter.foreign_cpu_seconds(),
                          static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
    for (size_t i = first; i < k.ms.size(); ++i) k.ms[i] *= 1.0 - share;
  }
  k.foreign_shares.push_back(share);
  return total;
}

// The calls of `call_ms` each that fill a burst of about `burst_ms`: 2 to 10.
int calls_per_burst(double burst_ms, double call_ms) {
  return static_cast<int>(std::clamp(burst_ms / std::max(call_ms, 1e-3), 2.0, 10.0));
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// A candidate's timing once its bursts are done: the median step and the mean foreign share.
PlanTiming finished_timing(const Candidate& k) {
  PlanTiming t = k.timing;
  if (!t.over_budget) {
    t.step_ms = median(k.ms);
    t.foreign_share = std::accumulate(k.foreign_shares.begin(), k.foreign_shares.end(), 0.0) /
                      static_cast<double>(k.foreign_shares.size());
  }
  return t;
}

// Appends `again` to `timings` as the next round, unless none of it ran (a plan the machine no
// longer holds): the choice then stays with the rounds before.
void append_round(std::vector<PlanTiming>& timings, std::vector<PlanTiming> again) {
  const int round = timings.back().round + 1;
  for (PlanTiming& t : again) t.round = round;
  if (std::all_of(again.begin(), again.end(), [](const PlanTiming& t) { return t.over_budget; }))
    return;
  timings.insert(timings.end(), again.begin(), again.end());
}

// The round of `visits` (resolve_plan): visits_round_plans (plan_choice.h), timed side by side,
// appended as the next round (the choice is then made among these alone).
void time_visits(std::vector<PlanTiming>& timings, int64_t B, const PlanTrialBuilder& build,
                 int64_t memory_budget_bytes, double interleave_bytes) {
  const std::vector<ExecutionPlan> plans = visits_round_plans(timings, B, num_threads());
  if (plans.empty()) return;
  append_round(timings, time_plans(plans, build, memory_budget_bytes, interleave_bytes));
}

// The confirming round (plan_choice.h): round 1's choice against every plan that runs like
// processes, side by side when they fit in `interleave_bytes` together, else alternately.
void time_confirming_round(std::vector<PlanTiming>& timings, int64_t B,
                           const PlanTrialBuilder& build, int64_t memory_budget_bytes,
                           double interleave_bytes) {
  const std::vector<ExecutionPlan> plans = confirming_round_plans(timings, B, num_threads());
  if (plans.empty()) return;
  double largest = 0.0;
  for (const PlanTiming& t : timings)
    if (std::find(plans.begin(), plans.end(), t.plan) != plans.end())
      largest = std::max(largest, t.arena_bytes);
  // Round 1's candidates took about 300 ms of timed steps each; so does each of these.
  constexpr double kTimedMsPerPlan = 300.0;
  append_round(timings, largest * static_cast<double>(plans.size()) <= interleave_bytes
                            ? time_plans(plans, build, memory_budget_bytes, interleave_bytes)
                            : time_alternately(plans, build, memory_budget_bytes,
                                               kTimedMsPerPlan / kConfirmVisits));
}

}  // namespace

ExecutionPlan visited_plan(int64_t B, int threads) {
  return B > threads ? ExecutionPlan::threads(1) : ExecutionPlan::threads();
}

std::vector<ExecutionPlan> visits_round_plans(const std::vector<PlanTiming>& timings, int64_t B,
                                              int threads) {
  if (B < 2 || threads < 2 || timings.empty()) return {};
  const PlanTiming* best = preferred_timing(timings, timings.back().round, B, threads);
  const ExecutionPlan each = visited_plan(B, threads);
  const PlanTiming* one = nullptr;
  for (const PlanTiming& t : timings)
    if (!t.over_budget && t.plan == each) one = &t;
  if (best == nullptr || one == nullptr) return {};
  std::vector<ExecutionPlan> plans = {best->plan};
  // A visit of K steps takes about K of `each`'s steps.
  auto cheap = [&](int64_t K) { return one->step_ms * static_cast<double>(K) <= kCheapVisitMs; };
  const bool rest_fused = best->plan == ExecutionPlan::threads(1, 1, true);
  if (cheap(kVisitSteps))
    plans.push_back(ExecutionPlan::threads(each.chunk, kVisitSteps, rest_fused));
  // B not a multiple of the threads: visits cut into a part per thread, taken in turn (8 steps,
  // or where those are not cheap, one step a part).
  if (B > threads && B % threads != 0) {
    const int64_t K = cheap(kVisitSteps) ? kVisitSteps : threads;
    if (cheap(K)) plans.push_back(ExecutionPlan::balanced_threads(K));
  }
  if (plans.size() < 2) return {};
  return plans;
}

bool runs_like_processes(const ExecutionPlan& plan, int64_t B, int threads) {
  if (plan.kind != ExecutionPlan::Kind::kThreads) return false;
  const PlanLayout layout = lay_out(plan, B, threads);
  return layout.workers > 1 &&
         std::all_of(layout.groups.begin(), layout.groups.end(), [](const PlanGroup& g) {
           return g.worker == PlanGroup::kAfterWorkers || g.count == 1;
         });
}

namespace {

// The fastest of `timings` of round `round` that ran, or null.
const PlanTiming* fastest_timing(const std::vector<PlanTiming>& timings, int round) {
  const PlanTiming* fastest = nullptr;
  for (const PlanTiming& t : timings)
    if (!t.over_budget && t.round == round && (fastest == nullptr || t.step_ms < fastest->step_ms))
      fastest = &t;
  return fastest;
}

}  // namespace

const PlanTiming* preferred_timing(const std::vector<PlanTiming>& timings, int round, int64_t B,
                                   int threads) {
  const PlanTiming* fastest = fastest_timing(timings, round);
  if (fastest == nullptr) return nullptr;
  const PlanTiming* like_processes = nullptr;
  for (const PlanTiming& t : timings)
    if (!t.over_budget && t.round == round && runs_like_processes(t.plan, B, threads) &&
        t.step_ms <= fastest->step_ms * (1.0 + kPlanTieFraction) &&
        (like_processes == nullptr || t.step_ms < like_processes->step_ms))
      like_processes = &t;
  return like_processes != nullptr ? like_processes : fastest;
}

double foreign_share(double wall_ms, double foreign_cpu_seconds, int cpus) {
  return std::clamp(ForeignLoadMeter::share_of(foreign_cpu_seconds, wall_ms * 1e-3, cpus), 0.0,
                    kMaxForeignShare);
}

// Interleaved bursts (plan_choice.h): a neighbour's load on a shared machine then slows every
// candidate alike instead of the ones timed while it ran.
std::vector<PlanTiming> time_plans(const std::vector<ExecutionPlan>& plans,
                                   const PlanTrialBuilder& build, int64_t memory_budget_bytes,
                                   double interleave_bytes) {
  std::vector<PlanTiming> timings;
  // At least 3 bursts of at least 2 calls (steps, or visits of K steps) per candidate, ~20 ms a
  // burst and ~0.3 s a candidate.
  auto finish = [&](Candidate& k) { timings.push_back(finished_timing(k)); };
  auto burst_calls = [](const Candidate& k) {  // calls of ~20 ms in all
    return calls_per_burst(20.0, k.ms.front() * static_cast<double>(k.steps_per_call));
  };
  // Interleaved only while every candidate fits beside the others, judged by the first one's
  // arenas before any other is built: each candidate held at once adds its memory to the peak of
  // the process, which then trains the winner (plan_choice.h).
  std::vector<Candidate> all;
  all.push_back(build_candidate(plans.front(), build, memory_budget_bytes));
  const bool interleave =
      all.front().timing.arena_bytes * static_cast<double>(plans.size()) <= interleave_bytes;
  if (!interleave) {
    // One candidate alive at a time: each is timed, then freed before the next is built.
    for (size_t i = 0; i < plans.size(); ++i) {
      Candidate k =
          i == 0 ? std::move(all.front()) : build_candidate(plans[i], build, memory_budget_bytes);
      if (i == 0) all.clear();
      double total = 0.0;
      for (int round = 0; !k.timing.over_budget && (round < 3 || (total < 300.0 && round < 15));
           ++round)
        total += burst(k, round == 0 ? 2 : burst_calls(k));
      finish(k);
      k = Candidate{};
      release_freed_memory();
    }
    return timings;
  }
  for (size_t i = 1; i < plans.size(); ++i)
    all.push_back(build_candidate(plans[i], build, memory_budget_bytes));
  std::vector<Candidate*> live;
  for (Candidate& k : all) {
    k.timing.interleaved = true;
    if (!k.timing.over_budget) live.push_back(&k);
  }
  std::vector<double> total(live.size(), 0.0);
  for (size_t round = 0; !live.empty(); ++round) {
    bool more = false;
    for (size_t i = 0; i < live.size(); ++i) {
      const size_t j = (i + round) % live.size();
      Candidate& k = *live[j];
      total[j] += burst(k, round == 0 ? 2 : burst_calls(k));
      more = more || round < 2 || (total[j] < 300.0 && round < 14);
    }
    if (!more) break;
  }
  for (Candidate& k : all) finish(k);
  all.clear();
  release_freed_memory();
  return timings;
}

std::vector<PlanTiming> time_alternately(const std::vector<ExecutionPlan>& plans,
                                         const PlanTrialBuilder& build, int64_t memory_budget_bytes,
                                         double burst_ms) {
  // What each plan's visits measured, gathered across them (a visit's array is freed after it),
  // and each visit's median step (NaN where the plan did not run).
  std::vector<Candidate> measured(plans.size());
  std::vector<std::vector<double>> visit_ms(
      plans.size(), std::vector<double>(kConfirmVisits, std::numeric_limits<double>::quiet_NaN()));
  for (int visit = 0; visit < kConfirmVisits; ++visit)
    for (size_t i = 0; i < plans.size(); ++i) {
      const size_t j = (i + static_cast<size_t>(visit)) % plans.size();
      Candidate& m = measured[j];
      if (visit > 0 && m.timing.over_budget) continue;
      Candidate k = build_candidate(plans[j], build, memory_budget_bytes);
      m.timing = k.timing;
      if (!k.timing.over_budget) {
        // The first visit's burst is 2 calls; later ones take about burst_ms from its calls.
        const int calls =
            m.ms.empty()
                ? 2
                : calls_per_burst(burst_ms, m.ms.back() * static_cast<double>(k.steps_per_call));
        burst(k, calls);
        visit_ms[j][static_cast<size_t>(visit)] = median(k.ms);
        m.ms.insert(m.ms.end(), k.ms.begin(), k.ms.end());
        m.foreign_shares.insert(m.foreign_shares.end(), k.foreign_shares.begin(),
                                k.foreign_shares.end());
      }
      k = Candidate{};
      release_freed_memory();
    }
  std::vector<PlanTiming> timings;
  for (const Candidate& m : measured) timings.push_back(finished_timing(m));
  // Paired: each plan against the first in the same visit, the two timed one right after the
  // other. A phase change partway through the round then moves one ratio of kConfirmVisits (the
  // order alternates), where it would move the medians of whole plans apart.
  for (size_t j = 1; j < plans.size() && !timings[0].over_budget; ++j) {
    std::vector<double> ratios;
    for (int v = 0; v < kConfirmVisits; ++v)
      if (!std::isnan(visit_ms[j][v]) && !std::isnan(visit_ms[0][v]))
        ratios.push_back(visit_ms[j][v] / visit_ms[0][v]);
    if (!timings[j].over_budget && !ratios.empty())
      timings[j].step_ms = timings[0].step_ms * median(ratios);
  }
  return timings;
}

std::vector<ExecutionPlan> confirming_round_plans(const std::vector<PlanTiming>& timings, int64_t B,
                                                  int threads) {
  const PlanTiming* best = preferred_timing(timings, 1, B, threads);
  // Timed side by side, or in bursts long enough to have other load removed (2 steps at least):
  // nothing to confirm.
  if (best == nullptr || best->interleaved || 2.0 * best->step_ms >= kLoadCorrectedBurstMs)
    return {};
  std::vector<ExecutionPlan> plans = {best->plan};
  for (const PlanTiming& t : timings)
    if (!t.over_budget && t.round == 1 && !(t.plan == best->plan) &&
        runs_like_processes(t.plan, B, threads))
      plans.push_back(t.plan);
  if (plans.size() < 2) return {};
  return plans;
}

PlanChoice resolve_plan(const ExecutionPlan& asked, int64_t B, const std::string& configuration,
                        std::string_view model, const PlanTrialBuilder& build,
                        int64_t memory_budget_bytes,
                        const std::function<void(const std::string&)>& log, bool visits) {
  PlanChoice choice{.plan = asked};
  if (asked.kind != ExecutionPlan::Kind::kAuto) return choice;
  const std::vector<ExecutionPlan> candidates = plan_candidates(B, num_threads());
  if (candidates.size() == 1) {
    choice.plan = candidates.front();
    // Nothing to time, but the budget still holds: built once for its size, never stepped.
    if (memory_budget_bytes > 0) {
      const double bytes = build(choice.plan).arena_bytes;
      HFTA_CHECK(bytes <= static_cast<double>(memory_budget_bytes),
                 "{} model{} of {} need {:.1f} MiB of parameters, gradients, buffers and "
                 "activations, over the memory budget of {:.1f} MiB: raise --memory-budget or "
                 "use a smaller --batch-size",
                 B, B == 1 ? "" : "s", model, bytes / (1 << 20),
                 static_cast<double>(memory_budget_bytes) / (1 << 20));
    }
    return choice;
  }
  choice.cache_path = plan_cache_path();
  const std::string key = plan_cache_key(configuration);
  if (const std::optional<ExecutionPlan> cached = cached_plan(choice.cache_path, key)) {
    choice.plan = *cached;
    choice.cached = true;
    log(fmt::format("plan auto: {} (measured before on this machine; cache {})", choice.plan.str(),
                    choice.cache_path));
    return choice;
  }
  // Interleaved while the candidates' arrays fit in kInterleaveBytes together (and an eighth of
  // the memory).
  const double interleave_bytes =
      std::min(kInterleaveBytes, static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
                                     static_cast<double>(sysconf(_SC_PAGESIZE)) / 8);
  choice.timings = time_plans(candidates, build, memory_budget_bytes, interleave_bytes);
  time_confirming_round(choice.timings, B, build, memory_budget_bytes, interleave_bytes);
  if (visits) time_visits(choice.timings, B, build, memory_budget_bytes, interleave_bytes);
  // The choice is the last round's fastest; the cache keeps each plan's latest timing.
  const int last_round = choice.timings.empty() ? 1 : choice.timings.back().round;
  std::vector<std::string> parts;
  std::vector<std::pair<std::string, double>> timings_ms;
  for (const PlanTiming& t : choice.timings) {
    const std::string round = t.round > 1 ? fmt::format("round {}: ", t.round) : "";
    if (t.over_budget) {
      parts.push_back(fmt::format("{}{} over the {} ({:.0f} MiB)", round, t.plan.str(),
                                  t.over_available ? "memory available" : "memory budget",
                                  t.arena_bytes / (1 << 20)));
      continue;
    }
    // Where other load was removed, how much (it says how far apart the raw timings were).
    const std::string load = t.foreign_share >= 0.005 ? fmt::format(" ({:.1f}% other load removed)",
                                                                    100.0 * t.foreign_share)
                                                      : "";
    parts.push_back(fmt::format("{}{} {:.2f} ms{}", round, t.plan.str(), t.step_ms, load));
    timings_ms.emplace_back(t.plan.str(), t.step_ms);
  }
  const PlanTiming* best = preferred_timing(choice.timings, last_round, B, num_threads());
  // What ruled the candidates out: the budget, unless the machine's memory ruled out any.
  const bool budget_bound =
      memory_budget_bytes > 0 && std::none_of(choice.timings.begin(), choice.timings.end(),
                                              [](const PlanTiming& t) { return t.over_available; });
  HFTA_CHECK(best != nullptr, "no plan fits {} for {} models of {}: {}",
             budget_bound ? fmt::format("the memory budget of {:.0f} MiB",
                                        static_cast<double>(memory_budget_bytes) / (1 << 20))
                          : fmt::format("the {:.0f} MiB this machine has available",
                                        static_cast<double>(available_memory_bytes()) / (1 << 20)),
             B, model,
             budget_bound ? "raise the budget or train fewer models"
                          : "train fewer models or use a smaller --batch-size");
  choice.plan = best->plan;
  const PlanTiming* fastest = fastest_timing(choice.timings, last_round);
  const std::string tie =
      fastest == best
          ? ""
          : fmt::format(" ({:.1f}% behind {}, within {:.0f}%: the processes' layout preferred)",
                        100.0 * (best->step_ms / fastest->step_ms - 1.0), fastest->plan.str(),
                        100.0 * kPlanTieFraction);
  log(fmt::format("plan auto: timed a step of each plan ({}): {} -> {}{}", fmt::join(parts, ", "),
                  key, choice.plan.str(), tie));
  cache_plan(choice.cache_path, key, choice.plan, timings_ms, log);
  return choice;
}

}  // namespace hfta
