#include "io/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace hfta {

bool stdout_is_terminal() { return isatty(fileno(stdout)) != 0; }

std::string format_losses(std::span<const float> losses) {
  std::string s = "loss";
  for (float l : losses) s += fmt::format(" {:.4f}", l);
  return s;
}

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)),
      total_(total),
      enabled_(enabled),
      start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(int64_t done, const std::string& suffix) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (drawn_ && done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int kWidth = 24;
  int filled = total_ > 0 ? static_cast<int>(kWidth * done / total_) : kWidth;
  double elapsed = std::chrono::duration<double>(now - start_).count();
  double eta = done > 0 ? elapsed * static_cast<double>(total_ - done) / done : 0.0;
  std::string line = fmt::format("\r{} [{:=<{}}{: <{}}] {}/{} {:.0f}s eta {:.0f}s {}", label_, "",
                                 filled, "", kWidth - filled, done, total_, elapsed, eta, suffix);
  std::fputs(line.c_str(), stdout);
  std::fputs("\x1b[K", stdout);  // clear the rest of a longer previous line
  std::fflush(stdout);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (!enabled_ || !drawn_) return;
  std::fputs("\r\x1b[K", stdout);
  std::fflush(stdout);
  drawn_ = false;
}

}  // namespace hfta
