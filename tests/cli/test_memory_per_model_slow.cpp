// An array's memory is B times one model's plus what the whole array shares, at any thread
// count: the peak RSS of `hfta trial` at B = 8, divided by 8, stays within 1.1x of the same
// command at B = 1, under the plans that hold the most (fused, threads, chunks) and with 2 and
// 16 threads (16 oversubscribes a 2-core machine, which changes nothing about what is allocated
// per thread). Plan auto's first run, which builds every candidate, is guarded by
// PlanAuto.TimingLeavesNothingOfTheCandidatesBehind; the table for every model is in
// docs/benchmarks.md, "Memory per model and thread count".
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "test_files.h"

namespace hfta {
namespace {

using test::CommandResult;
using test::run_hfta;

struct MemoryCase {
  std::string model, batch, plan;
  int threads;
};

std::string case_name(const testing::TestParamInfo<MemoryCase>& info) {
  std::string plan = info.param.plan;
  for (char& c : plan)
    if (c == ':' || c == '/') c = '_';
  return fmt::format("{}_{}_threads{}", info.param.model, plan, info.param.threads);
}

// The peak RSS `hfta trial` reports for `B` models.
double peak_rss(const MemoryCase& c, int B) {
  const std::string args = fmt::format(
      "trial --model {} --B {} --batch-size {} --threads {} --plan {} --steps 1 "
      "--warmup 1",
      c.model, B, c.batch, c.threads, B == 1 ? "fused" : c.plan);
  SCOPED_TRACE("hfta " + args);
  const CommandResult r = run_hfta(args);
  EXPECT_EQ(r.exit_code, 0) << r.output();
  std::smatch m;
  const std::string out = r.output();
  if (!std::regex_search(out, m, std::regex("peak_rss_bytes=([0-9]+)"))) {
    ADD_FAILURE() << "no peak_rss_bytes in: " << out;
    return 0.0;
  }
  return std::stod(m[1].str());
}

class MemoryPerModel : public testing::TestWithParam<MemoryCase> {};

TEST_P(MemoryPerModel, EightModelsTakeAtMostEightTimesOneModel) {
  const MemoryCase& c = GetParam();
  const double one = peak_rss(c, 1), eight = peak_rss(c, 8);
  ASSERT_GT(one, 0.0);
  EXPECT_LE(eight / 8.0, 1.1 * one)
      << c.model << " with " << c.threads << " threads, plan " << c.plan << ": B = 8 peaks at "
      << eight / (1 << 20) << " MiB, " << eight / 8.0 / (1 << 20) << " MiB per model against "
      << one / (1 << 20) << " MiB for one model alone";
}

INSTANTIATE_TEST_SUITE_P(Plans, MemoryPerModel,
                         testing::Values(MemoryCase{"lenet", "64", "fused", 2},
                                         MemoryCase{"lenet", "64", "fused", 16},
                                         MemoryCase{"lenet", "64", "threads", 2},
                                         MemoryCase{"lenet", "64", "threads", 16},
                                         MemoryCase{"lenet", "64", "chunk:2", 16},
                                         MemoryCase{"resnet18", "32", "threads", 16},
                                         MemoryCase{"mobilenetv2", "32", "threads", 16},
                                         MemoryCase{"transformer", "20", "threads", 16}),
                         case_name);

}  // namespace
}  // namespace hfta
