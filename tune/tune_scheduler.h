// The search algorithms of `hfta tune`, as pure logic over an executor: the scheduler decides
// which trials train to which budgets; the executor (tune.cpp: serial or fused arrays, later
// arrays sharded over MPI ranks) trains them and reports each one's metric. Nothing here knows
// about models, files or time, so tests drive it with a fake objective.
//
// A trial is configuration `trial` of the space (TuneSpace::sample(seed, trial)). A job trains
// it from budget `from` (0: freshly initialised, else its own state saved at `from`) to `to`,
// in budget units (epochs, or --iters-per-epoch steps). A promoted trial continues where it
// stopped, so training it r1 and then on to r2 equals training it r2 at once.
//
// Random search: num_samples trials, each to max_iters, in one batch.
// Hyperband (HFHT's brackets): s_max = the largest s with eta^s <= R; B = (s_max + 1) R. Bracket
// s = s_max .. 0 starts n = ceil(B / R / (s + 1) * eta^s) new trials; round i = 0 .. s - skip_last
// trains the bracket's survivors to r_i = R * eta^(i - s) (rounded, at least 1) and keeps the best
// floor(n / eta^(i+1)) of them (those that did not fail). Each round is one batch.
// ASHA (asynchronous successive halving): rungs k = 0, 1, ... with budgets min_iters * eta^k,
// the last capped at max_iters. Each free worker takes, from the highest rung down, the best
// trial of rung k not yet promoted that is in the top floor(n_k / eta) of the n_k results of its
// rung, and trains it to rung k + 1; if none, a new trial to rung 0, until num_samples trials
// started. Workers are filled in order and a batch of `workers` jobs runs at once, so the order
// is asynchronous (no rung waits to complete) yet deterministic.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hfta {

struct TuneJob {
  int64_t trial = 0;
  int64_t from = 0, to = 0;  // budget units
  int64_t bracket = 0;       // Hyperband's s; 0 otherwise
  int64_t rung = 0;          // round (Hyperband) or rung (ASHA); 0 for random search
};

struct TuneOutcome {
  double metric = 0.0;  // NaN when the metric is not finite
  bool failed = false;
};

// Trains a batch of jobs (at most one per trial) and returns their outcomes, in job order.
using TuneExecutor = std::function<std::vector<TuneOutcome>(const std::vector<TuneJob>&)>;

struct TuneSchedule {
  std::string algorithm = "hyperband";  // random, hyperband, asha
  bool maximize = true;                 // val_acc: max; val_loss: min
  int64_t num_samples = 16;             // random, asha
  int64_t max_iters = 81;               // R
  int64_t eta = 3;
  int64_t skip_last = 2;  // hyperband
  int64_t min_iters = 1;  // asha
  int64_t workers = 9;    // asha: jobs per batch
};

// One round of a Hyperband bracket: `trials` trials trained to `budget`.
struct HyperbandRound {
  int64_t trials = 0, budget = 0;
};
struct HyperbandBracket {
  int64_t s = 0;
  int64_t n = 0;                       // new trials
  std::vector<HyperbandRound> rounds;  // empty when skip_last removes them all
};
// HFHT's brackets (the planned sizes: fewer train when trials fail).
std::vector<HyperbandBracket> hyperband_brackets(int64_t max_iters, int64_t eta, int64_t skip_last);
// ASHA's rung budgets.
std::vector<int64_t> asha_rungs(int64_t min_iters, int64_t max_iters, int64_t eta);

// The most trials one search plans (random search and ASHA: --num-samples; Hyperband: the sum of
// its brackets' trials), and the largest budget: the scheduler holds every planned job at once,
// so a larger search would run out of memory before its first trial.
inline constexpr int64_t kMaxTuneTrials = 1000000;
inline constexpr int64_t kMaxTuneBudget = 1000000;

// Throws hfta::Error naming the flag when the schedule is out of range.
void check_schedule(const TuneSchedule& schedule);

// Runs the search; every batch goes to `execute`. Returns every job with its outcome, in order.
struct TuneRecord {
  TuneJob job;
  TuneOutcome outcome;
};
std::vector<TuneRecord> run_schedule(const TuneSchedule& schedule, const TuneExecutor& execute);
// Told which trials the search will never train again (stopped by successive halving, or done):
// their checkpoints may go (tune.cpp prunes them). Random: after its batch; Hyperband: those a
// round does not keep, and the survivors of a bracket's last round; ASHA: trials that reached the
// last rung, and at the end every other (until then a trial may still be promoted).
using TuneStopped = std::function<void(const std::vector<int64_t>& trials)>;
std::vector<TuneRecord> run_schedule(const TuneSchedule& schedule, const TuneExecutor& execute,
                                     const TuneStopped& stopped);

// True when a is a better outcome than b (failed and NaN are worst; ties go to the earlier trial).
bool better_outcome(const TuneRecord& a, const TuneRecord& b, bool maximize);

}  // namespace hfta
