// Wall time for progress lines, throughput figures and search timelines: the monotonic clock.
#pragma once

#include <chrono>

namespace hfta {

using Clock = std::chrono::steady_clock;

// Seconds from `start` to now.
inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace hfta
