// ReLU6 (MobileNetV2's activation): hand-computed values on both sides of 0 and 6 (and NaN), the
// CPU kernel equal to the reference on sizes around the chunk and vector widths, the gradient
// written over garbage or accumulated, and elementwise so the layout of B models cannot matter.
#include <cmath>
#include <limits>

#include "fused_ops/activation.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
using test::random_buffer;

constexpr ActivationParams kRelu6{.kind = ActivationKind::kRelu6};
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(Relu6, HandComputedValuesAndGradients) {
  Buffer x(Shape{8});
  x.values = {-1.0f, -0.0f, 0.5f, 3.0f, 5.999f, 6.0f, 7.5f, kNaN};
  Buffer y(Shape{8}, 123.0f), dx(Shape{8}, 123.0f), dy(Shape{8}, 2.0f);
  activation_forward(kRelu6, {.x = x.view(), .y = y.view()});
  const float expected_y[] = {0.0f, 0.0f, 0.5f, 3.0f, 5.999f, 6.0f, 6.0f};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(y.values[i], expected_y[i]) << i;
  EXPECT_TRUE(std::isnan(y.values[7]));
  activation_backward(kRelu6, {.y = y.view(), .dy = dy.view(), .dx = dx.view()});
  const float expected_dx[] = {0.0f, 0.0f, 2.0f, 2.0f, 2.0f, 0.0f, 0.0f, 0.0f};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(dx.values[i], expected_dx[i]) << i;
  EXPECT_STREQ(activation_name(ActivationKind::kRelu6), "relu6");
}

TEST(Relu6, KernelEqualsReferenceAndAccumulates) {
  const uint64_t seed = test::seed_for_test();
  for (int64_t n : {1, 15, 16, 17, 16383, 16384, 16385, 50000}) {
    HFTA_SEEDED_TRACE(seed);
    SCOPED_TRACE(fmt::format("n = {}", n));
    RngStream rng(seed, static_cast<uint64_t>(n));
    Buffer x = random_buffer(Shape{n}, rng, -3.0f, 9.0f), dy = random_buffer(Shape{n}, rng);
    Buffer y(Shape{n}, kNaN), y_ref(Shape{n}, kNaN);
    activation_forward(kRelu6, {.x = x.view(), .y = y.view()});
    ref::activation_forward(kRelu6, {.x = x.view(), .y = y_ref.view()});
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y.values[i], y_ref.values[i]) << i;
    Buffer start = random_buffer(Shape{n}, rng);
    for (bool accumulate : {false, true}) {
      Buffer dx = accumulate ? start : Buffer(Shape{n}, kNaN);
      Buffer dx_ref = dx;
      activation_backward(
          kRelu6, {.y = y.view(), .dy = dy.view(), .dx = dx.view(), .accumulate_dx = accumulate});
      ref::activation_backward(
          kRelu6,
          {.y = y_ref.view(), .dy = dy.view(), .dx = dx_ref.view(), .accumulate_dx = accumulate});
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(dx.values[i], dx_ref.values[i]) << i;
        const float inside = x.values[i] > 0.0f && x.values[i] < 6.0f ? dy.values[i] : 0.0f;
        ASSERT_EQ(dx.values[i], (accumulate ? start.values[i] : 0.0f) + inside) << i;
      }
    }
  }
}

}  // namespace
}  // namespace hfta
