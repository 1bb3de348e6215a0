// The `hfta sweep` command line and the hidden `hfta trial` that each measurement runs in. The
// engine (sweep_engine.cpp), the process runner (sweep_process.cpp) and the plots (plot.cpp)
// live in their own files; this one only wires flags to them.
#include "sweep/sweep.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "backend/cpu/peak.h"
#include "backend/cpu/runtime.h"
#include "core/device_memory.h"
#include "models/plan.h"
#include "run/data.h"
#include "run/plan_choice.h"
#include "sweep/plot.h"
#include "sweep/sweep_process.h"
#include "tasks/tasks.h"

namespace hfta {

namespace {

namespace fs = std::filesystem;

void say(const std::string& line) {
  fmt::print(stderr, "{}\n", line);
  std::fflush(stderr);
}

}  // namespace

void trial_command(const TrialOptions& options, bool wait_for_go) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the sweep that started us
  TrialOptions o = options;
  if (wait_for_go) {
    // After setup and warm-up (the first array's, with --serial): loading times differ between
    // processes by more than a few timed steps (a text corpus, a large model's init).
    o.before_timed = [waited = false]() mutable {
      if (waited) return;
      waited = true;
      fmt::print("{}\n", kTrialReadyLine);
      std::fflush(stdout);
      std::string line;
      HFTA_CHECK(std::getline(std::cin, line), "no go signal on stdin: the sweep went away");
    };
  }
  TrialReport report;
  report.result = run_trial(o);
  report.end_ns = monotonic_ns();
  report.peak_rss_bytes = own_peak_rss_bytes();
  fmt::print("{}\n", format_trial_report(report));
  std::fflush(stdout);
}

namespace {

// Share of the machine's CPU time used over the next `seconds` (this process sleeps meanwhile).
double machine_busy_share(double seconds) {
  const ForeignLoadMeter meter;  // this process sleeps: all the busy time is others'
  usleep(static_cast<useconds_t>(seconds * 1e6));
  return std::clamp(meter.share(), 0.0, 1.0);  // jiffies are coarse next to a short look
}

// Other processes on the cores make every timing noisy (the retries and min/max bands show it).
void warn_if_busy() {
  const double busy = machine_busy_share(0.5);
  if (busy > 0.1)
    say(
        fmt::format("warning: other processes use {:.0f}% of this machine's CPU time: "
                    "measurements they disturb are repeated (--retries), and timings stay noisy",
                    100.0 * busy));
}

// Waits, in 0.25 s looks, until other processes use at most `threshold` of the CPUs, spending
// at most `budget` seconds (shared by the whole sweep, decremented here).
void wait_for_quiet(double threshold, double& budget) {
  if (budget <= 0) return;
  double busy = machine_busy_share(0.25), waited = 0.25;
  while (busy > threshold && waited < budget) {
    if (InterruptGuard::interrupted()) throw Interrupted("interrupted");
    if (waited == 0.25)
      say(
          fmt::format("  waiting for other processes to leave the CPUs (they use {:.0f}%; {:.0f} "
                      "s of waiting left)",
                      100.0 * busy, budget));
    busy = machine_busy_share(0.25);
    waited += 0.25;
  }
  budget -= waited;
}

// After a measurement that other processes disturbed, waits for them to leave the CPUs before
// measuring again: re-measuring at once while a long job holds a core would only repeat the
// disturbance.
TrialRunner patient_runner(TrialRunner inner, double threshold, std::shared_ptr<double> budget) {
  auto last_disturbed = std::make_shared<bool>(false);
  return [=](const TrialRequest& request) {
    if (*last_disturbed) wait_for_quiet(threshold, *budget);
    Measurement m = inner(request);
    *last_disturbed = m.ok && m.foreign_load > threshold;
    return m;
  };
}

// The machine's peak is a best case: measured again (at most twice, after waiting for quiet)
// when other processes took CPU time meanwhile, keeping the fastest.
double measure_peak_quietly(int threads, double threshold, double& budget) {
  cpu::set_num_threads(threads);
  double peak = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const ForeignLoadMeter meter;
    peak = std::max(peak, cpu::measure_machine_peak_gflops());
    const double foreign = meter.share();
    if (foreign <= threshold) break;
    say(
        fmt::format("other processes took {:.0f}% of the CPU time while the peak was measured "
                    "({:.1f} GFLOP/s): measuring it again",
                    100.0 * foreign, peak));
    wait_for_quiet(threshold, budget);
  }
  return peak;
}

