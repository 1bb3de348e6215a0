// Conv2d on small output planes as GEMMs (fused_ops/cpu/conv2d_im2col.h) on the op harness:
// fused(B) equals B reference single-model runs, forward and every gradient, garbage-filled
// outputs, each case also forced onto oneDNN; and the strategy is picked exactly where it applies.
#include <gtest/gtest.h>

#include <iterator>
#include <vector>

#include "backend/cpu/runtime.h"
#include "conv2d_cases.h"
#include "conv_test_util.h"
#include "fused_ops/conv2d.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Conv2dOp;
using test::conv_case;
using test::ConvCase;
using test::OpCase;
using test::params_for;
using test::StrategyScope;

// Small output planes whose weights outweigh their activations, or with 1x1 kernels, as GEMMs
// (cpu/conv2d_im2col.h):
// 1x1 planes where only the centre tap (or one row of taps) reads the input (the live taps'
// weights gathered), 2x2 planes where every tap is live (the weight as it is), stride 2 into
// 1x1 with 4 live taps, 1x1 kernels, dilation, a shared input (dx sums the models), GEMMs of a
// few dozen rows; every case also forced onto oneDNN. Cases of even N pass the live taps' weights
// that forward saves for backward (conv2d.h), the others let backward gather them again.
const ConvCase kIm2colCases[] = {
    // N, cin, cout, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups, bias, shared
    {2, 8, 16, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},    // 1x1 plane: the centre tap
    {3, 8, 16, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},   // the same, odd N: not saved
    {2, 8, 16, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},   // 2x2: every tap live
    {2, 8, 16, 2, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, false},    // stride 2 to 1x1: 4 of 9
    {2, 8, 16, 2, 2, 1, 1, 2, 2, 0, 0, 1, 1, 1, false, false},   // 1x1 kernel, stride 2
    {1, 4, 8, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, false},     // 4x4 to 2x2
    {2, 4, 16, 2, 2, 3, 3, 1, 1, 2, 2, 2, 2, 1, true, false},    // dilation 2
    {2, 4, 16, 1, 3, 3, 1, 1, 1, 1, 0, 1, 1, 1, true, false},    // 1x3 plane, one live row
    {2, 8, 16, 2, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, true},     // shared input, stride 2
    {4, 32, 64, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},  // ResNet-18's layer 4, small
    {3, 16, 48, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, true},   // shared, 2x2
    // Enough output channels (>= 64 per thread) for the forward GEMM's column blocks, one per
    // thread, and a last block shorter than the others (150 = 80 + 70); 1x1 kernels on 1x1
    // planes (MobileNetV2's last blocks, the im2col a copy of each image) and on a 2x2 plane.
    {3, 40, 160, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false},   // 1x1 plane, 1x1 kernel
    {2, 33, 150, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, true},   // the same, shared, uneven
    {2, 24, 144, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false},   // 2x2 plane, 1x1 kernel
    {2, 20, 130, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},  // centre tap, 130 columns
    // MobileNetV2's 960 -> 160 at batch 32, where oneDNN computes a block of the forward GEMM's
    // columns differently from the whole GEMM (deterministic mode must not cut it).
    {32, 960, 160, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, false},
    // 1x1 kernels whose im2col outweighs the weight (C_out <= N*OH*OW): projections.
    {8, 24, 16, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false},  // 2x2 plane
    {6, 36, 20, 4, 4, 1, 1, 2, 2, 0, 0, 1, 1, 1, false, true},  // 4x4 -> 2x2, shared
};

// Small planes whose activations are at least the weight, with zeros in the im2col: the GEMMs take
// them only where oneDNN has no AVX-512 kernels (oneDNN's elsewhere); the harness runs them on
// whichever path the machine picks.
const ConvCase kWithoutAvx512Cases[] = {
    // N, cin, cout, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups, bias, shared
    {4, 8, 16, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},    // weight = activations
    {9, 12, 20, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},  // activations outweigh
    {24, 16, 40, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, false},  // 4x4 to 2x2, stride 2
    {12, 16, 8, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, true},   // the same, shared
    {40, 24, 3, 4, 4, 4, 4, 1, 1, 0, 0, 1, 1, 1, true, false},   // a 4x4 kernel to 1x1
};

