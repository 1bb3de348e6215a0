// `--plan auto` (run/plan_choice.h): every candidate is timed, both ways of timing them
// (interleaved bursts, and one after another when their arrays are too big to hold together),
// the memory budget, and the cache: reused by the same build, ignored when another build wrote
// the entry or the file is malformed; other load removed from slow candidates' timings.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/arena.h"
#include "core/parallel.h"
#include "fused_ops/conv2d.h"
#include "run/plan_choice.h"
#include "sanitizer.h"
#include "tasks/classifier/classifier_plan.h"
#include "test_files.h"

namespace hfta {
namespace {

using test::TempDir;

ModelConfig mlp_config() {
  return {.name = "mlp",
          .sample_shape = Shape{1, 28, 28},
          .num_classes = 10,
          .plan = ExecutionPlan::parse("auto")};
}

// Points HFTA_PLAN_CACHE at a file of its own for the test's lifetime.
struct CacheFile {
  TempDir dir{"plan_cache"};
  std::string path = (dir.path / "plans.json").string();
  std::string before;
  CacheFile() {
    if (const char* p = std::getenv("HFTA_PLAN_CACHE")) before = p;
    setenv("HFTA_PLAN_CACHE", path.c_str(), 1);
  }
  ~CacheFile() { setenv("HFTA_PLAN_CACHE", before.c_str(), 1); }
  nlohmann::json read() const {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
  }
};

PlanChoice choose(const std::vector<int64_t>& ids, int64_t budget = 0) {
  return resolve_plan(ExecutionPlan::parse("auto"), mlp_config(), ids, 8, 1, "adam", budget,
                      [](const std::string&) {});
}

// Plan auto for the models `ids` (B of them) on this machine's threads: every candidate timed,
// the choice, the visits round and the cache.
void expect_every_candidate_timed(const std::vector<int64_t>& ids) {
  CacheFile cache;
  const int64_t B = static_cast<int64_t>(ids.size());
  SCOPED_TRACE(fmt::format("B = {}, {} threads", B, num_threads()));
  const PlanChoice c = choose(ids);
  EXPECT_FALSE(c.cached);
  const std::vector<ExecutionPlan> candidates = plan_candidates(B, num_threads());
  ASSERT_GE(c.timings.size(), candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    EXPECT_EQ(c.timings[i].plan.str(), candidates[i].str());
    EXPECT_GT(c.timings[i].step_ms, 0.0) << c.timings[i].plan.str();
    EXPECT_GT(c.timings[i].arena_bytes, 0.0);
  }
  // The first round's choice (TiesGoToTheProcessesLayout below says how it is made).
  const PlanTiming* first_round = preferred_timing(c.timings, 1, B, num_threads());
  ASSERT_NE(first_round, nullptr);
  // A classifier's visits round (WhichPlansTheVisitsRoundTimes below): the choice so far and
  // the /K plans, timed side by side as round 2 (a machine of 1 thread has no threads plans).
  const std::vector<PlanTiming> first_timings(c.timings.begin(),
                                              c.timings.begin() + candidates.size());
  const std::vector<ExecutionPlan> visits = visits_round_plans(first_timings, B, num_threads());
  size_t entries = candidates.size();
  if (!visits.empty()) {
    ASSERT_EQ(c.timings.size(), candidates.size() + visits.size());
    EXPECT_EQ(visits.front(), first_round->plan);
    for (size_t i = 0; i < visits.size(); ++i) {
      const PlanTiming& t = c.timings[candidates.size() + i];
      EXPECT_EQ(t.plan, visits[i]);
      EXPECT_EQ(t.round, 2);
      // Per step, not per visit of K steps: about the work of a step of the plan without /K.
      EXPECT_GT(t.step_ms, 0.0);
      EXPECT_LT(t.step_ms, 3.0 * first_round->step_ms) << t.plan.str();
    }
    EXPECT_EQ(c.plan, preferred_timing(c.timings, 2, B, num_threads())->plan);
    entries = candidates.size() + visits.size() - 1;  // the choice is timed again, not added
  } else {
    ASSERT_EQ(c.timings.size(), candidates.size());
    EXPECT_EQ(c.plan.str(), preferred_timing(c.timings, 1, B, num_threads())->plan.str());
  }
  // The cache names the choice and every timing (a plan timed twice, its later one).
  const nlohmann::json j = cache.read();
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j.begin().value()["plan"], c.plan.str());
  EXPECT_EQ(j.begin().value()["timings_ms"].size(), entries);
  EXPECT_NE(j.begin().key().find("build "), std::string::npos) << j.begin().key();
}

TEST(PlanAuto, TimesEveryCandidateAndPicksTheFastestOrATiedProcessesLayout) {
  expect_every_candidate_timed({0, 1, 2});  // more models than this machine's 2 threads
}

TEST(PlanAuto, TimesTheVisitsOfAWorkerPerModelAtBEqualToTheThreads) {
  expect_every_candidate_timed({0, 1});
}

TEST(PlanAuto, PlansThatRunLikeProcesses) {
  // Each thread one model at a time: threads:1 and its +fused and /K forms, threads at B <=
  // threads.
  EXPECT_TRUE(runs_like_processes(ExecutionPlan::threads(1), 4, 2));
  EXPECT_TRUE(runs_like_processes(ExecutionPlan::threads(1, 8), 4, 2));
  EXPECT_TRUE(runs_like_processes(ExecutionPlan::threads(1, 1, true), 5, 2));
  EXPECT_TRUE(runs_like_processes(ExecutionPlan::threads(1, 8, true), 5, 2));
  EXPECT_TRUE(runs_like_processes(ExecutionPlan::threads(), 2, 2));
  EXPECT_TRUE(runs_like_processes(ExecutionPlan::threads(), 3, 4));
  // Several models per thread at once, one worker, or all threads in every op.
  EXPECT_FALSE(runs_like_processes(ExecutionPlan::threads(), 4, 2));
  EXPECT_FALSE(runs_like_processes(ExecutionPlan::threads(2), 4, 2));
  EXPECT_FALSE(runs_like_processes(ExecutionPlan::threads(1), 4, 1));
  EXPECT_FALSE(runs_like_processes(ExecutionPlan::threads(), 1, 2));
  EXPECT_FALSE(runs_like_processes(ExecutionPlan::fused(), 4, 2));
  EXPECT_FALSE(runs_like_processes(ExecutionPlan::chunks(1), 4, 2));
}

PlanTiming timed(const std::string& plan, double ms, int round = 1, bool over_budget = false) {
  return {.plan = ExecutionPlan::parse(plan),
          .step_ms = ms,
          .over_budget = over_budget,
          .round = round};
}

TEST(PlanAuto, TiesGoToTheProcessesLayout) {
  // LeNet, 4 models on 2 threads, as timed on a Zen 5 EPYC: chunk:1 fastest by 0.2%.
  const std::vector<PlanTiming> lenet4 = {timed("fused", 58.73), timed("chunk:1", 56.95),
                                          timed("chunk:2", 57.50), timed("threads", 57.96),
                                          timed("threads:1", 57.07)};
  EXPECT_EQ(preferred_timing(lenet4, 1, 4, 2)->plan.str(), "threads:1");
  // On one thread no plan runs like processes: the fastest.
  EXPECT_EQ(preferred_timing(lenet4, 1, 4, 1)->plan.str(), "chunk:1");
  // Beyond the tie: the fastest.
  const double beyond = 56.95 * (1.0 + kPlanTieFraction) * 1.001;
  EXPECT_EQ(
      preferred_timing({timed("chunk:1", 56.95), timed("threads:1", beyond)}, 1, 4, 2)->plan.str(),
      "chunk:1");
  // Among several tied that run like processes, the fastest of them.
  EXPECT_EQ(preferred_timing({timed("chunk:1", 100.0), timed("threads:1", 102.5),
                              timed("threads:1+fused", 101.0), timed("threads", 100.5)},
                             1, 5, 2)
                ->plan.str(),
            "threads:1+fused");
  // Only the round asked, and only candidates that ran.
  const std::vector<PlanTiming> rounds = {timed("chunk:1", 50.0), timed("threads:1", 51.0),
                                          timed("chunk:1", 60.0, 2), timed("threads:1/8", 80.0, 2),
                                          timed("chunk:2", 10.0, 2, /*over_budget=*/true)};
  EXPECT_EQ(preferred_timing(rounds, 1, 4, 2)->plan.str(), "threads:1");
  EXPECT_EQ(preferred_timing(rounds, 2, 4, 2)->plan.str(), "chunk:1");
  EXPECT_EQ(preferred_timing({timed("fused", 1.0, 1, true)}, 1, 4, 2), nullptr);
  EXPECT_EQ(preferred_timing(rounds, 3, 4, 2), nullptr);
}

// Candidates too big to hold together are timed one after another; a plan chosen from such short
// timings that does not run like processes is timed again against the fastest that does (the
// confirming round, plan_choice.h). Fake arrays of `arena_mib` each whose steps sleep: fused
// takes 4 ms while timed in round 1, then `fused_later_ms` (a phase change between candidates),
// threads:1 8 ms, the rest 16 ms; from the `slow_from`th build on (0: never) every step takes
// twice as long (a phase change within the confirming round).
struct PhaseChange {
  double arena_mib;
  double fused_later_ms;
  int slow_from = 0;
  std::map<std::string, int> builds;
  int all_builds = 0;
  PlanChoice choose(const std::string& configuration) {
    const PlanTrialBuilder build = [this](const ExecutionPlan& plan) {
      const int n = ++builds[plan.str()];
      const double ms = (plan == ExecutionPlan::fused()      ? (n == 1 ? 4.0 : fused_later_ms)
                         : plan == ExecutionPlan::threads(1) ? 8.0
                                                             : 16.0) *
                        (slow_from > 0 && ++all_builds >= slow_from ? 2.0 : 1.0);
      return PlanTrialRun{
          .arena_bytes = arena_mib * (1 << 20), .step = [ms] {
            std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
          }};
    };
    return resolve_plan(ExecutionPlan::parse("auto"), 4, configuration, "fake", build, 0,
                        [](const std::string&) {});
  }
};

TEST(PlanAuto, AOneAfterAnotherChoiceIsConfirmedAgainstTheProcessesLayout) {
  CacheFile cache;
  // threads:1 is a candidate (4 models on 2 threads); the thread count is restored at the end.
  const struct TwoThreads {
    int before = num_threads();
    TwoThreads() { cpu::set_num_threads(2); }
    ~TwoThreads() { cpu::set_num_threads(before); }
  } two_threads;
  const size_t candidates = plan_candidates(4, 2).size();
  // 5 candidates of 200 MiB are timed one after another; two of them are not held together
  // either (kInterleaveBytes): fused and threads:1 are built, timed and freed in turn.
  PhaseChange slower{.arena_mib = 200, .fused_later_ms = 12.0};
  PlanChoice c = slower.choose("phase change");
  ASSERT_EQ(c.timings.size(), candidates + 2);
  EXPECT_EQ(preferred_timing(c.timings, 1, 4, 2)->plan.str(), "fused");
  EXPECT_FALSE(c.timings.front().interleaved);
  const PlanTiming &again = c.timings[candidates], &alike = c.timings.back();
  EXPECT_EQ(again.plan.str(), "fused");
  EXPECT_EQ(alike.plan.str(), "threads:1");
  EXPECT_EQ(again.round, 2);
  EXPECT_EQ(alike.round, 2);
  EXPECT_GT(again.step_ms, 10.0);
  EXPECT_EQ(c.plan.str(), "threads:1");
  EXPECT_EQ(slower.builds["fused"], 1 + kConfirmVisits);
  EXPECT_EQ(slower.builds["threads:1"], 1 + kConfirmVisits);
  EXPECT_EQ(slower.builds["chunk:1"], 1);
  EXPECT_EQ(cache.read().begin().value()["plan"], "threads:1");

  // Confirmed: the first round's choice stands.
  PhaseChange steady{.arena_mib = 200, .fused_later_ms = 4.0};
  c = steady.choose("steady");
  ASSERT_EQ(c.timings.size(), candidates + 2);
  EXPECT_EQ(c.plan.str(), "fused");

  // The machine slows down partway through the confirming round, from fused's second visit on
  // (builds: 5 in round 1, then fused, threads:1, threads:1, fused, fused, threads:1): fused's
  // visits take 4, 8 and 8 ms, threads:1's 8, 8 and 16, so the medians of whole plans would tie
  // them (and the tie would go to threads:1); each visit's pair puts threads:1 at twice fused's.
  PhaseChange drift{.arena_mib = 200, .fused_later_ms = 4.0, .slow_from = 9};
  c = drift.choose("drift");
  ASSERT_EQ(c.timings.size(), candidates + 2);
  EXPECT_EQ(c.plan.str(), "fused");
  EXPECT_NEAR(c.timings.back().step_ms / c.timings[candidates].step_ms, 2.0, 0.5);

  // Two of 100 MiB fit together: the confirming round is timed side by side.
  PhaseChange pair{.arena_mib = 100, .fused_later_ms = 12.0};
  c = pair.choose("side by side");
  ASSERT_EQ(c.timings.size(), candidates + 2);
  EXPECT_FALSE(c.timings.front().interleaved);
  EXPECT_TRUE(c.timings.back().interleaved);
  EXPECT_EQ(pair.builds["fused"], 2);
  EXPECT_EQ(c.plan.str(), "threads:1");

  // Candidates timed side by side in round 1: no second round.
  PhaseChange small{.arena_mib = 1, .fused_later_ms = 12.0};
  c = small.choose("small");
  EXPECT_EQ(c.timings.size(), candidates);
  EXPECT_TRUE(c.timings.front().interleaved);
  EXPECT_EQ(c.plan.str(), "fused");
}

std::vector<std::string> plan_names(const std::vector<ExecutionPlan>& plans) {
  std::vector<std::string> names;
  for (const ExecutionPlan& p : plans) names.push_back(p.str());
  return names;
}

TEST(PlanAuto, WhichPlansTheVisitsRoundTimes) {
  using Names = std::vector<std::string>;
  // Odd B: the choice, threads:1/8 and the balanced parts, when 8 steps of threads:1 are cheap.
  std::vector<PlanTiming> t = {timed("fused", 50.0), timed("chunk:1", 55.0),
                               timed("threads:1", 40.0), timed("threads:1+fused", 45.0)};
  EXPECT_EQ(plan_names(visits_round_plans(t, 5, 2)),
            (Names{"threads:1", "threads:1/8", "threads:1+balanced/8"}));
  // threads:1+fused chosen: its own visits.
  t[3].step_ms = 30.0;
  EXPECT_EQ(plan_names(visits_round_plans(t, 5, 2)),
            (Names{"threads:1+fused", "threads:1+fused/8", "threads:1+balanced/8"}));
  // B a multiple of the threads: no balanced parts (each thread already has B / threads models).
  EXPECT_EQ(plan_names(visits_round_plans(t, 4, 2)),
            (Names{"threads:1+fused", "threads:1+fused/8"}));
  // 8 steps not cheap, 2 cheap: balanced parts of a step each, no /8.
  for (PlanTiming& p : t) p.step_ms *= 3.0;
  ASSERT_GT(t[2].step_ms * kVisitSteps, kCheapVisitMs);
  ASSERT_LE(t[2].step_ms * 2, kCheapVisitMs);
  EXPECT_EQ(plan_names(visits_round_plans(t, 5, 2)),
            (Names{"threads:1+fused", "threads:1+balanced/2"}));
  // Nothing cheap: no round; nor on one thread, nor for one model.
  for (PlanTiming& p : t) p.step_ms *= 10.0;
  EXPECT_TRUE(visits_round_plans(t, 5, 2).empty());
  EXPECT_TRUE(visits_round_plans({timed("fused", 1.0), timed("threads:1", 1.0)}, 5, 1).empty());
  EXPECT_TRUE(visits_round_plans({timed("fused", 1.0)}, 1, 2).empty());
  // B = threads: threads/8, a worker per model.
  EXPECT_EQ(plan_names(visits_round_plans({timed("fused", 5.0), timed("threads", 4.0)}, 2, 2)),
            (Names{"threads", "threads/8"}));
}

TEST(PlanAuto, WhichPlansTheConfirmingRoundTimes) {
  using Names = std::vector<std::string>;
  std::vector<PlanTiming> t = {timed("fused", 50.0), timed("chunk:1", 55.0),
                               timed("threads:1", 60.0)};
  EXPECT_EQ(plan_names(confirming_round_plans(t, 4, 2)), (Names{"fused", "threads:1"}));
  // No plan runs like processes on one thread.
  EXPECT_TRUE(confirming_round_plans(t, 4, 1).empty());
  // Timed side by side.
  for (PlanTiming& p : t) p.interleaved = true;
  EXPECT_TRUE(confirming_round_plans(t, 4, 2).empty());
  for (PlanTiming& p : t) p.interleaved = false;
  // The choice runs like processes (a tie) and no other plan does: nothing to time it against.
  t[2].step_ms = 51.0;
  EXPECT_TRUE(confirming_round_plans(t, 4, 2).empty());
  t[2].step_ms = 60.0;
  // Steps long enough for their bursts to have other load removed.
  for (PlanTiming& p : t) p.step_ms *= 40.0;
  EXPECT_TRUE(confirming_round_plans(t, 4, 2).empty());
  // No plan like processes ran.
  EXPECT_TRUE(
      confirming_round_plans({timed("fused", 50.0), timed("threads:1", 40.0, 1, true)}, 4, 2)
          .empty());
  // At odd B both layouts like processes, even where round 1 chose one of them; only round 1's.
  const std::vector<PlanTiming> odd = {timed("chunk:2", 50.0), timed("threads:1", 49.0),
                                       timed("threads:1+fused", 52.0),
                                       timed("threads:1/8", 30.0, 2)};
  EXPECT_EQ(plan_names(confirming_round_plans(odd, 5, 2)), (Names{"threads:1", "threads:1+fused"}));
}

// Three plans timed alternately (visits: fused, chunk:1, threads:1; then chunk:1, threads:1,
// fused; then threads:1, fused, chunk:1), steps of 20, 30 and 40 ms, every step twice as long
// from the 5th build on: chunk:1's second visit is the last fast one. Each plan's time is fused's
// median times its ratios to fused's visit by visit. The steps sleep, so a loaded machine wakes
// them late: they are long enough for a late wake-up of a few ms to leave chunk:1's ratio nearer
// the paired 1.5 than the 0.75 its whole median would give.
TEST(PlanAuto, AlternateTimingsArePairedVisitByVisit) {
  std::map<std::string, int> builds;
  int all_builds = 0;
  const PlanTrialBuilder build = [&](const ExecutionPlan& plan) {
    ++builds[plan.str()];
    const double ms = (plan == ExecutionPlan::fused() ? 20.0
                       : plan.str() == "chunk:1"      ? 30.0
                                                      : 40.0) *
                      (++all_builds >= 5 ? 2.0 : 1.0);
    return PlanTrialRun{
        .arena_bytes = 1.0, .step = [ms] {
          std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
        }};
  };
  const std::vector<PlanTiming> t = time_alternately(
      {ExecutionPlan::fused(), ExecutionPlan::chunks(1), ExecutionPlan::threads(1)}, build, 0,
      20.0);
  ASSERT_EQ(t.size(), 3u);
  for (const auto& [name, n] : builds) EXPECT_EQ(n, kConfirmVisits) << name;
  // fused: 20, 40, 40 ms; chunk:1 against it 30/20, 30/40, 60/40; threads:1 40/20, 80/40, 80/40.
  EXPECT_NEAR(t[0].step_ms, 40.0, 10.0);
  EXPECT_NEAR(t[1].step_ms / t[0].step_ms, 1.5, 0.3);
  EXPECT_NEAR(t[2].step_ms / t[0].step_ms, 2.0, 0.4);
  for (const PlanTiming& p : t) EXPECT_FALSE(p.interleaved);
}

TEST(PlanAuto, TheSameBuildReadsItsCacheAnotherBuildsEntryIsMeasuredAgain) {
  CacheFile cache;
  const std::vector<int64_t> ids = {0, 1};
  const PlanChoice first = choose(ids);
  const PlanChoice again = choose(ids);
  EXPECT_TRUE(again.cached);
  EXPECT_TRUE(again.timings.empty());
  EXPECT_EQ(again.plan.str(), first.plan.str());

  // The same entry written by another build: ignored, measured again, both kept.
  nlohmann::json j = cache.read();
  const std::string key = j.begin().key();
  const std::string other = key.substr(0, key.rfind("build ")) + "build 0000000000000000";
  j = nlohmann::json::object({{other, {{"plan", "chunk:1"}, {"timings_ms", {}}}}});
  std::ofstream(cache.path) << j.dump();
  const PlanChoice fresh = choose(ids);
  EXPECT_FALSE(fresh.cached);
  // Every candidate timed again (then threads/K where its visits are cheap).
  EXPECT_GE(fresh.timings.size(), plan_candidates(2, num_threads()).size());
  EXPECT_EQ(cache.read().size(), 2u);

  // A malformed file is an empty cache: measured, then rewritten whole.
  std::ofstream(cache.path) << "{ not json";
  EXPECT_FALSE(choose(ids).cached);
  EXPECT_EQ(cache.read().size(), 1u);
}

TEST(PlanAuto, CandidatesOverTheMemoryBudgetAreNotRun) {
  CacheFile cache;
  const std::vector<int64_t> ids = {0, 1, 2, 3};
  const PlanChoice all = choose(ids);
  double smallest = 1e300, largest = 0;
  for (const PlanTiming& t : all.timings) {
    smallest = std::min(smallest, t.arena_bytes);
    largest = std::max(largest, t.arena_bytes);
  }
  ASSERT_LT(smallest, largest) << "the plans' arenas must differ for this test";
  std::filesystem::remove(cache.path);
  const PlanChoice within = choose(ids, static_cast<int64_t>(smallest));
  int run = 0;
  for (const PlanTiming& t : within.timings) {
    EXPECT_EQ(t.over_budget, t.arena_bytes > smallest) << t.plan.str();
    EXPECT_EQ(t.step_ms > 0.0, !t.over_budget) << t.plan.str();
    run += t.over_budget ? 0 : 1;
  }
  EXPECT_GE(run, 1);
  EXPECT_LE(within.timings.size() - static_cast<size_t>(run), within.timings.size() - 1);
  // Too small for any plan: a clear error.
  std::filesystem::remove(cache.path);
  try {
    choose(ids, 1);
    ADD_FAILURE() << "expected an error for a 1-byte budget";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no plan fits the memory budget"), std::string::npos)
        << e.what();
  }
}

// A candidate whose arrays the machine cannot hold is refused before its arenas are zeroed
// (OutOfMemory, core/arena.h): auto rules it out as it does one over the budget, says so in the
// log, and names the machine's memory when no plan fits.
TEST(PlanAuto, CandidatesTheMachineCannotHoldAreRuledOut) {
  CacheFile cache;
  const int64_t B = 4;
  const std::vector<ExecutionPlan> candidates = plan_candidates(B, num_threads());
  ASSERT_GE(candidates.size(), 3u);
  const std::string fits = candidates.back().str();
  const PlanTrialBuilder build = [&](const ExecutionPlan& plan) {
    if (plan.str() != fits) throw OutOfMemory("too big", size_t{40} << 30);
    return PlanTrialRun{.arena_bytes = 1.0, .step = [] {}};
  };
  std::vector<std::string> log;
  const auto say = [&](const std::string& line) { log.push_back(line); };
  const PlanChoice c = resolve_plan(ExecutionPlan::parse("auto"), B, "oom", "fake", build, 0, say);
  EXPECT_EQ(c.plan.str(), fits);
  for (const PlanTiming& t : c.timings) {
    const bool refused = t.plan.str() != fits;
    EXPECT_EQ(t.over_budget, refused) << t.plan.str();
    EXPECT_EQ(t.over_available, refused) << t.plan.str();
    if (refused) {
      EXPECT_EQ(t.arena_bytes, static_cast<double>(size_t{40} << 30));
    }
  }
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log.back().find("fused over the memory available (40960 MiB)"), std::string::npos)
      << log.back();