void print_summary(const std::string& dir) {
  const auto points = summarize_sweep(read_csv((fs::path(dir) / "throughput.csv").string()));
  std::vector<std::string> modes;
  for (const auto& p : points)
    if (std::find(modes.begin(), modes.end(), p.mode) == modes.end()) modes.push_back(p.mode);
  fmt::print(
      "each mode at its best B, medians over the repeats (min-max):\n{:<22} {:>6} {:>24} {:>12} "
      "{:>14}\n",
      "mode", "best B", "normalized (min-max)", "samples/s", "peak RSS MiB");
  for (const std::string& mode : modes) {
    const SweepPoint* best = nullptr;
    for (const auto& p : points)
      if (p.mode == mode && (!best || p.samples_median > best->samples_median)) best = &p;
    std::string normalized = best->has_normalized
                                 ? fmt::format("{:.2f} ({:.2f}-{:.2f})", best->normalized_median,
                                               best->normalized_min, best->normalized_max)
                                 : "-";
    fmt::print("{:<22} {:>6} {:>24} {:>12.0f} {:>14.0f}\n", mode, best->B, normalized,
               best->samples_median, best->rss_mib_median);
  }
  fmt::print("\n{}", fusion_table(points));
}

// What was trained: "mlp (fashion-mnist, batch 64)".
std::string sweep_subject(const SweepOptions& o) {
  return fmt::format("{} ({}, batch {})", o.trial.model, o.trial.dataset, o.trial.batch_size);
}

// Figures from different machines look alike: the title names the CPU and its widest vectors.
std::string plot_title(const SweepOptions& o) {
  const char* vectors = __builtin_cpu_supports("avx512f") ? "AVX-512"
                        : __builtin_cpu_supports("avx2")  ? "AVX2"
                                                          : "no AVX2";
  return fmt::format("{} on {} ({}), {} threads", sweep_subject(o), cpu_model_name(), vectors,
                     o.threads);
}

}  // namespace

