// ForeignLoadMeter (io/process_stats.h): CPU time another process takes while this one
// waits is foreign unless the meter is told it was our child's; the share's arithmetic.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>

#include "io/process_stats.h"

namespace hfta {
namespace {

TEST(ForeignLoadMeter, ShareIsForeignTimeOverAllCpusWallTime) {
  EXPECT_DOUBLE_EQ(ForeignLoadMeter::share_of(0.2, 2.0, 2), 0.05);
  EXPECT_DOUBLE_EQ(ForeignLoadMeter::share_of(0.2, 2.0, 4), 0.025);
  EXPECT_DOUBLE_EQ(ForeignLoadMeter::share_of(-0.02, 2.0, 2), -0.005);  // unclamped
  EXPECT_DOUBLE_EQ(ForeignLoadMeter::share_of(1.0, 0.0, 2), 0.0);
  EXPECT_DOUBLE_EQ(ForeignLoadMeter::share_of(1.0, 1.0, 0), 0.0);
}

// A child spins ~0.6 s while this process waits for it: that CPU time is foreign to a meter that
// is not told of it (other tests running beside this one can only add), and not foreign once the
// child's CPU time is given.
TEST(ForeignLoadMeter, AChildsCpuTimeIsForeignUnlessGiven) {
  const ForeignLoadMeter meter;
  if (!meter.readable()) GTEST_SKIP() << "/proc/stat is not readable here";
  const pid_t child = fork();
  if (child == 0) {
    // Spins until it has used 0.6 s of CPU (not of wall time: on a loaded machine a child that
    // spins for a wall-clock time gets only part of it as CPU time).
    for (timespec t{};
         clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) == 0 &&
         static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec) < 0.6;) {
    }
    _exit(0);
  }
  ASSERT_GT(child, 0);
  rusage usage{};
  ASSERT_EQ(wait4(child, nullptr, 0, &usage), child);
  const double child_cpu = cpu_seconds(usage);
  ASSERT_GT(child_cpu, 0.4);
  const double untold = meter.foreign_cpu_seconds();
  const double told = meter.foreign_cpu_seconds(child_cpu);
  EXPECT_GE(untold, 0.9 * child_cpu);  // /proc/stat counts in ticks of 10 ms
  // Read a moment later: the machine's busy time can only have grown by a few ticks since.
  EXPECT_LE(told, untold - child_cpu + 0.05);
  EXPECT_GT(meter.share(), 0.0);
}

}  // namespace
}  // namespace hfta
