// Pointwise convolutions as GEMMs per image (fused_ops/cpu/conv2d_pointwise.h) on the op harness:
// fused(B) equals B reference single-model runs, forward and every gradient, garbage-filled
// outputs, each case also forced onto oneDNN; and the strategy is picked exactly where it applies.
#include <gtest/gtest.h>

#include <vector>

#include "conv2d_cases.h"
#include "conv_test_util.h"
#include "fused_ops/conv2d.h"
#include "fused_ops/cpu/conv2d_pointwise.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Conv2dOp;
using test::conv_case;
using test::ConvCase;
using test::OpCase;
using test::params_for;
using test::StrategyScope;

// 1x1 kernels at stride 1 without padding on planes of at least 16 positions: output channels on
// both sides of the weight gradient's 16-row blocks (15, 16, 17, 33), one image (the images'
// loop then runs on the caller) and several, a non-square plane, a shared input (dx sums the
// models), bias on and off, MobileNetV2-like expansions and projections at small sizes.
const ConvCase kPointwiseCases[] = {
    // N, cin, cout, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups, bias, shared
    {2, 8, 16, 4, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false},     // the smallest plane taken
    {1, 3, 17, 4, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, false},    // one image, 17 rows
    {3, 16, 15, 5, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false},    // 15 rows: one short block
    {2, 24, 33, 6, 6, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, false},   // 33 rows: 16 + 16 + 1
    {4, 6, 36, 8, 8, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, false},    // an expansion
    {4, 36, 8, 8, 8, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false},     // a projection
    {2, 5, 12, 4, 4, 1, 1, 1, 1, 0, 0, 2, 2, 1, true, false},     // dilation: no effect on 1x1
    {3, 24, 20, 4, 6, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, true},     // shared input
    {2, 32, 48, 16, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, true},  // shared, 256 positions
};

std::vector<OpCase<Conv2dParams>> pointwise_cases() {
  std::vector<OpCase<Conv2dParams>> out;
  int64_t k = 0;
  for (auto strategy : {cpu::Conv2dStrategy::kPointwise, cpu::Conv2dStrategy::kPerModel})
    for (const ConvCase& cc : kPointwiseCases)
      for (int64_t B : {1, 2, 3, 8}) {
        const bool no_dx = B == 2 && (k % 3) == 0;
        OpCase<Conv2dParams> c = conv_case(cc, B, strategy, k++ % 2, no_dx);
        c.fd = B == 1 && strategy == cpu::Conv2dStrategy::kPointwise &&
               cc.N * cc.cin * cc.H * cc.W <= 64;
        out.push_back(c);
      }
  return out;
}

class Conv2dPointwiseHarness : public ::testing::TestWithParam<OpCase<Conv2dParams>> {};
TEST_P(Conv2dPointwiseHarness, FusedEqualsSerial) { test::run_case<Conv2dOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Pointwise, Conv2dPointwiseHarness, ::testing::ValuesIn(pointwise_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCudaPointwise, Conv2dPointwiseHarness,
                         ::testing::ValuesIn(test::device_cases<Conv2dOp>(pointwise_cases(),
                                                                          Device::kCuda)),
                         test::CaseName());

// The per-image GEMMs are chosen exactly where they apply, whatever B, after the small-plane
// GEMMs (im2col), and only when not forced elsewhere.
TEST(Conv2d, PointwiseAppliesToOneByOneConvolutionsOnPlanesOfSixteenPositionsOrMore) {
  for (const ConvCase& c : kPointwiseCases)
    for (int64_t B : {1, 4}) {
      EXPECT_EQ(cpu::conv2d_strategy_for(params_for(B, c)), cpu::Conv2dStrategy::kPointwise)
          << fmt::format("B={} N={} cin={} H={} W={} cout={} shared={}", B, c.N, c.cin, c.H, c.W,
                         c.cout, c.shared);
      StrategyScope scope(cpu::Conv2dStrategy::kPerModel);
      EXPECT_NE(cpu::conv2d_strategy_for(params_for(B, c)), cpu::Conv2dStrategy::kPointwise);
    }
  const ConvCase others[] = {
      // N, cin, cout, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups, bias, shared
      {2, 8, 16, 3, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false},   // 15 positions
      {2, 8, 16, 8, 8, 1, 1, 2, 2, 0, 0, 1, 1, 1, true, false},   // stride 2
      {2, 8, 16, 8, 8, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, false},   // padding
      {2, 8, 16, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},   // 3x3 kernel
      {2, 8, 16, 8, 8, 1, 1, 1, 1, 0, 0, 1, 1, 2, true, false},   // groups 2
      {2, 8, 16, 8, 8, 1, 1, 1, 1, 0, 0, 1, 1, 8, false, false},  // depthwise
  };
  StrategyScope scope(cpu::Conv2dStrategy::kPointwise);
  for (const ConvCase& c : others)
    EXPECT_NE(cpu::conv2d_strategy_for(params_for(2, c)), cpu::Conv2dStrategy::kPointwise)
        << fmt::format("N={} H={} W={} k={} stride={} pad={} groups={}", c.N, c.H, c.W, c.kh, c.sh,
                       c.ph, c.groups);
}

// Names round-trip, and an unknown one is refused naming the choices.
TEST(Conv2d, StrategyNamesParseAndUnknownOnesAreRefused) {
  for (auto s :
       {cpu::Conv2dStrategy::kAuto, cpu::Conv2dStrategy::kGrouped, cpu::Conv2dStrategy::kPerModel,
        cpu::Conv2dStrategy::kDirect, cpu::Conv2dStrategy::kDepthwise, cpu::Conv2dStrategy::kIm2col,
        cpu::Conv2dStrategy::kPointwise})
    EXPECT_EQ(cpu::parse_conv2d_strategy(cpu::conv2d_strategy_name(s)), s);
  try {
    cpu::parse_conv2d_strategy("winograd");
    FAIL() << "an unknown strategy was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'winograd'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("pointwise"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hfta