  const PlanTrialBuilder nothing_fits = [](const ExecutionPlan&) -> PlanTrialRun {
    throw OutOfMemory("too big", size_t{40} << 30);
  };
  try {
    resolve_plan(ExecutionPlan::parse("auto"), B, "oom2", "fake", nothing_fits, 0, say);
    ADD_FAILURE() << "expected an error when no plan fits";
  } catch (const OutOfMemory&) {
    ADD_FAILURE() << "a candidate's OutOfMemory must not escape auto";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("this machine has available for 4 models of fake: train "
                                         "fewer models"),
              std::string::npos)
        << e.what();
  }
}

TEST(PlanAuto, InterleavedAndOneAfterAnotherTimeEveryPlan) {
  const std::vector<ExecutionPlan> plans = plan_candidates(4, num_threads());
  for (const double interleave_bytes : {0.0, 1e12}) {
    SCOPED_TRACE(interleave_bytes == 0 ? "one after another" : "interleaved");
    const std::vector<PlanTiming> t =
        time_plans(plans, mlp_config(), {0, 1, 2, 3}, 8, 1, "adam", 0, interleave_bytes);
    ASSERT_EQ(t.size(), plans.size());
    for (size_t i = 0; i < plans.size(); ++i) {
      EXPECT_EQ(t[i].plan.str(), plans[i].str());
      EXPECT_FALSE(t[i].over_budget);
      EXPECT_GT(t[i].step_ms, 0.0) << plans[i].str();
      // Bursts this short are timed as measured (/proc/stat's ticks are too coarse for them).
      EXPECT_EQ(t[i].foreign_share, 0.0) << plans[i].str();
    }
  }
}