std::vector<OpCase<Conv2dParams>> im2col_cases() {
  std::vector<ConvCase> shapes(std::begin(kIm2colCases), std::end(kIm2colCases));
  shapes.insert(shapes.end(), std::begin(kWithoutAvx512Cases), std::end(kWithoutAvx512Cases));
  std::vector<OpCase<Conv2dParams>> out;
  int64_t k = 0;
  for (auto strategy : {cpu::Conv2dStrategy::kIm2col, cpu::Conv2dStrategy::kPerModel})
    for (const ConvCase& cc : shapes)
      for (int64_t B : {1, 2, 3, 5}) {
        const bool no_dx = B == 2 && (k % 3) == 0;
        OpCase<Conv2dParams> c = conv_case(cc, B, strategy, k++ % 2, no_dx);
        c.fd =
            B == 1 && strategy == cpu::Conv2dStrategy::kIm2col && cc.N * cc.cin * cc.H * cc.W <= 64;
        out.push_back(c);
      }
  return out;
}

class Conv2dIm2colHarness : public ::testing::TestWithParam<OpCase<Conv2dParams>> {};
TEST_P(Conv2dIm2colHarness, FusedEqualsSerial) { test::run_case<Conv2dOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Im2col, Conv2dIm2colHarness, ::testing::ValuesIn(im2col_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCudaIm2col, Conv2dIm2colHarness,
                         ::testing::ValuesIn(test::device_cases<Conv2dOp>(im2col_cases(),
                                                                          Device::kCuda)),
                         test::CaseName());

// The GEMM path is chosen exactly where it applies, whatever B, and only when not forced
// elsewhere.
TEST(Conv2d,
     Im2colAppliesToSmallPlanesWhoseWeightsOutweighTheirActivationsOrOneTapOrWithoutAvx512) {
  for (const ConvCase& c : kIm2colCases)
    for (int64_t B : {1, 4}) {
      EXPECT_EQ(cpu::conv2d_strategy_for(params_for(B, c)), cpu::Conv2dStrategy::kIm2col)
          << fmt::format("B={} N={} cin={} H={} W={} cout={} shared={}", B, c.N, c.cin, c.H, c.W,
                         c.cout, c.shared);
      StrategyScope scope(cpu::Conv2dStrategy::kPerModel);
      EXPECT_NE(cpu::conv2d_strategy_for(params_for(B, c)), cpu::Conv2dStrategy::kIm2col);
    }
  const ConvCase others[] = {
      // N, cin, cout, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups, bias, shared
      {2, 8, 16, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},  // 3x3 plane: 9 positions
      {2, 8, 16, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 2, true, false},  // groups 2
      {2, 8, 4, 3, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false},   // 1x1 kernel, 9 positions
  };
  StrategyScope scope(cpu::Conv2dStrategy::kIm2col);
  for (const ConvCase& c : others)
    EXPECT_NE(cpu::conv2d_strategy_for(params_for(2, c)), cpu::Conv2dStrategy::kIm2col)
        << fmt::format("N={} H={} groups={}", c.N, c.H, c.groups);
  // Where the activations are at least the weight, the GEMMs take a small plane only without
  // oneDNN's AVX-512 kernels.
  const bool without_avx512 = !cpu::onednn_has_avx512_kernels();
  for (const ConvCase& c : kWithoutAvx512Cases)
    for (int64_t B : {1, 4})
      EXPECT_EQ(cpu::conv2d_strategy_for(params_for(B, c)) == cpu::Conv2dStrategy::kIm2col,
                without_avx512)
          << fmt::format("B={} N={} cin={} H={} cout={}; oneDNN's AVX-512 kernels: {}", B, c.N,
                         c.cin, c.H, c.cout, !without_avx512);
}

}  // namespace
}  // namespace hfta
