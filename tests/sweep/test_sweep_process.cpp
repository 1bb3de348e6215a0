// The sweep's processes: the `hfta trial` result line, combining concurrent windows, the process
// runner against small shell scripts that play `hfta trial` (success, barrier, crash, signal,
// memory budget, Ctrl-C), and a few runs of the real `hfta` binary (HFTA_CLI_PATH).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "io/csv.h"
#include "sweep/plot.h"
#include "sweep/sweep.h"
#include "sweep/sweep_process.h"
#include "tasks/tasks.h"
#include "test_files.h"

namespace hfta {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::TempDir;

// An executable shell script standing in for `hfta`: it receives `trial --model ...`.
std::string fake_hfta(const fs::path& dir, const std::string& name, const std::string& body) {
  fs::path path = dir / name;
  std::ofstream(path) << "#!/bin/sh\n"
                         "for a in \"$@\"; do [ \"$a\" = --wait-for-go ] && wait=1; done\n"
                         "seed=$(echo \"$@\" | sed 's/.*--seed \\([0-9]*\\).*/\\1/')\n"
                      << body;
  fs::permissions(path, fs::perms::owner_all);
  return path.string();
}

const char* kReport =
    "echo \"hfta-trial-result seconds=0.5 samples_per_second=256 step_ms=25 flops_per_step=1e9 "
    "params_per_model=10 end_ns=2000000000 peak_rss_bytes=1048576\"\n";

TrialRequest request(int64_t processes, const fs::path& dir) {
  TrialRequest r;
  r.mode = processes > 1 ? SweepMode::kConcurrent : SweepMode::kFused;
  r.B = processes;
  r.repeat = 1;
  r.processes = processes;
  r.trial.model = "mlp";
  r.trial.steps = 20;
  r.trial.seed = 7;
  r.log_path = (dir / "m.log").string();
  return r;
}

TEST(TrialReport, RoundTripsAndIgnoresOtherOutput) {
  TrialReport r;
  r.result.seconds = 1.25;
  r.result.samples_per_second = 12345.678901234;
  r.result.step_ms = 62.5;
  r.result.flops_per_step = 5.25e9;
  r.result.params_per_model = 3274634;
  r.end_ns = 9574056334167;
  r.peak_rss_bytes = 154279936;
  std::string out = "# runtime: OpenBLAS ...\n" + format_trial_report(r) + "\nbye\n";
  auto back = parse_trial_report(out);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->result.seconds, r.result.seconds);
  EXPECT_EQ(back->result.samples_per_second, r.result.samples_per_second);
  EXPECT_EQ(back->result.step_ms, r.result.step_ms);
  EXPECT_EQ(back->result.flops_per_step, r.result.flops_per_step);
  EXPECT_EQ(back->result.params_per_model, r.result.params_per_model);
  EXPECT_EQ(back->end_ns, r.end_ns);
  EXPECT_EQ(back->peak_rss_bytes, r.peak_rss_bytes);
  EXPECT_FALSE(parse_trial_report("nothing here\n").has_value());
  EXPECT_FALSE(parse_trial_report("hfta-trial-result seconds=1\n").has_value());  // fields missing
  EXPECT_FALSE(parse_trial_report("hfta-trial-result seconds=x samples_per_second=1 step_ms=1 "
                                  "flops_per_step=1 params_per_model=1 end_ns=1 "
                                  "peak_rss_bytes=1\n")
                   .has_value());
}

TEST(TrialReport, Arguments) {
  TrialOptions o;
  o.model = "lenet";
  o.B = 4;
  o.serial = true;
  o.batch_size = 32;
  o.warmup_steps = 2;
  o.steps = 9;
  o.seed = 5;
  o.threads = 3;
  o.plan = "chunk:2";
  EXPECT_EQ(trial_arguments(o, true),
            (std::vector<std::string>{
                "trial",   "--model",  "lenet",        "--dataset", "synthetic", "--B",
                "4",       "--serial", "--batch-size", "32",        "--warmup",  "2",
                "--steps", "9",        "--seed",       "5",         "--threads", "3",
                "--plan",  "chunk:2",  "--wait-for-go"}));
}

