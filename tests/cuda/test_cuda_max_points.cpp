// The CUDA max over points (fused_ops/cuda/max_points.cpp, kernels in max_points_kernels.cu)
// against the CPU op (fused_ops/cpu/max_points.cpp, through the dispatching
// max_over_points_forward / _backward): [B, N, L, C] with B in {1, 2, 3, 8}; C on both sides of
// the launch's 256-thread blocks and of the CPU's 256-channel block; L from 1 point up;
// inputs on a 0.25 grid, so channels tie (the first maximum must win); a NaN in the first point
// of one channel, a NaN later in another, -inf and -0 / +0 ties; accumulate_dx on and off (dx
// NaN-filled without it), a -0 gradient; forward with and without argmax. Selections and one add
// per element, so every comparison is bit for bit.
//
// Without a GPU: MaxPointsHostMirror runs max_points_math.h over every output / input index as
// the kernels do. With a GPU: CudaMaxPoints runs the op on device memory.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "core/device_memory.h"
#include "fused_ops/cuda/max_points_math.h"
#include "fused_ops/max_points.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;

const float kNan = std::numeric_limits<float>::quiet_NaN();

struct MaxCase {
  int64_t B, N, L, C;
  bool accumulate, with_argmax;
  MaxOverPointsParams params() const { return {.B = B, .N = N, .L = L, .C = C}; }
  std::string name() const {
    return fmt::format("B{}_N{}_L{}_C{}{}{}", B, N, L, C, accumulate ? "_acc" : "",
                       with_argmax ? "" : "_noargmax");
  }
};

std::vector<MaxCase> max_cases() {
  const struct {
    int64_t N, L, C;
  } shapes[] = {{1, 1, 5}, {2, 7, 3}, {1, 9, 255}, {2, 5, 256}, {1, 6, 257}, {3, 40, 64}};
  std::vector<MaxCase> cases;
  int i = 0;
  for (int64_t B : test::model_counts())
    for (const auto& s : shapes) {
      cases.push_back({B, s.N, s.L, s.C, i % 2 == 1, i % 5 != 3});
      ++i;
    }
  return cases;
}

struct MaxData {
  Buffer x, dy, dx_start;
};

MaxData max_data(const MaxCase& c, uint64_t seed) {
  RngStream rng(seed, 0);
  const MaxOverPointsParams p = c.params();
  MaxData d{test::random_buffer(p.x_shape(), rng), test::random_buffer(p.y_shape(), rng),
            c.accumulate ? test::random_buffer(p.x_shape(), rng) : Buffer(p.x_shape(), kNan)};
  for (float& v : d.x.values) v = std::round(v * 4.0f) / 4.0f;  // ties, and -0 next to +0
  const int64_t L = p.L, C = p.C, n = d.x.numel();
  d.x.values[0] = kNan;                              // the first point is NaN
  if (C > 1 && L > 2) d.x.values[2 * C + 1] = kNan;  // a later point is NaN
  if (C > 2) d.x.values[2] = -std::numeric_limits<float>::infinity();
  if (n > 4 * C) d.x.values[n - 1] = std::numeric_limits<float>::infinity();
  d.dy.values[0] = -0.0f;
  return d;
}

struct MaxResults {
  std::vector<float> y, dx;
  std::vector<int32_t> argmax;
};

MaxResults run_op(const MaxCase& c, MaxData d, bool on_device) {
  const MaxOverPointsParams p = c.params();
  Buffer y(p.y_shape(), kNan), dx = d.dx_start;
  std::vector<int32_t> argmax(static_cast<size_t>(p.argmax_shape().numel()), -7);
  IndexView am(argmax.data(), p.argmax_shape());
  std::optional<cuda::DeviceArena> arena;
  std::vector<Buffer*> all = {&d.x, &y, &d.dy, &dx};
  std::vector<TensorView> v;
  if (on_device) {
    size_t bytes = cuda::DeviceArena::align_up(argmax.size() * 4);
    for (Buffer* b : all) bytes += cuda::DeviceArena::align_up(static_cast<size_t>(b->numel()) * 4);
    arena.emplace(bytes, "max_points test");
    for (Buffer* b : all) {
      v.push_back(arena->carve(b->shape));
      cuda::copy_to_device(b->view(), v.back());
    }
    const TensorView a = arena->carve(p.argmax_shape());
    am = IndexView(reinterpret_cast<int32_t*>(a.data), p.argmax_shape(), Device::kCuda);
    copy_view(IndexView(argmax.data(), p.argmax_shape()), am);
  } else {
    for (Buffer* b : all) v.push_back(b->view());
  }
  max_over_points_forward(p, {.x = v[0], .saved = {.argmax = am}, .y = v[1]});
  if (!c.with_argmax) {  // a forward without argmax must still give y
    Buffer y2(p.y_shape(), kNan);
    TensorView y2v = y2.view();
    std::optional<cuda::DeviceArena> a2;
    if (on_device) {
      a2.emplace(cuda::DeviceArena::align_up(static_cast<size_t>(y2.numel()) * 4), "y2");
      y2v = a2->carve(y2.shape);
      cuda::copy_to_device(y2.view(), y2v);
    }
    max_over_points_forward(p, {.x = v[0], .y = y2v});
    Buffer y2_got(p.y_shape());
    if (on_device) cuda::copy_to_host(y2v, y2_got.view());
    Buffer y_got(p.y_shape());
    if (on_device) cuda::copy_to_host(v[1], y_got.view());
    EXPECT_TRUE(test::same_bits_or_nan(on_device ? y2_got.values : y2.values,
                                       on_device ? y_got.values : y.values))
        << "y without argmax";
  }
  max_over_points_backward(
      p, {.saved = {.argmax = am}, .dy = v[2], .dx = v[3], .accumulate_dx = c.accumulate});
  MaxResults r;
  if (on_device) {
    Buffer y_got(p.y_shape()), dx_got(p.x_shape());
    cuda::copy_to_host(v[1], y_got.view());
    cuda::copy_to_host(v[3], dx_got.view());
    copy_view(am, IndexView(argmax.data(), p.argmax_shape()));
    return {y_got.values, dx_got.values, argmax};
  }
  return {y.values, dx.values, argmax};
}

