// A one-line progress bar for long runs, redrawn in place on a terminal and silent otherwise
// (so logs and pipes get only the per-epoch lines).
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace hfta {

class ProgressBar {
 public:
  // `enabled` is usually stdout_is_terminal() && !--no-progress.
  ProgressBar(std::string label, int64_t total, bool enabled);
  ~ProgressBar();
  // Shows `done` of `total` with a suffix (e.g. per-model losses); redraws at most 10 times a
  // second.
  void update(int64_t done, const std::string& suffix);
  // Clears the line so the next print starts clean.
  void finish();

 private:
  std::string label_;
  int64_t total_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

bool stdout_is_terminal();

// A progress bar's suffix for per-model losses: "loss 2.3026 2.2971 ...".
std::string format_losses(std::span<const float> losses);

}  // namespace hfta
