// `hfta sweep`: throughput against the fusion count B, for the serial, concurrent and fused modes.
//
// A sweep is a list of measurements (mode, B, repeat). Each one runs in child processes (the
// hidden `hfta trial` subcommand, see sweep_process.h), so that an out-of-memory kill or a crash
// becomes a failed row instead of the end of the sweep, and every measurement starts from a fresh
// heap. The engine below only sees a TrialRunner callback, so tests drive it with fakes.
//
//   serial      one process trains B single models one after another (`--B n --serial`);
//   concurrent  B processes at once, each training one model (`--B 1`); the T threads of the
//               sweep are split evenly: each process gets max(1, floor(T / B)) threads, so for
//               B > T the processes time-share the cores; they run with OMP_WAIT_POLICY=passive
//               (unless the user set a policy), as processes sharing cores must;
//   fused       one process trains the array of B models (`--B n`).
//
// Output, in <out>/<model>/: throughput.csv (one row per mode, B and repeat, flushed row by row),
// logs/<mode>-B<k>-r<repeat>[.p<i>].log (each process's command, stderr and result line), sweep.gp,
// the PNGs and plot.json, their title and budget line for a later --plot-only (plot.h).
//
// On a shared machine other processes steal CPU time mid-measurement. The runner measures that
// share (foreign_load, from /proc/stat against its children's CPU time); a measurement above
// busy_threshold is repeated up to `retries` times, keeping the least disturbed, and the CSV
// says how disturbed each kept row still was.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "run/trial.h"

