// The plain <-> channel-blocked conversions around oneDNN's convolutions
// (fused_ops/cpu/dnnl_edges.h) against the layouts' definition: every block size, widths on
// both sides of the 8- and 16-wide tiles, a channel slice of a wider tensor (images further
// apart than C*HW, the fused array's per-model view) whose other channels stay untouched, and
// the accumulating conversion. Destinations start as NaN, so an element a conversion skips shows.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/rng.h"
#include "fused_ops/cpu/dnnl_edges.h"
#include "test_util.h"

namespace hfta {
namespace {

using cpu::ChannelBlocking;
using cpu::Conversion;

struct BlockCase {
  int64_t N, C, HW, blk;
  int64_t extra_channels;  // of the wider tensor the slice lives in (0: dense)
};

std::string name_of(const BlockCase& c) {
  return fmt::format("N{}_C{}_HW{}_blk{}_extra{}", c.N, c.C, c.HW, c.blk, c.extra_channels);
}

// Index of channel c, position hw of image n in the blocked tensor.
int64_t blocked_index(const BlockCase& k, int64_t n, int64_t c, int64_t hw) {
  const int64_t blocks = k.C / k.blk;
  return ((n * blocks + c / k.blk) * k.HW + hw) * k.blk + c % k.blk;
}

class ChannelBlocks : public testing::TestWithParam<BlockCase> {};

TEST_P(ChannelBlocks, ConvertBothWaysAsTheLayoutsDefine) {
  const BlockCase& k = GetParam();
  const uint64_t seed = test::case_seed(name_of(k));
  HFTA_CASE_TRACE(seed);
  const int64_t ld = (k.C + k.extra_channels) * k.HW;  // floats between images
  const ChannelBlocking b{.N = k.N, .C = k.C, .HW = k.HW, .ld = ld, .blk = k.blk};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  RngStream rng(seed, 0);
  std::vector<float> plain(static_cast<size_t>(k.N * ld));
  for (float& v : plain) v = rng.uniform(-1.0f, 1.0f);
  const std::vector<float> original = plain;
  std::vector<float> blocked(static_cast<size_t>(k.N * k.C * k.HW), nan);

  cpu::convert_channel_blocks(b, plain.data(), blocked.data(), Conversion::kToBlocked);
  for (int64_t n = 0; n < k.N; ++n)
    for (int64_t c = 0; c < k.C; ++c)
      for (int64_t hw = 0; hw < k.HW; ++hw)
        ASSERT_EQ(blocked[blocked_index(k, n, c, hw)], plain[n * ld + c * k.HW + hw])
            << "to blocked: image " << n << " channel " << c << " position " << hw;
  EXPECT_EQ(plain, original) << "the source changed";

  // Back into a plain tensor of NaN: the slice gets the values, the other channels stay NaN.
  std::vector<float> back(plain.size(), nan);
  cpu::convert_channel_blocks(b, back.data(), blocked.data(), Conversion::kToPlain);
  for (int64_t n = 0; n < k.N; ++n)
    for (int64_t i = 0; i < ld; ++i) {
      const float got = back[n * ld + i];
      if (i < k.C * k.HW)
        ASSERT_EQ(got, original[n * ld + i]) << "to plain: image " << n << " element " << i;
      else
        ASSERT_TRUE(std::isnan(got)) << "to plain wrote outside the slice: image " << n;
    }

  // Added into the plain tensor: each element once, exactly plain + blocked.
  std::vector<float> sum = original;
  cpu::convert_channel_blocks(b, sum.data(), blocked.data(), Conversion::kAddToPlain);
  for (int64_t n = 0; n < k.N; ++n)
    for (int64_t i = 0; i < ld; ++i) {
      const float want =
          i < k.C * k.HW ? original[n * ld + i] + original[n * ld + i] : original[n * ld + i];
      ASSERT_EQ(sum[n * ld + i], want) << "add to plain: image " << n << " element " << i;
    }
}

std::vector<BlockCase> block_cases() {
  std::vector<BlockCase> cases;
  for (int64_t blk : {8, 16})
    for (int64_t HW : {1, 7, 8, 9, 15, 16, 17, 33, 196})
      for (int64_t extra : {int64_t{0}, blk}) {
        cases.push_back({1, blk, HW, blk, extra});
        cases.push_back({3, 2 * blk, HW, blk, extra});
      }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Layouts, ChannelBlocks, testing::ValuesIn(block_cases()),
                         [](const testing::TestParamInfo<BlockCase>& info) {
                           return name_of(info.param);
                         });

}  // namespace
}  // namespace hfta
