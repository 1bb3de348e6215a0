#include "tune/tune_scheduler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/error.h"

namespace hfta {

namespace {

int64_t ipow(int64_t base, int64_t e) {
  int64_t r = 1;
  for (int64_t i = 0; i < e; ++i) r *= base;
  return r;
}

// The records sorted best first.
std::vector<TuneRecord> ranked(std::vector<TuneRecord> records, bool maximize) {
  std::stable_sort(records.begin(), records.end(), [&](const TuneRecord& a, const TuneRecord& b) {
    return better_outcome(a, b, maximize);
  });
  return records;
}

std::vector<TuneRecord> run_batch(const std::vector<TuneJob>& jobs, const TuneExecutor& execute,
                                  std::vector<TuneRecord>& all) {
  if (jobs.empty()) return {};
  std::vector<TuneOutcome> outcomes = execute(jobs);
  HFTA_CHECK(outcomes.size() == jobs.size(), "the tune executor returned {} outcomes for {} jobs",
             outcomes.size(), jobs.size());
  std::vector<TuneRecord> batch;
  for (size_t i = 0; i < jobs.size(); ++i) batch.push_back({jobs[i], outcomes[i]});
  all.insert(all.end(), batch.begin(), batch.end());
  return batch;
}

void tell(const TuneStopped& stopped, const std::vector<int64_t>& trials) {
  if (stopped && !trials.empty()) stopped(trials);
}

std::vector<TuneRecord> run_random(const TuneSchedule& s, const TuneExecutor& execute,
                                   const TuneStopped& stopped) {
  std::vector<TuneRecord> all;
  std::vector<TuneJob> jobs;
  for (int64_t t = 0; t < s.num_samples; ++t) jobs.push_back({.trial = t, .to = s.max_iters});
  std::vector<int64_t> trials;
  for (const TuneRecord& r : run_batch(jobs, execute, all)) trials.push_back(r.job.trial);
  tell(stopped, trials);
  return all;
}

std::vector<TuneRecord> run_hyperband(const TuneSchedule& s, const TuneExecutor& execute,
                                      const TuneStopped& stopped) {
  std::vector<TuneRecord> all;
  int64_t next_trial = 0;
  for (const HyperbandBracket& bracket : hyperband_brackets(s.max_iters, s.eta, s.skip_last)) {
    if (bracket.rounds.empty()) continue;  // skip_last removed every round: no trial starts
    std::vector<int64_t> alive;
    for (int64_t i = 0; i < bracket.n; ++i) alive.push_back(next_trial++);
    std::map<int64_t, int64_t> trained;  // trial -> budget reached
    for (size_t i = 0; i < bracket.rounds.size(); ++i) {
      std::vector<TuneJob> jobs;
      for (int64_t t : alive)
        jobs.push_back({.trial = t,
                        .from = trained[t],
                        .to = bracket.rounds[i].budget,
                        .bracket = bracket.s,
                        .rung = static_cast<int64_t>(i)});
      std::vector<TuneRecord> results = run_batch(jobs, execute, all);
      std::vector<int64_t> ran;
      for (const TuneRecord& r : results) {
        trained[r.job.trial] = r.job.to;
        ran.push_back(r.job.trial);
      }
      // Keep floor(n / eta^(i+1)) of those that did not fail.
      std::erase_if(results, [](const TuneRecord& r) { return r.outcome.failed; });
      results = ranked(results, s.maximize);
      const auto keep = std::min<size_t>(
          results.size(),
          static_cast<size_t>(bracket.n / ipow(s.eta, static_cast<int64_t>(i) + 1)));
      alive.clear();
      for (size_t k = 0; k < keep; ++k) alive.push_back(results[k].job.trial);
      std::sort(alive.begin(), alive.end());
      const bool last = i + 1 == bracket.rounds.size();
      std::erase_if(ran, [&](int64_t t) {
        return !last && std::binary_search(alive.begin(), alive.end(), t);
      });
      tell(stopped, ran);
    }
  }
  return all;
}

std::vector<TuneRecord> run_asha(const TuneSchedule& s, const TuneExecutor& execute,
                                 const TuneStopped& stopped) {
  const std::vector<int64_t> rungs = asha_rungs(s.min_iters, s.max_iters, s.eta);
  const int64_t K = static_cast<int64_t>(rungs.size());
  std::vector<TuneRecord> all;
  std::vector<std::vector<TuneRecord>> done(rungs.size());  // completed results per rung
  std::set<std::pair<int64_t, int64_t>> promoted;           // (rung, trial) taken to rung + 1
  int64_t started = 0;
  for (;;) {
    std::vector<TuneJob> batch;
    for (int64_t w = 0; w < s.workers; ++w) {
      bool found = false;
      for (int64_t k = K - 2; k >= 0 && !found; --k) {
        const std::vector<TuneRecord> ranking = ranked(done[k], s.maximize);
        const size_t top = ranking.size() / static_cast<size_t>(s.eta);
        for (size_t i = 0; i < top && !found; ++i) {
          const TuneRecord& r = ranking[i];
          if (r.outcome.failed || promoted.contains({k, r.job.trial})) continue;
          promoted.insert({k, r.job.trial});
          batch.push_back(
              {.trial = r.job.trial, .from = rungs[k], .to = rungs[k + 1], .rung = k + 1});
          found = true;
        }
      }
      if (!found && started < s.num_samples)
        batch.push_back({.trial = started++, .from = 0, .to = rungs[0], .rung = 0});
      else if (!found)
        break;
    }
    if (batch.empty()) break;
    std::vector<int64_t> finished;
    for (const TuneRecord& r : run_batch(batch, execute, all)) {
      done[r.job.rung].push_back(r);
      if (r.job.rung == K - 1) finished.push_back(r.job.trial);
    }
    tell(stopped, finished);
  }
  // No trial is promoted any more: every one below the last rung is done too.
  std::vector<int64_t> rest;
  for (int64_t k = 0; k + 1 < K; ++k)
    for (const TuneRecord& r : done[k])
      if (!promoted.contains({k, r.job.trial})) rest.push_back(r.job.trial);
  std::sort(rest.begin(), rest.end());
  tell(stopped, rest);
  return all;
}

}  // namespace

bool better_outcome(const TuneRecord& a, const TuneRecord& b, bool maximize) {
  auto valid = [](const TuneRecord& r) {
    return !r.outcome.failed && !std::isnan(r.outcome.metric);
  };
  if (valid(a) != valid(b)) return valid(a);
  if (valid(a) && a.outcome.metric != b.outcome.metric)
    return maximize ? a.outcome.metric > b.outcome.metric : a.outcome.metric < b.outcome.metric;
  return a.job.trial < b.job.trial;
}

std::vector<HyperbandBracket> hyperband_brackets(int64_t R, int64_t eta, int64_t skip_last) {
  int64_t s_max = 0;
  while (ipow(eta, s_max + 1) <= R) ++s_max;
  const double B = static_cast<double>((s_max + 1) * R);
  std::vector<HyperbandBracket> brackets;
  for (int64_t s = s_max; s >= 0; --s) {
    HyperbandBracket b{.s = s};
    // A small epsilon: 405 / 81 / 4 * 27 must stay 33.75, and exact integers must not round up.
    b.n = static_cast<int64_t>(std::ceil(B / static_cast<double>(R) / static_cast<double>(s + 1) *
                                             static_cast<double>(ipow(eta, s)) -
                                         1e-9));
    for (int64_t i = 0; i < s + 1 - skip_last; ++i) {
      const double r =
          static_cast<double>(R) * std::pow(static_cast<double>(eta), static_cast<double>(i - s));
      b.rounds.push_back(
          {.trials = b.n / ipow(eta, i), .budget = std::max<int64_t>(1, std::llround(r))});
    }
    brackets.push_back(b);
  }
  return brackets;
}

std::vector<int64_t> asha_rungs(int64_t min_iters, int64_t max_iters, int64_t eta) {
  std::vector<int64_t> rungs;
  for (int64_t r = min_iters; r < max_iters; r *= eta) rungs.push_back(r);
  rungs.push_back(max_iters);
  return rungs;
}

void check_schedule(const TuneSchedule& s) {
  HFTA_CHECK(s.algorithm == "random" || s.algorithm == "hyperband" || s.algorithm == "asha",
             "--algorithm must be random, hyperband or asha, got {}", s.algorithm);
  HFTA_CHECK(s.max_iters >= 1 && s.max_iters <= kMaxTuneBudget,
             "--max-iters must be in [1, {}] budget units, got {}", kMaxTuneBudget, s.max_iters);
  HFTA_CHECK(s.eta >= 2, "--eta must be at least 2, got {}", s.eta);
  HFTA_CHECK(s.skip_last >= 0, "--skip-last must be >= 0, got {}", s.skip_last);
  HFTA_CHECK(s.num_samples >= 1 && s.num_samples <= kMaxTuneTrials,
             "--num-samples must be in [1, {}] (one search; split a larger one into several "
             "--out runs), got {}",
             kMaxTuneTrials, s.num_samples);
  HFTA_CHECK(s.min_iters >= 1 && s.min_iters <= s.max_iters,
             "--min-iters must be in [1, --max-iters {}], got {}", s.max_iters, s.min_iters);
  HFTA_CHECK(s.workers >= 1, "--workers must be at least 1, got {}", s.workers);
  if (s.algorithm == "hyperband") {
    bool any = false;
    int64_t trials = 0;
    for (const auto& b : hyperband_brackets(s.max_iters, s.eta, s.skip_last)) {
      any = any || !b.rounds.empty();
      trials += b.n;
    }
    HFTA_CHECK(trials <= kMaxTuneTrials,
               "--max-iters {} with --eta {} plans {} Hyperband trials, more than the {} one "
               "search holds: lower --max-iters or raise --eta",
               s.max_iters, s.eta, trials, kMaxTuneTrials);
    HFTA_CHECK(any,
               "--skip-last {} leaves Hyperband no round with --max-iters {} and --eta {}: lower "
               "--skip-last or raise --max-iters",
               s.skip_last, s.max_iters, s.eta);
  }
}

std::vector<TuneRecord> run_schedule(const TuneSchedule& s, const TuneExecutor& execute) {
  return run_schedule(s, execute, {});
}

std::vector<TuneRecord> run_schedule(const TuneSchedule& s, const TuneExecutor& execute,
                                     const TuneStopped& stopped) {
  check_schedule(s);
  if (s.algorithm == "random") return run_random(s, execute, stopped);
  if (s.algorithm == "hyperband") return run_hyperband(s, execute, stopped);
  return run_asha(s, execute, stopped);
}

}  // namespace hfta