// Resident memory of this process, in bytes.
double resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

// A first run's plan auto must not leave its candidates' memory behind (a first `hfta train` of
// ResNet-18 at B = 4 peaked 1.5x above the same run with the plan cached): neither the conv
// caches' entries for their shapes nor the pages glibc kept of their arenas.
TEST(PlanAuto, TimingLeavesNothingOfTheCandidatesBehind) {
  const ModelConfig config{.name = "resnet18", .sample_shape = Shape{3, 32, 32}, .num_classes = 10};
  const std::vector<ExecutionPlan> plans = plan_candidates(2, num_threads());
  // Once, so that what every run keeps (oneDNN's JIT code, the threads' stacks) is there before.
  time_plans({ExecutionPlan::parse("fused")}, config, {0, 1}, 2, 1, "adam", 0, 0.0);
  for (const double interleave_bytes : {0.0, 1e12}) {
    SCOPED_TRACE(interleave_bytes == 0 ? "one after another" : "interleaved");
    const double before = resident_bytes();
    const std::vector<PlanTiming> t =
        time_plans(plans, config, {0, 1}, 2, 1, "adam", 0, interleave_bytes);
    ASSERT_EQ(t.size(), plans.size());
    double smallest = 1e18;
    for (const PlanTiming& timing : t) smallest = std::min(smallest, timing.arena_bytes);
    EXPECT_EQ(cpu::conv2d_cached_problems(), 0);
    if (!test::kMemoryIsMeasurable) continue;
    EXPECT_LT(resident_bytes() - before, 0.2 * smallest)
        << "MiB left behind: " << (resident_bytes() - before) / (1 << 20) << " (smallest candidate "
        << smallest / (1 << 20) << " MiB of arenas)";
  }
}

