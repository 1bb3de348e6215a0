// What this process and this machine have used: clocks, CPU time, peak memory, cores.
#pragma once

#include <sys/resource.h>

#include <cstdint>

namespace hfta {

int64_t monotonic_ns();  // CLOCK_MONOTONIC: the same clock in every process
// User + system CPU seconds of a getrusage/wait4 record.
double cpu_seconds(const rusage& usage);
// This process's CPU seconds so far, all threads.
double own_cpu_seconds();
// This process's peak RSS since its last exec (VmHWM from /proc/self/status), in bytes; 0 if
// unreadable. Not getrusage's ru_maxrss: posix_spawn starts a child in its parent's address
// space, and Linux carries that space's high-water mark into the child's ru_maxrss at exec, so a
// trial's ru_maxrss would report at least the sweep's own RSS.
int64_t own_peak_rss_bytes();
// Cores this process may run on (its CPU affinity mask).
int available_cores();
// CPU-seconds all CPUs of the machine have spent busy since boot (user, nice, system, irq,
// softirq, and steal: time the hypervisor gave to someone else), from /proc/stat; -1 if
// unreadable. Compared with the CPU time of our own processes it shows foreign load.
double machine_busy_seconds();

// The CPU time that neither this process (nor the children it is told of) nor idleness took over
// a stretch of wall time: other processes, or the hypervisor's steal. Made at the stretch's start;
// asked at its end. One place for the arithmetic the sweep (per measurement, and the machine's
// peak) and plan auto (per burst) use to tell a disturbed timing.
class ForeignLoadMeter {
 public:
  ForeignLoadMeter();
  // False where /proc/stat cannot be read: then every share is 0.
  bool readable() const { return busy_start_ >= 0; }
  // Foreign CPU-seconds since the start; `own_children_cpu_seconds` is our children's CPU time
  // (not in this process's), so not foreign.
  double foreign_cpu_seconds(double own_children_cpu_seconds = 0.0) const;
  // foreign_cpu_seconds over the wall time since the start of all online CPUs (/proc/stat counts
  // them all). Unclamped: /proc/stat's 10 ms ticks can make it a little negative, or above 1,
  // over a short stretch.
  double share(double own_children_cpu_seconds = 0.0) const;
  // The arithmetic of share(): 0 for an empty stretch or no CPUs.
  static double share_of(double foreign_cpu_seconds, double wall_seconds, int cpus);

 private:
  double busy_start_;
  double own_start_;
  int64_t wall_start_ns_;
};

}  // namespace hfta