TEST(CombineReports, ConcurrentThroughputIsWorkOverTheUnionOfWindows) {
  TrialReport a, b;
  a.result = {1.0, 100.0, 100.0, 2e9, 1};  // 100 samples in [1, 2] s
  a.end_ns = 2'000'000'000;
  a.peak_rss_bytes = 100;
  b = a;
  b.end_ns = 2'500'000'000;  // [1.5, 2.5] s
  Measurement m = combine_reports({a, b}, 10);
  EXPECT_TRUE(m.ok);
  EXPECT_NEAR(m.samples_per_second, 200.0 / 1.5, 1e-6);
  EXPECT_NEAR(m.step_ms, 1.5 / 10 * 1000, 1e-6);
  EXPECT_NEAR(m.gflops, 2 * 2e9 * 10 / 1.5 * 1e-9, 1e-6);
  EXPECT_NEAR(m.window_overlap, 0.5 / 1.5, 1e-9);
  EXPECT_EQ(m.peak_rss_bytes, 200);
  Measurement one = combine_reports({a}, 10);  // one process: its own numbers
  EXPECT_NEAR(one.samples_per_second, 100.0, 1e-9);
  EXPECT_NEAR(one.step_ms, 100.0, 1e-9);
  EXPECT_NEAR(one.window_overlap, 1.0, 1e-12);
}

TEST(ProcessRunner, OneProcessReportsItsResultAndLogsItsStderr) {
  TempDir tmp("one");
  const fs::path& dir = tmp.path;
  auto runner = process_trial_runner(
      fake_hfta(dir, "hfta", std::string("echo 'runtime: fine' >&2\necho chatter\n") + kReport));
  Measurement m = runner(request(1, dir));
  ASSERT_TRUE(m.ok) << m.error;
  EXPECT_NEAR(m.samples_per_second, 256.0, 1e-9);
  EXPECT_NEAR(m.step_ms, 25.0, 1e-9);
  EXPECT_NEAR(m.gflops, 1e9 * 20 / 0.5 * 1e-9, 1e-9);
  EXPECT_EQ(m.peak_rss_bytes, 1048576);
  std::string log = read_file(dir / "m.log");
  EXPECT_NE(log.find("trial --model mlp"), std::string::npos) << log;
  EXPECT_NE(log.find("runtime: fine"), std::string::npos) << log;
  EXPECT_EQ(log.find("--wait-for-go"), std::string::npos) << "one process needs no barrier";
  EXPECT_EQ(log.find("OMP_WAIT_POLICY"), std::string::npos) << "a lone process may spin";
}

TEST(ProcessRunner, ConcurrentProcessesStartTogetherAfterTheBarrier) {
  TempDir tmp("barrier");
  const fs::path& dir = tmp.path;
  // Process i takes 0.15 * (seed - 7) s to get ready; all must leave the barrier after the last.
  auto runner = process_trial_runner(
      fake_hfta(dir, "hfta",
                "case $seed in 8) sleep 0.15;; 9) sleep 0.3;; esac\n"
                "date +%s%N > " +
                    (dir / "ready_$seed").string() +
                    "\n"
                    "[ -n \"$wait\" ] && echo hfta-trial-ready && { read line || exit 9; }\n"
                    "date +%s%N > " +
                    (dir / "go_$seed").string() + "\n" + "echo \"$OMP_WAIT_POLICY\" > " +
                    (dir / "policy_$seed").string() + "\n" + kReport));
  Measurement m = runner(request(3, dir));
  ASSERT_TRUE(m.ok) << m.error;
  EXPECT_NEAR(m.samples_per_second, 3 * 128 / 0.5, 1e-6);  // identical windows
  EXPECT_NEAR(m.gflops, 3 * 1e9 * 20 / 0.5 * 1e-9, 1e-6);
  EXPECT_EQ(m.peak_rss_bytes, 3 * 1048576);
  EXPECT_NEAR(m.window_overlap, 1.0, 1e-9);
  int64_t last_ready = 0, first_go = INT64_MAX;
  for (int seed : {7, 8, 9}) {
    last_ready =
        std::max<int64_t>(last_ready, std::stoll(read_file(dir / fmt::format("ready_{}", seed))));
    first_go = std::min<int64_t>(first_go, std::stoll(read_file(dir / fmt::format("go_{}", seed))));
    EXPECT_TRUE(fs::exists(dir / fmt::format("m.p{}.log", seed - 7)));
    if (std::getenv("OMP_WAIT_POLICY") == nullptr) {  // processes sharing cores do not spin
      EXPECT_EQ(read_file(dir / fmt::format("policy_{}", seed)), "passive\n");
    }
  }
  EXPECT_GE(first_go, last_ready) << "a process left the barrier before all were ready";
}

