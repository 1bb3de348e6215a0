// The CUDA ReLU (fused_ops/cuda/activation.cpp) against the reference (fused_ops/ref/), through
// the dispatching activation_forward / activation_backward with device tensors: the output starts
// as NaN, dx as NaN or (accumulate_dx) random; zeros, NaN and sizes around the launch's 256-thread
// blocks. Other kinds raise on the device. Without a CUDA device these tests skip.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "fused_ops/activation.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
using test::random_buffer;

class CudaRelu : public ::testing::TestWithParam<std::tuple<int64_t, bool>> {};

TEST_P(CudaRelu, MatchesReference) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const auto [numel, accumulate] = GetParam();
  const uint64_t seed = test::case_seed(fmt::format("relu_{}_{}", numel, accumulate));
  HFTA_CASE_TRACE(seed);
  RngStream rng(seed, 0);
  const Shape shape{numel};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Buffer x = random_buffer(shape, rng), dy = random_buffer(shape, rng);
  x.values[0] = 0.0f;                        // the kink: y = 0, no gradient
  if (numel > 2) x.values[numel / 2] = nan;  // NaN stays NaN
  Buffer dx_start = accumulate ? random_buffer(shape, rng) : Buffer(shape, nan);

  cuda::DeviceArena arena(4 * cuda::DeviceArena::align_up(numel * sizeof(float)), "relu test");
  const TensorView x_dev = arena.carve(shape), y_dev = arena.carve(shape),
                   dy_dev = arena.carve(shape), dx_dev = arena.carve(shape);
  cuda::copy_to_device(x.view(), x_dev);
  cuda::copy_to_device(Buffer(shape, nan).view(), y_dev);
  cuda::copy_to_device(dy.view(), dy_dev);
  cuda::copy_to_device(dx_start.view(), dx_dev);
  const ActivationParams p{.kind = ActivationKind::kRelu};
  activation_forward(p, {.x = x_dev, .y = y_dev});
  activation_backward(p, {.y = y_dev, .dy = dy_dev, .dx = dx_dev, .accumulate_dx = accumulate});
  Buffer y_got(shape), dx_got(shape);
  cuda::copy_to_host(y_dev, y_got.view());
  cuda::copy_to_host(dx_dev, dx_got.view());

  Buffer y_want(shape), dx_want = dx_start;
  ref::activation_forward(p, {.x = x.view(), .y = y_want.view()});
  ref::activation_backward(
      p, {.y = y_want.view(), .dy = dy.view(), .dx = dx_want.view(), .accumulate_dx = accumulate});
  // Exact: one comparison and at most one add per element, in the same float arithmetic.
  for (int64_t i = 0; i < numel; ++i) {
    EXPECT_TRUE(std::isnan(y_want.values[i]) ? std::isnan(y_got.values[i])
                                             : y_got.values[i] == y_want.values[i])
        << "y[" << i << "] = " << y_got.values[i] << ", expected " << y_want.values[i];
    EXPECT_TRUE(std::isnan(dx_want.values[i]) ? std::isnan(dx_got.values[i])
                                              : dx_got.values[i] == dx_want.values[i])
        << "dx[" << i << "] = " << dx_got.values[i] << ", expected " << dx_want.values[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, CudaRelu,
                         ::testing::Combine(::testing::Values(1, 17, 255, 256, 257, 100003),
                                            ::testing::Bool()));

TEST(CudaActivation, KindsWithoutAKernelRaise) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  cuda::DeviceArena arena(1024, "gelu test");
  const TensorView x = arena.carve(Shape{4}), y = arena.carve(Shape{4});
  test::expect_error_containing_all(
      [&] { activation_forward({.kind = ActivationKind::kGelu}, {.x = x, .y = y}); },
      {"no CUDA kernel", "gelu"});
}

}  // namespace
}  // namespace hfta