TEST(PlanAuto, OtherLoadIsRemovedAsTheShareOfTheCpusItTook) {
  // 2 CPUs for 2 s: 4 CPU-seconds, of which others took 0.2 (5%).
  EXPECT_DOUBLE_EQ(foreign_share(2000.0, 0.2, 2), 0.05);
  EXPECT_DOUBLE_EQ(foreign_share(2000.0, 0.0, 2), 0.0);
  EXPECT_DOUBLE_EQ(foreign_share(2000.0, 0.2, 4), 0.025);
  // Tick rounding can make the foreign time negative: nothing is removed.
  EXPECT_DOUBLE_EQ(foreign_share(2000.0, -0.02, 2), 0.0);
  // A burst that was mostly someone else's counts as at most half theirs.
  EXPECT_DOUBLE_EQ(foreign_share(1000.0, 5.0, 2), kMaxForeignShare);
  EXPECT_DOUBLE_EQ(foreign_share(0.0, 1.0, 2), 0.0);
  EXPECT_DOUBLE_EQ(foreign_share(1000.0, 1.0, 0), 0.0);
}

TEST(PlanAuto, SlowStepsAreTimedWithOtherLoadRemoved) {
  // A step of 1.05 s in which this process waits while another (a child, whose CPU time is not
  // this process's) spins on one CPU: bursts of 2 steps exceed kLoadCorrectedBurstMs, so the
  // timing removes that CPU's share, 1 / cpus (at most kMaxForeignShare), and more where other
  // load (tests beside this one) ran too.
  constexpr double kStepMs = 1050.0;
  ASSERT_GE(2 * kStepMs, kLoadCorrectedBurstMs);
  const PlanTrialBuilder spin_elsewhere = [&](const ExecutionPlan&) {
    return PlanTrialRun{.arena_bytes = 1.0, .step = [&] {
                          const auto end = std::chrono::steady_clock::now() +
                                           std::chrono::duration<double, std::milli>(kStepMs);
                          const pid_t child = fork();
                          if (child == 0) {
                            while (std::chrono::steady_clock::now() < end) {
                            }
                            _exit(0);
                          }
                          ASSERT_GT(child, 0);
                          waitpid(child, nullptr, 0);
                        }};
  };
  const std::vector<PlanTiming> t = time_plans({ExecutionPlan::fused()}, spin_elsewhere, 0, 0.0);
  ASSERT_EQ(t.size(), 1u);
  const double cpus = static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN));
  const double spun = std::min(kMaxForeignShare, 1.0 / cpus);
  // /proc/stat's ticks (10 ms on 2.1 s bursts) and the child's start-up blur the share a little.
  EXPECT_GE(t[0].foreign_share, 0.9 * spun);
  EXPECT_LE(t[0].foreign_share, kMaxForeignShare);
  // The step lasts at least kStepMs and overruns by little; the load removed is the bursts'.
  EXPECT_LE(t[0].step_ms, kStepMs * 1.1 * (1.0 - 0.9 * spun));
  EXPECT_GE(t[0].step_ms, kStepMs * (1.0 - kMaxForeignShare));
}

}  // namespace
}  // namespace hfta