void sweep_command(const SweepFlags& flags) {
  SweepOptions o;
  o.trial = flags.trial;
  o.out_dir = (fs::path(flags.out) / flags.trial.model).string();
  o.memory_budget_bytes = flags.memory_budget.empty() ? 0 : parse_memory_size(flags.memory_budget);
  if (flags.plot_only) {
    // The sweep's own settings, not this command's flags: they may be fewer (or another day's).
    PlotSettings plot{sweep_subject(o), o.memory_budget_bytes};
    if (const auto saved = load_plot_settings(o.out_dir)) {
      plot.title = saved->title;
      if (flags.memory_budget.empty()) plot.memory_budget_bytes = saved->memory_budget_bytes;
    } else {
      say(
          fmt::format("{}/plot.json is missing (a sweep before it was saved): the title comes "
                      "from the flags, \"{}\"",
                      o.out_dir, plot.title));
    }
    if (plot_sweep(o.out_dir, plot.title, plot.memory_budget_bytes, say))
      say(fmt::format("plots: {0}/throughput.png, {0}/memory.png", o.out_dir));
    print_summary(o.out_dir);
    return;
  }
  const Device device = parse_device(flags.trial.device);
  if (device != Device::kCpu) {
    const Task& task = task_for_model(flags.trial.model);
    HFTA_CHECK(task.reads_flag(flags.trial.model, "--device"),
               "--device {}: --model {} ({}) runs on the CPU only so far", flags.trial.device,
               flags.trial.model, task.kind());
  }
  HFTA_CHECK(device_available(device), "--device {}: {}", flags.trial.device,
             describe_device(device));
  // Before any trial starts: a measured sgemm choice is then cached, and every trial process
  // (serial, concurrent, fused) reads the same one.
  prepare_runtime(0, false);
  o.modes = parse_modes(flags.modes);
  o.plans.clear();
  for (size_t start = 0; start <= flags.plans.size();) {
    size_t comma = flags.plans.find(',', start);
    if (comma == std::string::npos) comma = flags.plans.size();
    const std::string plan = flags.plans.substr(start, comma - start);
    ExecutionPlan::parse(plan);  // throws naming the choices
    if (std::find(o.plans.begin(), o.plans.end(), plan) == o.plans.end()) o.plans.push_back(plan);
    start = comma + 1;
  }
  const BList Bs = parse_B_list(flags.Bs);
  o.repeats = flags.repeats;
  o.max_processes = flags.max_processes;
  o.retries = flags.retries;
  o.busy_threshold = flags.busy_threshold;
  HFTA_CHECK(o.retries >= 0, "--retries {} must be 0 or more", o.retries);
  HFTA_CHECK(o.trial.steps >= 1, "--steps {} must be at least 1", o.trial.steps);
  HFTA_CHECK(o.trial.warmup_steps >= 0, "--warmup {} must be at least 0", o.trial.warmup_steps);
  HFTA_CHECK(o.trial.batch_size >= 1, "--batch-size {} must be at least 1", o.trial.batch_size);
  HFTA_CHECK(o.repeats >= 1, "--repeats {} must be at least 1", o.repeats);
  HFTA_CHECK(flags.threads >= 0, "--threads {} must be 0 (all cores) or more", flags.threads);
  o.threads = flags.threads > 0 ? flags.threads : available_cores();
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  fs::create_directories(fs::path(o.out_dir) / "logs");

  warn_if_busy();
  InterruptGuard guard;  // Ctrl-C: kill the children, keep the rows so far
  PlotSettings plot;     // once the budget is known (--B max may set it)
  auto wait_budget = std::make_shared<double>(flags.quiet_wait);  // seconds, whole sweep
  const TrialRunner runner =
      patient_runner(process_trial_runner(exe), flags.busy_threshold, wait_budget);
  if (const Task& task = task_for_model(o.trial.model); task.sample_unit() != "samples")
    say(
        fmt::format("a {}: samples/s (and samples_per_s in throughput.csv) count {}: "
                    "--batch-size streams x 32 {} per step and model",
                    task.kind(), task.sample_unit(), task.sample_unit()));
  say(
      fmt::format("hfta sweep: {} on {}, batch {}, {} warm-up + {} timed steps, {} repeats, {} "
                  "threads (concurrent: max(1, {} / B) per process); results in {}",
                  o.trial.model, o.trial.dataset, o.trial.batch_size, o.trial.warmup_steps,
                  o.trial.steps, o.repeats, o.threads, o.threads, o.out_dir));
  try {
    if (Bs.max) {
      if (o.memory_budget_bytes == 0) {
        o.memory_budget_bytes = sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE) / 2;
        say(
            fmt::format("--B max without --memory-budget: using half of this machine's memory, "
                        "{}",
                        format_memory_size(o.memory_budget_bytes)));
      }
      // Short dry runs: the arenas are sized at setup, so one warm-up and one timed step reach
      // the peak; the budget is enforced while they run, so a B that does not fit is killed early.
      auto probe = [&](int64_t B) {
        TrialRequest r;
        r.mode = SweepMode::kFused;
        r.B = B;
        r.trial = o.trial;
        r.trial.B = B;
        r.trial.warmup_steps = 1;
        r.trial.steps = 1;
        r.trial.threads = o.threads;
        r.trial.plan = "fused";  // the most memory any plan needs
        r.memory_limit_bytes = o.memory_budget_bytes;
        r.log_path = (fs::path(o.out_dir) / "logs" / fmt::format("max-B{}.log", B)).string();
        return runner(r);
      };
      const int64_t max_B = find_max_B(probe, o.memory_budget_bytes, flags.max_B_cap, say);
      o.Bs = Bs_up_to(max_B);
      say(fmt::format("--B max: fused B={} is the largest that fits in {}{}; sweeping B = {}",
                      max_B, format_memory_size(o.memory_budget_bytes),
                      max_B == flags.max_B_cap ? " (the --max-B-cap limit)" : "",
                      fmt::join(o.Bs, ",")));
    } else {
      o.Bs = Bs.values;
    }
    if (flags.peak_gflops > 0) {
      o.peak_gflops = flags.peak_gflops;
    } else if (device != Device::kCpu) {
      o.peak_gflops = measure_device_peak_gflops(device);
      say(fmt::format("device peak: {:.1f} GFLOP/s (cuBLAS sgemm 4096^3, fp32)", o.peak_gflops));
    } else {
      o.peak_gflops = measure_peak_quietly(o.threads, flags.busy_threshold, *wait_budget);
      say(
          fmt::format("machine peak: {:.1f} GFLOP/s (best of OpenBLAS and oneDNN sgemm 2048^3, "
                      "{} threads)",
                      o.peak_gflops, o.threads));
    }
    plot = {plot_title(o), o.memory_budget_bytes};
    save_plot_settings(o.out_dir, plot);
    run_sweep(o, runner, say);
  } catch (const Interrupted&) {
    fail(
        "interrupted: the rows measured so far are in {}/throughput.csv (plot them with the "
        "same command plus --plot-only)",
        o.out_dir);
  }
  if (!flags.no_plot && plot_sweep(o.out_dir, plot.title, plot.memory_budget_bytes, say))
    say(fmt::format("plots: {0}/throughput.png, {0}/memory.png", o.out_dir));
  say(fmt::format("CSV: {}/throughput.csv", o.out_dir));
  print_summary(o.out_dir);
}

}  // namespace hfta
