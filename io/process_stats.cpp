#include "io/process_stats.h"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

namespace hfta {

int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

double cpu_seconds(const rusage& usage) {
  return static_cast<double>(usage.ru_utime.tv_sec) + usage.ru_utime.tv_usec * 1e-6 +
         static_cast<double>(usage.ru_stime.tv_sec) + usage.ru_stime.tv_usec * 1e-6;
}

double own_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return cpu_seconds(usage);
}

int64_t own_peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoll(line.c_str() + 6, nullptr, 10) * 1024;
  return 0;
}

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

double machine_busy_seconds() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  // user nice system idle iowait irq softirq steal (guest time is inside user)
  double v[8] = {0};
  if (!(stat >> cpu) || cpu != "cpu") return -1;
  for (double& x : v)
    if (!(stat >> x)) return -1;
  const double busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  return busy / static_cast<double>(sysconf(_SC_CLK_TCK));
}

ForeignLoadMeter::ForeignLoadMeter()
    : busy_start_(machine_busy_seconds()),
      own_start_(own_cpu_seconds()),
      wall_start_ns_(monotonic_ns()) {}

double ForeignLoadMeter::foreign_cpu_seconds(double own_children_cpu_seconds) const {
  if (!readable()) return 0.0;
  const double busy = machine_busy_seconds();
  if (busy < 0) return 0.0;
  return (busy - busy_start_) - (own_cpu_seconds() - own_start_) - own_children_cpu_seconds;
}

double ForeignLoadMeter::share(double own_children_cpu_seconds) const {
  const double wall_seconds = static_cast<double>(monotonic_ns() - wall_start_ns_) * 1e-9;
  return share_of(foreign_cpu_seconds(own_children_cpu_seconds), wall_seconds,
                  static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
}

double ForeignLoadMeter::share_of(double foreign_cpu_seconds, double wall_seconds, int cpus) {
  if (wall_seconds <= 0.0 || cpus < 1) return 0.0;
  return foreign_cpu_seconds / (wall_seconds * static_cast<double>(cpus));
}

}  // namespace hfta