namespace hfta {

enum class SweepMode { kSerial, kConcurrent, kFused };
const char* mode_name(SweepMode mode);
// "serial,concurrent,fused" (any order, no repeats). Throws hfta::Error naming the bad item.
std::vector<SweepMode> parse_modes(const std::string& list);

// --B: either a comma-separated list of distinct positive integers (returned sorted) or "max".
struct BList {
  std::vector<int64_t> values;
  bool max = false;
};
BList parse_B_list(const std::string& text);

// "8GiB", "512MiB", "1.5G", "300MB", "4096": binary units (K/Ki/KiB, M.., G.., T..) are powers of
// 1024, decimal ones (kB, MB, GB, TB) powers of 1000, a bare number is bytes; case-insensitive.
int64_t parse_memory_size(const std::string& text);
std::string format_memory_size(int64_t bytes);  // "8 GiB", "1.5 GiB", "300 MiB"

// What one measurement of one (mode, B) reports. Totals are over all B models (and, for
// concurrent, over all B processes).
struct Measurement {
  bool ok = false;
  std::string error;              // why it failed (ok = false)
  double samples_per_second = 0;  // summed over the B models
  double step_ms = 0;             // wall time for all B models to advance one step
  double gflops = 0;              // analytic training FLOPs of all B models per second
  int64_t peak_rss_bytes = 0;     // summed over processes (they run at the same time)
  double window_overlap = 1.0;    // share of the timed window when all processes were timing
  // Share of the machine's CPU time that other processes (or the hypervisor) took while this
  // measurement ran, in [0, 1]: on a shared machine, the sign of a disturbed measurement.
  double foreign_load = 0;
  std::string plan;  // the execution plan that ran (fused mode; "fused" for single models)
};

// One measurement as the engine asks for it: `processes` children, each running `trial` (B and
// serial already set for the mode: concurrent runs B processes of B = 1).
struct TrialRequest {
  SweepMode mode = SweepMode::kFused;
  int64_t B = 1;
  int repeat = 0;  // 1-based; 0 for the --B max probes
  int64_t processes = 1;
  TrialOptions trial;
  int64_t memory_limit_bytes = 0;  // kill the processes when their summed RSS passes it; 0 = none
  std::string log_path;            // children's stderr; with several processes, .p<i> is added
};
// Runs one measurement. Failures are reported in the Measurement; throwing Interrupted (below)
// stops the sweep.
using TrialRunner = std::function<Measurement(const TrialRequest&)>;

// Ctrl-C (or SIGTERM) during a measurement: its processes are killed and the sweep stops.
class Interrupted : public Error {
 public:
  using Error::Error;
};

struct SweepOptions {
  TrialOptions trial;  // model, dataset, data_dir, batch_size, warmup_steps, steps, seed
  std::vector<SweepMode> modes = {SweepMode::kSerial, SweepMode::kConcurrent, SweepMode::kFused};
  std::vector<int64_t> Bs = {1, 2, 4, 8};
  // Fused mode runs once per plan (models/plan.h); with several, the plot draws a line per plan.
  std::vector<std::string> plans = {"auto"};
  int repeats = 3;
  std::string out_dir;              // receives throughput.csv and logs/ (the CLI adds <model>/)
  int threads = 1;                  // cores the sweep may use (resolved: > 0)
  int64_t memory_budget_bytes = 0;  // 0 = no limit on a measurement's RSS
  int64_t max_processes = 64;       // concurrent B above this is recorded as skipped
  // Concurrent B is recorded as skipped, with the reason, when B times serial B=1's peak RSS is
  // more than this (0: the memory the machine has available when that trial would start): B
  // processes that do not fit are killed by the kernel rather than measured.
  int64_t available_memory_bytes = 0;
  double peak_gflops = 0;  // machine peak for percent_of_peak; 0 = unknown (left empty)
  // A measurement during which other processes took more than busy_threshold of the machine's
  // CPU time is measured again, at most `retries` more times; the least disturbed one is kept.
  int retries = 2;
  double busy_threshold = 0.1;
};

// Threads each process of a measurement gets (see the top of this file).
int threads_per_process(SweepMode mode, int64_t B, int threads);

// The measurements in the order the sweep runs them: repeat by repeat, B ascending, the modes of
// one (B, repeat) back to back in the given order rotated by (repeat - 1 + index of B), so no
// mode always runs first. Serial B=1, the normalization baseline, is measured in every repeat,
// asked for or not (then first in its repeat, with `baseline_only` set).
struct PlannedTrial {
  SweepMode mode;
  int64_t B;
  int repeat;  // 1-based
  bool baseline_only = false;
  std::string plan = "fused";  // fused mode: the --plan asked for (models/plan.h)
};
std::vector<PlannedTrial> plan_sweep(const SweepOptions& options);

// The CSV columns of throughput.csv, in order.
const std::vector<std::string>& throughput_columns();

// Runs the plan, writing <out_dir>/throughput.csv row by row (normalized = samples_per_s over
// the median of the successful serial B=1 repeats, robust to one disturbed repeat; the
// baseline's own rows are written once all its repeats are in). `progress` gets one line per
// measurement. Throws Interrupted (after the rows so far are written) when the runner does, and
// hfta::Error when every baseline repeat fails, or the baseline fails before any measurement
// worked (a bad --model or --dataset).
struct SweepRow {
  PlannedTrial planned;
  std::string status;  // ok, failed, skipped
  Measurement measurement;
  double normalized = 0;  // NaN when unknown
  int threads_per_process = 1;
  int attempts = 0;  // runs of the measurement (see SweepOptions::retries); 0 when skipped
};
std::vector<SweepRow> run_sweep(const SweepOptions& options, const TrialRunner& runner,
                                const std::function<void(const std::string&)>& progress);

// --B max: the largest B for which `fits_trial(B)` succeeds with peak RSS <= budget_bytes.
// Tries B = 1, 2, 4, ... (capped at `cap`) until one does not fit, then bisects between the last
// fitting and the first failing B; a failed trial counts as not fitting. Throws hfta::Error when
// B = 1 does not fit. `progress` gets one line per probe.
int64_t find_max_B(const std::function<Measurement(int64_t B)>& fits_trial, int64_t budget_bytes,
                   int64_t cap, const std::function<void(const std::string&)>& progress);
// The B values swept after --B max found `max_B`: powers of two below it, and max_B itself.
std::vector<int64_t> Bs_up_to(int64_t max_B);

// What `hfta sweep`'s flags say (cli/sweep_cli.cpp fills it).
struct SweepFlags {
  TrialOptions trial;
  std::string modes = "serial,concurrent,fused";
  std::string plans = "auto";
  std::string Bs = "1,2,4,8";
  int repeats = 3;
  std::string out = "results";
  int threads = 0;
  std::string memory_budget;
  int64_t max_B_cap = 1024;
  int64_t max_processes = 64;
  double peak_gflops = 0;
  int retries = 2;
  double busy_threshold = 0.1;
  double quiet_wait = 120;
  bool no_plot = false;
  bool plot_only = false;
};

// `hfta sweep`: the sweep the flags describe (or with plot_only, its plots again).
void sweep_command(const SweepFlags& flags);
// `hfta trial`, the hidden subcommand each measurement of a sweep runs in: one trial, reported
// on stdout (protocol in sweep_process.h); with `wait_for_go`, after its warm-up it waits for the
// sweep's go on stdin.
void trial_command(const TrialOptions& options, bool wait_for_go);

}  // namespace hfta
