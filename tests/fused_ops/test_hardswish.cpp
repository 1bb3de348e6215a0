// Hardswish and Hardsigmoid (MobileNetV3) against PyTorch 1.13's numbers, bit for bit: values
// and gradients (dy = 0.75) on both sides of and exactly at the kinks -3 and 3, at +-0, just
// inside (+-2.9999998: Hardsigmoid's output already rounds to 1 there, its gradient is still
// 1/6) and NaN, from torch.nn.functional.hardswish / hardsigmoid on a 1024-element tensor (every
// element through PyTorch's vectorized kernel). The kernel and the reference give them at sizes
// on both sides of the vector width, written and accumulated. The op harness
// (test_activation.cpp) covers B models, layouts and finite differences.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "fused_ops/activation.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int kValues = 16;
constexpr float kX[kValues] = {
    -0x1.cp+1f,     -0x1.8p+1f,      -0x1.7ffffep+1f,  -0x1.8p+0f, -0.0f,          0.0f,
    0x1p+0f,        0x1.7ffffep+1f,  0x1.8p+1f,        0x1.cp+1f,  0x1.333334p-2f, -0x1.666666p-1f,
    0x1.19999ap+1f, 0x1.0624dep-10f, -0x1.0624dep-10f, 0x1.4p+2f,
};
struct Expected {
  ActivationKind kind;
  float y[kValues], dx[kValues];  // PyTorch's, for dy = 0.75
};
const Expected kTorch[] = {{ActivationKind::kHardswish,
                            {
                                -0.0f,
                                -0.0f,
                                -0x1.fffffep-24f,
                                -0x1.8p-2f,
                                -0.0f,
                                0.0f,
                                0x1.555556p-1f,
                                0x1.7ffffep+1f,
                                0x1.8p+1f,
                                0x1.cp+1f,
                                0x1.51eb86p-3f,
                                -0x1.12c5f8p-2f,
                                0x1.e81b4ep+0f,
                                0x1.063b3cp-11f,
                                -0x1.060e8p-11f,
                                0x1.4p+2f,
                            },
                            {
                                0.0f,
                                -0x1.8p-2f,
                                -0x1.7ffffcp-2f,
                                0.0f,
                                0x1.8p-2f,
                                0x1.8p-2f,
                                0x1.4p-1f,
                                0x1.2p+0f,
                                0x1.8p-1f,
                                0x1.8p-1f,
                                0x1.cccccep-2f,
                                0x1.999998p-3f,
                                0x1.d9999ap-1f,
                                0x1.804188p-2f,
                                0x1.7fbe76p-2f,
                                0x1.8p-1f,
                            }},
                           {ActivationKind::kHardsigmoid,
                            {
                                0.0f,
                                0.0f,
                                0x1.555556p-25f,
                                0x1p-2f,
                                0x1p-1f,
                                0x1p-1f,
                                0x1.555556p-1f,
                                0x1p+0f,
                                0x1p+0f,
                                0x1p+0f,
                                0x1.19999ap-1f,
                                0x1.888888p-2f,
                                0x1.bbbbbap-1f,
                                0x1.0015d8p-1f,
                                0x1.ffd45p-2f,
                                0x1p+0f,
                            },
                            {
                                0.0f,
                                0.0f,
                                0x1p-3f,
                                0x1p-3f,
                                0x1p-3f,
                                0x1p-3f,
                                0x1p-3f,
                                0x1p-3f,
                                0.0f,
                                0.0f,
                                0x1p-3f,
                                0x1p-3f,
                                0x1p-3f,
                                0x1p-3f,
                                0x1p-3f,
                                0.0f,
                            }}};

// Equal bits (so -0 and 0 differ), or both NaN.
::testing::AssertionResult same_float(float got, float want) {
  if ((std::isnan(got) && std::isnan(want)) ||
      std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << fmt::format("got {:a}, PyTorch gives {:a}", got, want);
}

TEST(Hardswish, ValuesAndGradientsArePyTorchsBitForBit) {
  for (const Expected& e : kTorch)
    for (int64_t n : {1, 7, 8, 15, 16, 17, 33, 1024})
      for (bool reference : {false, true})
        for (bool accumulate : {false, true}) {
          const ActivationParams p{.kind = e.kind};
          SCOPED_TRACE(fmt::format("{} n={} reference={} accumulate={}", activation_name(e.kind), n,
                                   reference, accumulate));
          Buffer x(Shape{n}), y(Shape{n}, kNaN), dy(Shape{n}, 0.75f);
          Buffer dx(Shape{n}, accumulate ? 0.0f : kNaN);
          for (int64_t i = 0; i < n; ++i) x.values[i] = kX[(i * 5 + 3) % kValues];
          if (reference) {
            ref::activation_forward(p, {.x = x.view(), .y = y.view()});
            ref::activation_backward(
                p, {.x = x.view(), .dy = dy.view(), .dx = dx.view(), .accumulate_dx = accumulate});
          } else {
            activation_forward(p, {.x = x.view(), .y = y.view()});
            activation_backward(
                p, {.x = x.view(), .dy = dy.view(), .dx = dx.view(), .accumulate_dx = accumulate});
          }
          for (int64_t i = 0; i < n; ++i) {
            const int k = static_cast<int>((i * 5 + 3) % kValues);
            ASSERT_TRUE(same_float(y.values[i], e.y[k])) << "y at x = " << kX[k];
            // Accumulating onto +0 turns PyTorch's -0 into +0.
            const float want = accumulate ? 0.0f + e.dx[k] : e.dx[k];
            ASSERT_TRUE(same_float(dx.values[i], want)) << "dx at x = " << kX[k];
          }
        }
}

// NaN in, NaN out; Hardswish's gradient at NaN is NaN (PyTorch's vectorized kernel),
// Hardsigmoid's is 0 (NaN is not inside (-3, 3)).
TEST(Hardswish, NanInput) {
  for (int64_t n : {1, 17}) {
    Buffer x(Shape{n}, kNaN), y(Shape{n}), dy(Shape{n}, 1.0f), dx(Shape{n});
    for (ActivationKind kind : {ActivationKind::kHardswish, ActivationKind::kHardsigmoid}) {
      const ActivationParams p{.kind = kind};
      activation_forward(p, {.x = x.view(), .y = y.view()});
      activation_backward(p, {.x = x.view(), .dy = dy.view(), .dx = dx.view()});
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_TRUE(std::isnan(y.values[i])) << activation_name(kind);
        if (kind == ActivationKind::kHardswish)
          EXPECT_TRUE(std::isnan(dx.values[i]));
        else
          EXPECT_EQ(dx.values[i], 0.0f);
      }
    }
  }
  EXPECT_STREQ(activation_name(ActivationKind::kHardswish), "hardswish");
  EXPECT_STREQ(activation_name(ActivationKind::kHardsigmoid), "hardsigmoid");
  EXPECT_FALSE(ActivationParams{ActivationKind::kHardswish}.backward_reads_output());
  EXPECT_FALSE(ActivationParams{ActivationKind::kHardsigmoid}.backward_reads_output());
}

}  // namespace
}  // namespace hfta
