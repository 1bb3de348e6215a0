// Measurements in child processes: the `hfta trial` result line, and the parent's runner that
// spawns children, watches them and turns what happened into a Measurement.
//
// Protocol of `hfta trial` (stdout; anything else on stdout is ignored):
//   hfta-trial-ready              with --wait-for-go, once its models are built and warmed up;
//                                 then it waits for one line on stdin before the timed steps
//   hfta-trial-result key=value…  after run_trial: seconds, samples_per_second, step_ms,
//                                 flops_per_step, params_per_model, end_ns (CLOCK_MONOTONIC, the
//                                 same clock in every process) and peak_rss_bytes
// stderr goes to the measurement's log file; its last line becomes the error of a failed row.
//
// Peak RSS is the child's own VmHWM (own_peak_rss_bytes in process_stats.h says why).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/interrupt.h"
#include "io/process_stats.h"
#include "run/trial.h"
#include "sweep/sweep.h"

namespace hfta {

inline constexpr const char* kTrialReadyLine = "hfta-trial-ready";
inline constexpr const char* kTrialResultPrefix = "hfta-trial-result";

struct TrialReport {
  TrialResult result{};
  int64_t end_ns = 0;
  int64_t peak_rss_bytes = 0;
};
std::string format_trial_report(const TrialReport& report);
// Finds the result line in a child's stdout; nullopt when there is none or it is malformed.
std::optional<TrialReport> parse_trial_report(const std::string& output);

// The `hfta trial` arguments (after the program name) that run `options`.
std::vector<std::string> trial_arguments(const TrialOptions& options, bool wait_for_go);

// Combines the reports of one measurement's processes (one for serial and fused, B for
// concurrent). Concurrent throughput is the work of all processes divided by the union of their
// timed windows [end_ns - seconds, end_ns]: from the first process's first timed step to the
// last process's last one. That never credits a process for running alone after the others
// finished (summing each process's own samples/s would); the --wait-for-go barrier makes the
// windows start together, and window_overlap reports how much they share.
Measurement combine_reports(const std::vector<TrialReport>& reports, int64_t steps);

// A TrialRunner that runs `executable trial ...` (the hfta binary: /proc/self/exe from the CLI)
// in request.processes children at once, seeds seed + i for child i. While an InterruptGuard
// (interrupt.h) has seen Ctrl-C, it kills the children and throws Interrupted.
TrialRunner process_trial_runner(const std::string& executable);

}  // namespace hfta
