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

}  // namespace hfta
