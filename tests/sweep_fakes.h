// Fake trial runners for the sweep engine's tests (test_sweep.cpp, test_sweep_plot.cpp): the
// engine only sees a TrialRunner callback, so these stand in for the trial processes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sweep/sweep.h"

namespace hfta::test {

// A deterministic fake: serial B=1 gives 100, 110, 120 samples/s in repeats 1..3 (median 110);
// everything else gives 100 * B * factor(mode) + repeat.
struct FakeRunner {
  std::vector<TrialRequest> requests;
  std::map<std::pair<SweepMode, int64_t>, std::string> failures;  // (mode, B) -> error
  // (mode, B) -> foreign load of each successive attempt (the last one repeats)
  std::map<std::pair<SweepMode, int64_t>, std::vector<double>> busy;
  int interrupt_at_call = -1;      // 0-based call index
  std::string ran_plan = "fused";  // the plan fused measurements report

  static double factor(SweepMode m) {
    return m == SweepMode::kFused ? 1.5 : m == SweepMode::kConcurrent ? 1.2 : 1.0;
  }
  static double samples(SweepMode mode, int64_t B, int repeat) {
    if (mode == SweepMode::kSerial && B == 1) return 90.0 + 10.0 * repeat;
    return 100.0 * B * factor(mode) + repeat;
  }
  Measurement operator()(const TrialRequest& r) {
    if (static_cast<int>(requests.size()) == interrupt_at_call) throw Interrupted("interrupted");
    requests.push_back(r);
    Measurement m;
    auto f = failures.find({r.mode, r.B});
    if (f != failures.end()) {
      m.error = f->second;
      return m;
    }
    m.ok = true;
    m.plan = r.mode == SweepMode::kFused ? ran_plan : "fused";
    m.samples_per_second = samples(r.mode, r.B, r.repeat);
    m.step_ms = 1000.0 * r.B * 64 / m.samples_per_second;
    m.gflops = m.samples_per_second * 1e-3;
    m.peak_rss_bytes = r.B * (int64_t{10} << 20);
    auto b = busy.find({r.mode, r.B});
    if (b != busy.end()) {
      size_t attempt = 0;
      for (const auto& q : requests) attempt += q.mode == r.mode && q.B == r.B;
      m.foreign_load = b->second[std::min(attempt, b->second.size()) - 1];
      m.samples_per_second *= 1.0 - m.foreign_load;  // others took that share
    }
    return m;
  }
};

inline SweepOptions small_sweep(const std::filesystem::path& dir) {
  SweepOptions o;
  o.trial.model = "lenet";
  o.trial.steps = 5;
  o.modes = {SweepMode::kSerial, SweepMode::kConcurrent, SweepMode::kFused};
  o.Bs = {1, 2, 4};
  o.repeats = 3;
  o.out_dir = dir.string();
  o.threads = 2;
  o.peak_gflops = 2.0;
  return o;
}

inline TrialRunner by_ref(FakeRunner& fake) {
  return [&fake](const TrialRequest& r) { return fake(r); };
}

}  // namespace hfta::test