class MaxPointsHostMirror : public ::testing::TestWithParam<MaxCase> {};

TEST_P(MaxPointsHostMirror, KernelArithmeticMatchesCpuOp) {
  const MaxCase& c = GetParam();
  const uint64_t seed = test::case_seed("max_points_" + c.name());
  HFTA_CASE_TRACE(seed);
  const MaxData d = max_data(c, seed);
  const MaxResults cpu = run_op(c, d, /*on_device=*/false);
  const MaxOverPointsParams p = c.params();
  std::vector<float> y(static_cast<size_t>(p.y_shape().numel()), kNan), dx = d.dx_start.values;
  std::vector<int32_t> argmax(y.size(), -7);
  for (int64_t i = 0; i < p.B * p.N * p.C; ++i)
    max_points_math::max_at(d.x.values.data(), y.data(), argmax.data(), p.L, p.C, i);
  for (int64_t i = 0; i < p.B * p.N * p.L * p.C; ++i)
    max_points_math::dx_at(argmax.data(), d.dy.values.data(), dx.data(), p.L, p.C, c.accumulate, i);
  EXPECT_TRUE(test::same_bits_or_nan(y, cpu.y)) << "y";
  EXPECT_EQ(argmax, cpu.argmax) << "argmax";
  EXPECT_TRUE(test::same_bits_or_nan(dx, cpu.dx)) << "dx";
  // Without accumulate no NaN is left in dx (every element written; dy holds no NaN).
  if (!c.accumulate) {
    for (float v : dx) ASSERT_FALSE(std::isnan(v)) << "dx not written";
  }
}

class CudaMaxPoints : public ::testing::TestWithParam<MaxCase> {};

TEST_P(CudaMaxPoints, MatchesCpuOp) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const MaxCase& c = GetParam();
  const uint64_t seed = test::case_seed("max_points_" + c.name());
  HFTA_CASE_TRACE(seed);
  const MaxData d = max_data(c, seed);
  const MaxResults cpu = run_op(c, d, /*on_device=*/false);
  const MaxResults gpu = run_op(c, d, /*on_device=*/true);
  EXPECT_TRUE(test::same_bits_or_nan(gpu.y, cpu.y)) << "y";
  EXPECT_EQ(gpu.argmax, cpu.argmax) << "argmax";
  EXPECT_TRUE(test::same_bits_or_nan(gpu.dx, cpu.dx)) << "dx";
}

std::string max_case_name(const ::testing::TestParamInfo<MaxCase>& info) {
  return info.param.name();
}

INSTANTIATE_TEST_SUITE_P(Cases, MaxPointsHostMirror, ::testing::ValuesIn(max_cases()),
                         max_case_name);
INSTANTIATE_TEST_SUITE_P(Cases, CudaMaxPoints, ::testing::ValuesIn(max_cases()), max_case_name);

TEST(MaxPointsDevices, MixedDevicesRaise) {
  const MaxOverPointsParams p{.B = 2, .N = 1, .L = 3, .C = 2};
  Buffer x(p.x_shape()), y(p.y_shape());
  std::vector<int32_t> argmax(static_cast<size_t>(p.argmax_shape().numel()));
  TensorView on_device = y.view();
  on_device.device = Device::kCuda;
  EXPECT_THROW(max_over_points_forward(p, {.x = x.view(), .y = on_device}), Error);
  EXPECT_THROW(
      max_over_points_backward(p, {.saved = {.argmax = IndexView(argmax.data(), p.argmax_shape())},
                                   .dy = on_device,
                                   .dx = x.view()}),
      Error);
}

}  // namespace
}  // namespace hfta