TEST(ProcessRunner, CrashesAndSignalsBecomeFailedMeasurements) {
  TempDir tmp("fail");
  const fs::path& dir = tmp.path;
  struct Case {
    std::string body, expected;
  } cases[] = {
      {"echo 'hfta: error: unknown model foo' >&2\nexit 3\n",
       "exit status 3: hfta: error: "
       "unknown model foo"},
      {"kill -KILL $$\n", "killed by signal 9 (SIGKILL), out of memory?"},
      {"kill -SEGV $$\n", "(SIGSEGV)"},
      {"echo fine\n", "exited without a result line"},
  };
  for (const Case& c : cases) {
    auto runner = process_trial_runner(fake_hfta(dir, "hfta", c.body));
    Measurement m = runner(request(1, dir));
    EXPECT_FALSE(m.ok);
    EXPECT_NE(m.error.find(c.expected), std::string::npos) << m.error;
  }
  auto missing = process_trial_runner((dir / "no-such-hfta").string());
  EXPECT_THROW(missing(request(1, dir)), Error);
}

TEST(ProcessRunner, OneFailingConcurrentProcessFailsTheMeasurementAndStopsTheOthers) {
  TempDir tmp("fail_concurrent");
  const fs::path& dir = tmp.path;
  auto runner = process_trial_runner(
      fake_hfta(dir, "hfta",
                "echo hfta-trial-ready; read line || exit 9\n"
                "if [ \"$seed\" = 8 ]; then echo 'out of fake memory' >&2; exit 4; fi\n"
                "exec sleep 30\n"));
  auto start = std::chrono::steady_clock::now();
  Measurement m = runner(request(3, dir));
  double seconds = seconds_since(start);
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("process 2 of 3: exit status 4: out of fake memory"), std::string::npos)
      << m.error;
  EXPECT_LT(seconds, 10.0) << "the other processes were not stopped";
}

TEST(ProcessRunner, MemoryBudgetKillsTheMeasurement) {
  TempDir tmp("budget");
  const fs::path& dir = tmp.path;
  // mawk doubling a string to 128 MiB, then waiting.
  auto runner = process_trial_runner(fake_hfta(
      dir, "hfta",
      "exec awk 'BEGIN { s = \"a\"; for (i = 0; i < 27; i++) s = s s; system(\"sleep 20\") }'\n"));
  TrialRequest r = request(1, dir);
  r.memory_limit_bytes = int64_t{48} << 20;
  auto start = std::chrono::steady_clock::now();
  Measurement m = runner(r);
  double seconds = seconds_since(start);
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("over the memory budget of 48 MiB"), std::string::npos) << m.error;
  EXPECT_GT(m.peak_rss_bytes, int64_t{48} << 20);
  EXPECT_LT(seconds, 10.0);
}

TEST(ProcessRunner, InterruptKillsTheChildrenAndThrows) {
  TempDir tmp("interrupt");
  const fs::path& dir = tmp.path;
  auto runner = process_trial_runner(fake_hfta(dir, "hfta", "exec sleep 30\n"));
  InterruptGuard guard;
  std::thread ctrl_c([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(getpid(), SIGINT);
  });
  auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(runner(request(2, dir)), Interrupted);
  ctrl_c.join();
  double seconds = seconds_since(start);
  EXPECT_LT(seconds, 10.0);
}

// ---- the real binary ----

TEST(RealTrial, FusedSerialAndConcurrentMlp) {
  TempDir tmp("real");
  const fs::path& dir = tmp.path;
  auto runner = process_trial_runner(HFTA_CLI_PATH);
  for (SweepMode mode : {SweepMode::kFused, SweepMode::kSerial, SweepMode::kConcurrent}) {
    TrialRequest r = request(mode == SweepMode::kConcurrent ? 2 : 1, dir);
    r.mode = mode;
    r.B = 2;
    r.trial.B = mode == SweepMode::kConcurrent ? 1 : 2;
    r.trial.serial = mode == SweepMode::kSerial;
    r.trial.steps = 3;
    r.trial.warmup_steps = 1;
    r.trial.threads = 1;
    Measurement m = runner(r);
    ASSERT_TRUE(m.ok) << mode_name(mode) << ": " << m.error;
    EXPECT_GT(m.samples_per_second, 0);
    EXPECT_GT(m.gflops, 0);
    EXPECT_GT(m.peak_rss_bytes, 1 << 20);
    EXPECT_LT(m.peak_rss_bytes, int64_t{2} << 30);
  }
  TrialRequest bad = request(1, dir);
  bad.trial.model = "no-such-model";
  Measurement m = runner(bad);
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("unknown model"), std::string::npos) << m.error;
}

