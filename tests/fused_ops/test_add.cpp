// Residual add: the CPU kernel equals the reference and the hand-computed sum, backward writes or
// accumulates dy exactly, model b's channels of a fused tensor equal model b's add alone, and bad
// shapes raise hfta::Error. Additions of two floats round identically everywhere, so every
// comparison is exact.
#include <cmath>
#include <limits>

#include "fused_ops/add.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
using test::random_buffer;

constexpr float kGarbage = std::numeric_limits<float>::quiet_NaN();

// Element counts on both sides of the chunk size (16K floats) and the vector width (16).
const int64_t kSizes[] = {1, 15, 16, 17, 255, 16383, 16384, 16385, 40000};

TEST(Add, ForwardAndBackwardAreExact) {
  const uint64_t seed = test::seed_for_test();
  for (int64_t size : kSizes) {
    HFTA_SEEDED_TRACE(seed);
    SCOPED_TRACE(fmt::format("size {}", size));
    RngStream rng(seed, static_cast<uint64_t>(size));
    Buffer a = random_buffer(Shape{size}, rng), b = random_buffer(Shape{size}, rng);
    Buffer y(Shape{size}, kGarbage);
    add_forward({.a = a.view(), .b = b.view(), .y = y.view()});
    for (int64_t i = 0; i < size; ++i) ASSERT_EQ(y.values[i], a.values[i] + b.values[i]) << i;

    Buffer dy = random_buffer(Shape{size}, rng);
    Buffer dx(Shape{size}, kGarbage);
    add_backward({.dy = dy.view(), .dx = dx.view()});
    for (int64_t i = 0; i < size; ++i) ASSERT_EQ(dx.values[i], dy.values[i]) << i;

    Buffer start = random_buffer(Shape{size}, rng), acc = start, acc_ref = start;
    add_backward({.dy = dy.view(), .dx = acc.view(), .accumulate_dx = true});
    ref::add_backward({.dy = dy.view(), .dx = acc_ref.view(), .accumulate_dx = true});
    for (int64_t i = 0; i < size; ++i) {
      ASSERT_EQ(acc.values[i], start.values[i] + dy.values[i]) << i;
      ASSERT_EQ(acc.values[i], acc_ref.values[i]) << i;
    }
  }
}

TEST(Add, ModelSliceOfAFusedTensorEqualsThatModelAlone) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  const int64_t N = 3, C = 5, HW = 7;
  for (int64_t B : test::model_counts()) {
    RngStream rng(seed, static_cast<uint64_t>(B));
    Buffer a = random_buffer(Shape{N, B * C, HW, 1}, rng);
    Buffer b = random_buffer(Shape{N, B * C, HW, 1}, rng);
    Buffer y(a.shape, kGarbage);
    add_forward({.a = a.view(), .b = b.view(), .y = y.view()});
    for (int64_t m = 0; m < B; ++m) {
      Buffer am(Shape{N, C, HW, 1}), bm(Shape{N, C, HW, 1}), ym(Shape{N, C, HW, 1}, kGarbage);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < C * HW; ++i) {
          am.values[n * C * HW + i] = a.values[(n * B * C + m * C) * HW + i];
          bm.values[n * C * HW + i] = b.values[(n * B * C + m * C) * HW + i];
        }
      ref::add_forward({.a = am.view(), .b = bm.view(), .y = ym.view()});
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < C * HW; ++i)
          ASSERT_EQ(y.values[(n * B * C + m * C) * HW + i], ym.values[n * C * HW + i]);
    }
  }
}

TEST(Add, BadShapesAreErrors) {
  Buffer a(Shape{2, 3}), b(Shape{3, 2}), y(Shape{2, 3});
  EXPECT_THROW(add_forward({.a = a.view(), .b = b.view(), .y = y.view()}), Error);
  EXPECT_THROW(add_forward({.a = a.view(), .b = a.view(), .y = b.view()}), Error);
  EXPECT_THROW(add_forward({.a = a.view(), .b = TensorView(), .y = y.view()}), Error);
  EXPECT_THROW(add_backward({.dy = a.view(), .dx = b.view()}), Error);
  EXPECT_THROW(add_backward({.dy = TensorView(), .dx = b.view()}), Error);
}

}  // namespace
}  // namespace hfta
