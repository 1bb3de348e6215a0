// `hfta sweep` without processes: flag parsing, the plan, the --B max search, the CSV the engine
// writes (schema, normalization, failure/skip rows, interrupts), all driven by fake trial
// runners (tests/sweep_fakes.h). test_sweep_plot.cpp covers the plots.
// tests/sweep/test_sweep_process.cpp covers the processes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "io/csv.h"
#include "sweep/plot.h"
#include "sweep/sweep.h"
#include "sweep_fakes.h"
#include "test_files.h"
#include "test_util.h"

namespace hfta {
namespace {

namespace fs = std::filesystem;
using test::by_ref;
using test::expect_error_containing;
using test::FakeRunner;
using test::small_sweep;
using test::TempDir;

// ---- flags ----

TEST(SweepFlags, BListParsesSortsAndKnowsMax) {
  EXPECT_EQ(parse_B_list("1,2,4,8,16").values, (std::vector<int64_t>{1, 2, 4, 8, 16}));
  EXPECT_EQ(parse_B_list("8, 1,3").values, (std::vector<int64_t>{1, 3, 8}));
  EXPECT_FALSE(parse_B_list("4").max);
  EXPECT_TRUE(parse_B_list("max").max);
  EXPECT_TRUE(parse_B_list("MAX").max);
}

TEST(SweepFlags, BadBListsSayWhatIsWrong) {
  expect_error_containing([] { parse_B_list(""); }, "empty");
  expect_error_containing([] { parse_B_list("1,,2"); }, "empty item");
  expect_error_containing([] { parse_B_list("1,2,"); }, "empty item");
  expect_error_containing([] { parse_B_list("0"); }, "at least 1");
  expect_error_containing([] { parse_B_list("-2"); }, "'-2'");
  expect_error_containing([] { parse_B_list("2.5"); }, "'2.5'");
  expect_error_containing([] { parse_B_list("1,two"); }, "'two'");
  expect_error_containing([] { parse_B_list("4,4"); }, "listed twice");
  expect_error_containing([] { parse_B_list("1,max"); }, "stands alone");
  expect_error_containing([] { parse_B_list("99999999999999"); }, "not a model count");
}

TEST(SweepFlags, Modes) {
  EXPECT_EQ(
      parse_modes("serial,concurrent,fused"),
      (std::vector<SweepMode>{SweepMode::kSerial, SweepMode::kConcurrent, SweepMode::kFused}));
  EXPECT_EQ(parse_modes("fused,serial"),
            (std::vector<SweepMode>{SweepMode::kFused, SweepMode::kSerial}));
  expect_error_containing([] { parse_modes("fused,fast"); }, "'fast' is not a mode");
  expect_error_containing([] { parse_modes("fused,fused"); }, "twice");
  expect_error_containing([] { parse_modes(""); }, "empty");
}

TEST(SweepFlags, MemorySizes) {
  EXPECT_EQ(parse_memory_size("8GiB"), int64_t{8} << 30);
  EXPECT_EQ(parse_memory_size("8gib"), int64_t{8} << 30);
  EXPECT_EQ(parse_memory_size("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(parse_memory_size("512 M"), int64_t{512} << 20);
  EXPECT_EQ(parse_memory_size("1.5G"), int64_t{3} << 29);
  EXPECT_EQ(parse_memory_size("300MB"), int64_t{300000000});
  EXPECT_EQ(parse_memory_size("2GB"), int64_t{2000000000});
  EXPECT_EQ(parse_memory_size("1k"), 1024);
  EXPECT_EQ(parse_memory_size("1kB"), 1000);
  EXPECT_EQ(parse_memory_size("1TiB"), int64_t{1} << 40);
  EXPECT_EQ(parse_memory_size("4096"), 4096);
  EXPECT_EQ(parse_memory_size("4096B"), 4096);
  for (const char* bad : {"", "GiB", "8XB", "-1G", "1.2.3G", "eight", "8 GiBs"})
    expect_error_containing([&] { parse_memory_size(bad); }, "not a memory size");
  expect_error_containing([] { parse_memory_size("0"); }, "between");
  EXPECT_EQ(format_memory_size(int64_t{8} << 30), "8 GiB");
  EXPECT_EQ(format_memory_size(int64_t{3} << 29), "1.5 GiB");
  EXPECT_EQ(format_memory_size(300), "300 B");
}

TEST(SweepFlags, ThreadsSplitEvenlyAcrossConcurrentProcesses) {
  EXPECT_EQ(threads_per_process(SweepMode::kConcurrent, 1, 2), 2);
  EXPECT_EQ(threads_per_process(SweepMode::kConcurrent, 2, 2), 1);
  EXPECT_EQ(threads_per_process(SweepMode::kConcurrent, 16, 2), 1);  // time-sharing
  EXPECT_EQ(threads_per_process(SweepMode::kConcurrent, 3, 16), 5);
  EXPECT_EQ(threads_per_process(SweepMode::kFused, 16, 2), 2);
  EXPECT_EQ(threads_per_process(SweepMode::kSerial, 16, 8), 8);
}

// ---- plan and --B max ----

TEST(SweepPlan, RepeatByRepeatWithTheModesOfOneBBackToBackInRotatingOrder) {
  SweepOptions o;
  o.modes = {SweepMode::kSerial, SweepMode::kConcurrent, SweepMode::kFused};
  o.Bs = {1, 2, 4};
  o.repeats = 2;
  auto plan = plan_sweep(o);
  ASSERT_EQ(plan.size(), 2u * 3 * 3);
  std::set<std::tuple<SweepMode, int64_t, int>> seen;
  for (const auto& p : plan) {
    EXPECT_TRUE(seen.insert({p.mode, p.B, p.repeat}).second);
    EXPECT_FALSE(p.baseline_only);
  }
  const SweepMode S = SweepMode::kSerial, C = SweepMode::kConcurrent, F = SweepMode::kFused;
  // Repeat r, the i-th B: the modes rotated by (r - 1 + i).
  const std::vector<SweepMode> expected = {S, C, F, C, F, S, F, S, C,   // repeat 1: B = 1, 2, 4
                                           C, F, S, F, S, C, S, C, F};  // repeat 2
  for (size_t k = 0; k < plan.size(); ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(plan[k].mode, expected[k]);
    EXPECT_EQ(plan[k].B, o.Bs[(k / 3) % 3]);
    EXPECT_EQ(plan[k].repeat, static_cast<int>(k / 9) + 1);
  }
}

TEST(SweepPlan, BaselineIsMeasuredInEveryRepeatEvenWhenNotAsked) {
  SweepOptions o;
  o.modes = {SweepMode::kFused};
  o.Bs = {2, 4};
  o.repeats = 3;
  auto plan = plan_sweep(o);
  ASSERT_EQ(plan.size(), 3u * (1 + 2));
  for (int r = 0; r < 3; ++r) {
    const PlannedTrial& p = plan[static_cast<size_t>(3 * r)];
    EXPECT_EQ(p.mode, SweepMode::kSerial);
    EXPECT_EQ(p.B, 1);
    EXPECT_EQ(p.repeat, r + 1);
    EXPECT_TRUE(p.baseline_only);
  }
}

Measurement fake_memory(int64_t B, int64_t bytes_per_model) {
  Measurement m;
  m.ok = true;
  m.peak_rss_bytes = B * bytes_per_model;
  return m;
}

TEST(SweepMaxB, DoublesThenBisectsToTheLargestFit) {
  const int64_t MiB = 1 << 20;
  std::vector<int64_t> probed;
  auto trial = [&](int64_t B) {
    probed.push_back(B);
    return fake_memory(B, 100 * MiB);
  };
  EXPECT_EQ(find_max_B(trial, 1000 * MiB, 1024, nullptr), 10);
  EXPECT_EQ(probed, (std::vector<int64_t>{1, 2, 4, 8, 16, 12, 10, 11}));
  for (int64_t budget_models : {1, 2, 3, 7, 64, 100, 1000}) {
    probed.clear();
    int64_t got = find_max_B(trial, budget_models * 100 * MiB, 4096, nullptr);
    EXPECT_EQ(got, budget_models);
    std::set<int64_t> distinct(probed.begin(), probed.end());
    EXPECT_EQ(distinct.size(), probed.size()) << "a B was probed twice";
  }
}

TEST(SweepMaxB, StopsAtTheCap) {
  auto trial = [](int64_t B) { return fake_memory(B, 1); };
  EXPECT_EQ(find_max_B(trial, 1 << 30, 64, nullptr), 64);
  EXPECT_EQ(find_max_B(trial, 1 << 30, 48, nullptr), 48);
}

TEST(SweepMaxB, AFailedTrialDoesNotFit) {
  std::vector<std::string> lines;
  auto trial = [](int64_t B) {
    Measurement m = fake_memory(B, 1);
    if (B >= 6) m.ok = false, m.error = "killed by signal 9 (SIGKILL), out of memory?";
    return m;
  };
  EXPECT_EQ(find_max_B(trial, 1 << 30, 1024, [&](const std::string& l) { lines.push_back(l); }), 5);
  bool mentioned = false;
  for (const auto& l : lines) mentioned |= l.find("SIGKILL") != std::string::npos;
  EXPECT_TRUE(mentioned) << "the probe's failure should be in the progress lines";
}

TEST(SweepMaxB, NothingFitsIsAnError) {
  auto trial = [](int64_t B) { return fake_memory(B, int64_t{2} << 30); };
  expect_error_containing([&] { find_max_B(trial, int64_t{1} << 30, 1024, nullptr); },
                          "even one model");
}

TEST(SweepMaxB, SweptBs) {
  EXPECT_EQ(Bs_up_to(10), (std::vector<int64_t>{1, 2, 4, 8, 10}));
  EXPECT_EQ(Bs_up_to(8), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(Bs_up_to(1), (std::vector<int64_t>{1}));
}

// ---- the engine and its CSV ----

TEST(SweepEngine, CsvHasOneRowPerModeBRepeatAndNormalizes) {
  TempDir tmp("schema");
  const fs::path& dir = tmp.path;
  SweepOptions o = small_sweep(dir);
  FakeRunner fake;
  std::vector<std::string> progress;
  run_sweep(o, by_ref(fake), [&](const std::string& l) { progress.push_back(l); });

  CsvTable t = read_csv((dir / "throughput.csv").string());
  EXPECT_EQ(t.header, throughput_columns());
  EXPECT_EQ(t.header,
            (std::vector<std::string>{
                "model", "mode", "plan_asked", "plan", "B", "repeat", "status", "samples_per_s",
                "normalized", "step_ms", "gflops", "percent_of_peak", "peak_rss_mib", "processes",
                "threads_per_process", "window_overlap", "foreign_load", "attempts", "error"}));
  ASSERT_EQ(t.rows.size(), 3u * 3 * 3);
  std::set<std::tuple<std::string, std::string, std::string>> keys;
  const double baseline = 110.0;
  for (const auto& row : t.rows) {
    const std::string mode = row[t.column("mode")];
    const int64_t B = std::stoll(row[t.column("B")]);
    const int repeat = std::stoi(row[t.column("repeat")]);
    EXPECT_TRUE(keys.insert({mode, row[t.column("B")], row[t.column("repeat")]}).second);
    SweepMode m = parse_modes(mode)[0];
    const double expected = FakeRunner::samples(m, B, repeat);
    EXPECT_EQ(row[t.column("model")], "lenet");
    EXPECT_EQ(row[t.column("status")], "ok");
    EXPECT_NEAR(std::stod(row[t.column("samples_per_s")]), expected, 0.05);
    EXPECT_NEAR(std::stod(row[t.column("normalized")]), expected / baseline, 1e-4);
    EXPECT_NEAR(std::stod(row[t.column("gflops")]), expected * 1e-3, 1e-3);
    EXPECT_NEAR(std::stod(row[t.column("percent_of_peak")]), expected * 1e-3 / 2.0 * 100, 0.01);
    EXPECT_NEAR(std::stod(row[t.column("peak_rss_mib")]), 10.0 * B, 0.05);
    EXPECT_EQ(std::stoll(row[t.column("processes")]), m == SweepMode::kConcurrent ? B : 1);
    EXPECT_EQ(std::stoi(row[t.column("threads_per_process")]),
              threads_per_process(m, B, o.threads));
    EXPECT_EQ(row[t.column("window_overlap")], "1.000");
    EXPECT_EQ(row[t.column("foreign_load")], "0.000");
    EXPECT_EQ(row[t.column("attempts")], "1");
    EXPECT_EQ(row[t.column("error")], "");
  }
  EXPECT_EQ(progress.size(), t.rows.size());
  EXPECT_NE(progress[4].find("[5/27]"), std::string::npos) << progress[4];
}

TEST(SweepEngine, RequestsMatchTheModes) {
  TempDir tmp("requests");
  const fs::path& dir = tmp.path;
  SweepOptions o = small_sweep(dir);
  o.repeats = 1;
  o.memory_budget_bytes = int64_t{3} << 30;
  FakeRunner fake;
  run_sweep(o, by_ref(fake), nullptr);
  ASSERT_EQ(fake.requests.size(), 9u);
  for (const TrialRequest& r : fake.requests) {
    EXPECT_EQ(r.trial.model, "lenet");
    EXPECT_EQ(r.trial.steps, 5);
    EXPECT_EQ(r.memory_limit_bytes, int64_t{3} << 30);
    EXPECT_EQ(r.trial.serial, r.mode == SweepMode::kSerial);
    if (r.mode == SweepMode::kConcurrent) {
      EXPECT_EQ(r.processes, r.B);
      EXPECT_EQ(r.trial.B, 1);
      EXPECT_EQ(r.trial.threads, std::max<int64_t>(1, 2 / r.B));
    } else {
      EXPECT_EQ(r.processes, 1);
      EXPECT_EQ(r.trial.B, r.B);
      EXPECT_EQ(r.trial.threads, 2);
    }
    // Fused logs name the plan (auto by default); single-model modes run plan fused.
    const std::string plan_part = r.mode == SweepMode::kFused ? "-auto" : "";
    EXPECT_NE(r.log_path.find(fmt::format("{}{}-B{}-r1.log", mode_name(r.mode), plan_part, r.B)),
              std::string::npos)
        << r.log_path;
    EXPECT_EQ(r.trial.plan, r.mode == SweepMode::kFused ? "auto" : "fused");
  }
}

// --plan a,b: the fused mode runs once per plan, the CSV says which plan was asked and which
// ran, and the plot draws a line per plan.
TEST(SweepEngine, SeveralPlansAreARowAndALineEach) {
  TempDir tmp("plans");
  const fs::path& dir = tmp.path;
  SweepOptions o = small_sweep(dir);
  o.repeats = 1;
  o.plans = {"auto", "chunk:1"};
  FakeRunner fake;
  fake.ran_plan = "threads";
  run_sweep(o, by_ref(fake), nullptr);
  // serial, concurrent and fused at B = 1, 2, 4, fused once for each of the 2 plans
  ASSERT_EQ(fake.requests.size(), 3u + 3 + 3 * 2);
  CsvTable t = read_csv((dir / "throughput.csv").string());
  int fused_rows = 0;
  for (const auto& row : t.rows) {
    if (row[t.column("mode")] != "fused") {
      EXPECT_EQ(row[t.column("plan_asked")], "");
      continue;
    }
    ++fused_rows;
    EXPECT_TRUE(row[t.column("plan_asked")] == "auto" || row[t.column("plan_asked")] == "chunk:1");
    EXPECT_EQ(row[t.column("plan")], "threads");
  }
  EXPECT_EQ(fused_rows, 6);
  std::set<std::string> series;
  for (const SweepPoint& p : summarize_sweep(t)) series.insert(p.mode);
  EXPECT_EQ(series,
            (std::set<std::string>{"serial", "concurrent", "fused (auto)", "fused (chunk:1)"}));
}

TEST(SweepEngine, FailedMeasurementIsARowAndTheSweepGoesOn) {
  TempDir tmp("failure");
  const fs::path& dir = tmp.path;
  SweepOptions o = small_sweep(dir);
  FakeRunner fake;
  const std::string message = "killed by signal 9 (SIGKILL), out of memory?: \"oom\", at B=4";
  fake.failures[{SweepMode::kFused, 4}] = message;
  run_sweep(o, by_ref(fake), nullptr);
  CsvTable t = read_csv((dir / "throughput.csv").string());
  ASSERT_EQ(t.rows.size(), 27u);
  int failed = 0;
  for (const auto& row : t.rows) {
    bool fused4 = row[t.column("mode")] == "fused" && row[t.column("B")] == "4";
    EXPECT_EQ(row[t.column("status")], fused4 ? "failed" : "ok");
    if (!fused4) continue;
    ++failed;
    EXPECT_EQ(row[t.column("error")], message);  // survives CSV quoting
    EXPECT_EQ(row[t.column("samples_per_s")], "");
    EXPECT_EQ(row[t.column("normalized")], "");
  }
  EXPECT_EQ(failed, 3);
  EXPECT_EQ(t.rows.back()[t.column("repeat")], "3");  // measured after the failures
}

TEST(SweepEngine, UnaskedBaselineIsMeasuredAndSaid) {
  TempDir tmp("baseline");
  const fs::path& dir = tmp.path;
  SweepOptions o = small_sweep(dir);
  o.modes = {SweepMode::kFused};
  o.Bs = {2, 8};
  o.repeats = 2;
  FakeRunner fake;
  std::vector<std::string> lines;
  run_sweep(o, by_ref(fake), [&](const std::string& l) { lines.push_back(l); });
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("baseline"), std::string::npos) << lines[0];
  CsvTable t = read_csv((dir / "throughput.csv").string());
  ASSERT_EQ(t.rows.size(), 2u + 2 * 2);
  EXPECT_EQ(t.rows[0][t.column("mode")], "serial");
  const double baseline = (100.0 + 110.0) / 2;
  EXPECT_EQ(t.rows[1][t.column("mode")], "fused");  // B=2, repeat 1
  EXPECT_NEAR(std::stod(t.rows[1][t.column("normalized")]), (300.0 + 1) / baseline, 1e-4);
}

TEST(SweepEngine, FailedBaselineStopsTheSweep) {
  TempDir tmp("badbaseline");
  const fs::path& dir = tmp.path;
  SweepOptions o = small_sweep(dir);
  FakeRunner fake;
  fake.failures[{SweepMode::kSerial, 1}] = "exit status 1: hfta: error: unknown model 'x'";
  expect_error_containing([&] { run_sweep(o, by_ref(fake), nullptr); }, "unknown model 'x'");
  EXPECT_EQ(fake.requests.size(), 1u);  // the first measurement: nothing has worked
  CsvTable t = read_csv((dir / "throughput.csv").string());
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(t.rows[0][t.column("status")], "failed");
}

TEST(SweepEngine, InterruptKeepsTheRowsSoFar) {
  for (int at : {1, 3, 7}) {  // inside the baseline, right after it, later
    TempDir tmp(fmt::format("interrupt{}", at));
    const fs::path& dir = tmp.path;
    SweepOptions o = small_sweep(dir);
    FakeRunner fake;
    fake.interrupt_at_call = at;
    EXPECT_THROW(run_sweep(o, by_ref(fake), nullptr), Interrupted);
    CsvTable t = read_csv((dir / "throughput.csv").string());
    EXPECT_EQ(t.rows.size(), static_cast<size_t>(at)) << "interrupted at call " << at;
    for (const auto& row : t.rows) EXPECT_EQ(row[t.column("status")], "ok");
  }
}

TEST(SweepEngine, TooManyConcurrentProcessesAreSkipped) {
  TempDir tmp("skip");
  const fs::path& dir = tmp.path;
  SweepOptions o = small_sweep(dir);
  o.repeats = 1;
  o.max_processes = 2;
  FakeRunner fake;
  run_sweep(o, by_ref(fake), nullptr);
  for (const auto& r : fake.requests) EXPECT_LE(r.processes, 2);
  CsvTable t = read_csv((dir / "throughput.csv").string());
  int skipped = 0;
  for (const auto& row : t.rows)
    if (row[t.column("status")] == "skipped") {
      ++skipped;
      EXPECT_EQ(row[t.column("mode")], "concurrent");
      EXPECT_EQ(row[t.column("B")], "4");
      EXPECT_NE(row[t.column("error")].find("--max-processes"), std::string::npos);
    }
  EXPECT_EQ(skipped, 1);
}

// Serial B=1 peaks at 10 MiB in the fake: with 35 MiB available, concurrent B=4 (40 MiB) would be
// killed by the kernel, so it is skipped, and B=2 (20 MiB) still runs.
TEST(SweepEngine, ConcurrentProcessesThatWouldNotFitInMemoryAreSkipped) {
  TempDir tmp("skip_memory");
  const fs::path& dir = tmp.path;
  SweepOptions o = small_sweep(dir);
  o.repeats = 2;
  o.available_memory_bytes = int64_t{35} << 20;
  FakeRunner fake;
  run_sweep(o, by_ref(fake), nullptr);
  for (const auto& r : fake.requests)
    EXPECT_FALSE(r.mode == SweepMode::kConcurrent && r.B == 4) << "repeat " << r.repeat;
  CsvTable t = read_csv((dir / "throughput.csv").string());
  int skipped = 0, fused_B4 = 0;
  for (const auto& row : t.rows) {
    fused_B4 += row[t.column("mode")] == "fused" && row[t.column("B")] == "4" &&
                row[t.column("status")] == "ok";
    if (row[t.column("status")] == "skipped") {
      ++skipped;
      EXPECT_EQ(row[t.column("mode")], "concurrent");
      EXPECT_EQ(row[t.column("B")], "4");
      EXPECT_EQ(row[t.column("error")],
                "concurrent B=4 would need about 40 MiB (4 processes of serial B=1's peak RSS, 10 "
                "MiB), more than the 35 MiB this machine has available");
    }
  }
  EXPECT_EQ(skipped, 2);   // one per repeat
  EXPECT_EQ(fused_B4, 2);  // the fused array is the plan's business, not skipped
}

TEST(SweepEngine, BaselineIsTheMedianOfItsRepeats) {
  TempDir tmp("median");
  const fs::path& dir = tmp.path;
  SweepOptions o = small_sweep(dir);
  o.modes = {SweepMode::kFused};
  o.Bs = {2};
  auto runner = [](const TrialRequest& r) {
    Measurement m;
    m.ok = true;
    // One baseline repeat ran on a busy machine at a third of the speed.
    const double baseline[] = {110, 36, 100};
    m.samples_per_second = r.B == 1 ? baseline[r.repeat - 1] : 220;
    return m;
  };
  run_sweep(o, runner, nullptr);
  CsvTable t = read_csv((dir / "throughput.csv").string());
  ASSERT_EQ(t.rows.size(), 3u + 3);
  EXPECT_EQ(t.rows[2][t.column("B")], "1");  // serial, repeat 2, after fused B=2 repeat 1
  EXPECT_EQ(t.rows[2][t.column("normalized")], "0.3600");
  EXPECT_EQ(t.rows.back()[t.column("normalized")], "2.2000");
  EXPECT_EQ(median({}), 0);
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 2, 3}), 2.5);
}

TEST(SweepEngine, DisturbedMeasurementsAreRepeatedAndTheLeastDisturbedKept) {
  TempDir tmp("retry");
  const fs::path& dir = tmp.path;
  SweepOptions o = small_sweep(dir);
  o.repeats = 1;
  o.retries = 2;
  o.busy_threshold = 0.1;
  FakeRunner fake;
  fake.busy[{SweepMode::kFused, 2}] = {0.5, 0.05};      // quiet on the second try
  fake.busy[{SweepMode::kFused, 4}] = {0.6, 0.3, 0.4};  // never quiet: keep the 0.3
  fake.busy[{SweepMode::kConcurrent, 2}] = {0.08};      // under the threshold: once
  std::vector<std::string> lines;
  run_sweep(o, by_ref(fake), [&](const std::string& l) { lines.push_back(l); });
  CsvTable t = read_csv((dir / "throughput.csv").string());
  auto row_of = [&](const std::string& mode, const std::string& B) {
    for (const auto& row : t.rows)
      if (row[t.column("mode")] == mode && row[t.column("B")] == B) return row;
    ADD_FAILURE() << "no row " << mode << " B=" << B;
    return t.rows[0];
  };
  auto fused2 = row_of("fused", "2"), fused4 = row_of("fused", "4");
  auto concurrent2 = row_of("concurrent", "2");
  EXPECT_EQ(fused2[t.column("attempts")], "2");
  EXPECT_EQ(fused2[t.column("foreign_load")], "0.050");
  EXPECT_NEAR(std::stod(fused2[t.column("samples_per_s")]), 301.0 * 0.95, 0.1);
  EXPECT_EQ(fused4[t.column("attempts")], "3");
  EXPECT_EQ(fused4[t.column("foreign_load")], "0.300");
  EXPECT_EQ(concurrent2[t.column("attempts")], "1");
  int again = 0;
  for (const auto& l : lines) again += l.find("measuring again") != std::string::npos;
  EXPECT_EQ(again, 1 + 2);
}

}  // namespace
}  // namespace hfta