// Runs `hfta <args>`; a busy machine must not make the test wait for it (no retries, no waiting).
const std::string kNoWaiting = " --retries 0 --quiet-wait 0";
test::CommandResult run_sweep_cli(const std::string& args) {
  return test::run_hfta(args + kNoWaiting);
}

TEST(RealSweep, SmallMlpSweepWritesCsvAndPlots) {
  TempDir tmp("cli");
  const fs::path& dir = tmp.path;
  test::CommandResult r = run_sweep_cli(
      fmt::format("sweep --model mlp --modes serial,concurrent,fused --B 1,2 --repeats 1 --steps 3 "
                  "--warmup 1 --threads 2 --peak-gflops 100 --out {}",
                  dir.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  CsvTable t = read_csv((dir / "mlp" / "throughput.csv").string());
  ASSERT_EQ(t.rows.size(), 6u);
  for (const auto& row : t.rows) EXPECT_EQ(row[t.column("status")], "ok") << row.back();
  EXPECT_EQ(t.rows[0][t.column("normalized")], "1.0000");  // one repeat: itself
  EXPECT_NE(r.err.find("[6/6] "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("] fused (plan auto) B=2 repeat 1"), std::string::npos) << r.err;
  if (r.err.find("warning: cannot run gnuplot") == std::string::npos) {
    EXPECT_TRUE(fs::exists(dir / "mlp" / "throughput.png")) << r.err;
    EXPECT_TRUE(fs::exists(dir / "mlp" / "memory.png")) << r.err;
  }
  EXPECT_NE(r.out.find("best B"), std::string::npos);

  // The plots' title names the model, its data and the machine, and --plot-only redraws it from
  // plot.json whatever flags it gets (here none of the sweep's); without plot.json it says so.
  const auto settings = load_plot_settings((dir / "mlp").string());
  ASSERT_TRUE(settings.has_value());
  EXPECT_EQ(settings->title.rfind("mlp (", 0), 0u) << settings->title;
  for (const char* part : {", batch ", ") on ", "), 2 threads"})
    EXPECT_NE(settings->title.find(part), std::string::npos) << settings->title;
  EXPECT_EQ(settings->memory_budget_bytes, 0);
  fs::remove(dir / "mlp" / "sweep.gp");
  r = test::run_hfta(fmt::format("sweep --plot-only --model mlp --out {}", dir.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(test::read_file(dir / "mlp" / "sweep.gp").find(settings->title), std::string::npos);
  EXPECT_EQ(r.err.find("plot.json is missing"), std::string::npos) << r.err;
  fs::remove(dir / "mlp" / "plot.json");
  r = test::run_hfta(fmt::format("sweep --plot-only --model mlp --out {}", dir.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("plot.json is missing"), std::string::npos) << r.err;
  EXPECT_EQ(test::read_file(dir / "mlp" / "sweep.gp").find(") on "), std::string::npos);
}

TEST(RealSweep, MaxB) {
  TempDir tmp("cli_max");
  const fs::path& dir = tmp.path;
  test::CommandResult r = run_sweep_cli(
      fmt::format("sweep --model mlp --modes fused --B max --max-B-cap 4 --memory-budget 4GiB "
                  "--repeats 1 --steps 2 --warmup 1 --peak-gflops 100 --no-plot --out {}",
                  dir.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  CsvTable t = read_csv((dir / "mlp" / "throughput.csv").string());
  ASSERT_EQ(t.rows.size(), 1u + 3);  // the serial B=1 baseline, then fused B=1,2,4
  EXPECT_EQ(t.rows.back()[t.column("B")], "4");
  EXPECT_NE(r.err.find("--B max: fused B=4"), std::string::npos);
}

// Every bad flag of sweep and trial fails at once with one line naming it.
TEST(RealSweep, BadFlagsNameTheProblem) {
  TempDir tmp("cli_bad");
  const std::string out = " --out " + tmp.str();
  struct Case {
    std::string args, message;
  };
  for (const Case& c : std::vector<Case>{
           {"sweep --model mlp --B 1,x", "'x' is not a model count"},
           {"sweep --model mlp --B 1,,2", "has an empty item"},
           {"sweep --model mlp --B max --memory-budget 8XB", "not a memory size"},
           {"sweep --model mlp --memory-budget ''", "--memory-budget: '' is not a memory size"},
           {"sweep --model mlp --threads -3", "--threads: -3 is less than 0"},
           {"sweep --model mlp --threads ''", "--threads: '' is not an integer"},
           {"sweep --model mlp --repeats 0", "--repeats: 0 is less than 1"},
           {"sweep --model mlp --steps ''", "--steps: '' is not an integer"},
           {"sweep --model mlp --max-processes -1", "--max-processes: -1 is less than 1"},
           {"sweep --model mlp --peak-gflops nan", "--peak-gflops: 'nan' is not a finite number"},
           {"sweep --model mlp --busy-threshold ''", "--busy-threshold: '' is not a finite number"},
           {"sweep --model mlp --quiet-wait inf", "--quiet-wait: 'inf' is not a finite number"},
           {"sweep --model mlp --dataset nosuch", "--dataset: nosuch not in"},
           {"sweep --model mlp --device gpu", "--device: unknown device 'gpu'"},
           {"trial --model mlp --device gpu", "--device: unknown device 'gpu'"},
           {"trial --model mlp --device cuda --plan chunk:2", "--device cuda runs plan fused"},
           {"trial --model mlp --B 0", "--B: 0 is less than 1"},
           {"trial --model mlp --threads -1", "--threads: -1 is less than 0"},
           {"trial --model mlp --warmup ''", "--warmup: '' is not an integer"}}) {
    const bool sweep = c.args.starts_with("sweep");
    test::expect_hfta_error(sweep ? c.args + out + kNoWaiting : c.args, c.message);
  }
}

TEST(RealSweep, CtrlCKeepsTheRowsSoFarAndFails) {
  TempDir tmp("cli_int");
  const fs::path& dir = tmp.path;
  const fs::path output = dir / "output.txt";
  const pid_t pid = test::spawn_hfta(
      "sweep --model mlp --modes serial,fused --B 1,2,4,8,16,32,64,128 --repeats 1 --steps 400 "
      "--warmup 1 --peak-gflops 100 --out " +
          dir.string() + kNoWaiting,
      output);
  ASSERT_GT(pid, 0);
  // However the test ends, the sweep must not outlive it (its trials die with it: PDEATHSIG).
  struct Reaper {
    pid_t pid;
    bool reaped = false;
    ~Reaper() {
      if (!reaped) kill(pid, SIGKILL), waitpid(pid, nullptr, 0);
    }
  } reaper{pid};
  const fs::path csv = dir / "mlp" / "throughput.csv";
  size_t rows = 0;
  for (int i = 0; i < 600 && rows < 2; ++i) {  // wait for two measured rows (60 s at most)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (fs::exists(csv)) rows = read_csv(csv.string()).rows.size();
  }
  ASSERT_GE(rows, 2u) << read_file(output);
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  reaper.reaped = true;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0);
  EXPECT_NE(read_file(output).find("interrupted"), std::string::npos) << read_file(output);
  CsvTable t = read_csv(csv.string());
  EXPECT_GE(t.rows.size(), rows);
  EXPECT_LT(t.rows.size(), 16u);  // it stopped early
}

// The barrier of concurrent processes (--wait-for-go) waits in TrialOptions::before_timed: once
// per array, after its setup and warm-up and before its timed steps, for every kind of model.
// (Before, it waited before the corpus was loaded and the model built, and processes whose
// setup took longer than a few steps timed disjoint windows: window_overlap 0.1-0.3.)
TEST(TrialBarrier, BeforeTimedRunsOncePerArrayAfterSetupAndOutsideTheTimedSteps) {
  struct Case {
    const char* model;
    const char* dataset;
  };
  for (const Case c : {Case{"mlp", "synthetic"}, Case{"transformer", "synthetic-text"},
                       Case{"bert", "synthetic-text"}, Case{"dcgan", "synthetic"}}) {
    for (const bool serial : {false, true}) {
      SCOPED_TRACE(fmt::format("{} serial={}", c.model, serial));
      TrialOptions o{.model = c.model,
                     .dataset = c.dataset,
                     .B = 2,
                     .serial = serial,
                     .batch_size = 2,
                     .warmup_steps = 1,
                     .steps = 1,
                     .threads = 1,
                     .plan = "fused",
                     .image_size = 16,
                     .vocab = 50};
      int calls = 0;
      Clock::time_point last_call;
      o.before_timed = [&] {
        ++calls;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // not counted
        last_call = Clock::now();
      };
      const TrialResult r = run_trial(o);
      const double since_last_call = seconds_since(last_call);
      EXPECT_EQ(calls, serial ? 2 : 1);
      // The timed steps (the last array's, with serial) ran after the call returned.
      EXPECT_GT(r.seconds, 0.0);
      if (!serial) {
        EXPECT_LE(r.seconds, since_last_call);
      }
    }
  }
}

}  // namespace
}  // namespace hfta
