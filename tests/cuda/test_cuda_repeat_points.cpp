// The CUDA repeat over points (fused_ops/cuda/repeat_points.cpp, kernels in
// repeat_points_kernels.cu) against the CPU op (fused_ops/cpu/repeat_points.cpp, through the
// dispatching repeat_points_forward / repeat_points_backward): [B, N, L, C] with B in {1, 2, 3, 8},
// L from 1 to 2500 points (PointNet segmentation's clouds), C on both sides of 256 (the CPU's
// channel block, the launch's block); accumulate_dx on and off (dx starts as NaN without it); a
// NaN, an inf and a -0 among the gradients. Copies and a sum in double in point order on both
// sides, so every comparison is bit for bit.
//
// Without a GPU: RepeatPointsHostMirror runs repeat_points_math.h over every index as the kernels
// do, on NaN-filled outputs. With a GPU: CudaRepeatPoints runs the op on device memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/runtime.h"
#include "core/arena.h"
#include "core/device_memory.h"
#include "fused_ops/cuda/repeat_points_math.h"
#include "fused_ops/repeat_points.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;

const float kNan = std::numeric_limits<float>::quiet_NaN();

struct RepeatCase {
  RepeatPointsParams p;
  bool accumulate;
  std::string name() const {
    return fmt::format("B{}_N{}_L{}_C{}{}", p.B, p.N, p.L, p.C, accumulate ? "_acc" : "");
  }
};

void PrintTo(const RepeatCase& c, std::ostream* os) { *os << c.name(); }

std::vector<RepeatCase> cases() {
  const struct {
    int64_t N, L, C;
  } shapes[] = {{1, 1, 1}, {2, 5, 3}, {1, 64, 255}, {2, 7, 256}, {1, 3, 257}, {2, 2500, 7}};
  std::vector<RepeatCase> out;
  int k = 0;
  for (const auto& s : shapes)
    for (int64_t B : test::model_counts())
      out.push_back({{.B = B, .N = s.N, .L = s.L, .C = s.C}, k++ % 2 == 1});
  return out;
}

struct Tensors {
  Buffer x, dy, dx_start;
};

Tensors inputs(const RepeatCase& c) {
  RngStream rng(test::case_seed("cuda_repeat_points_" + c.name()), 0);
  Tensors t{test::random_buffer(c.p.x_shape(), rng), test::random_buffer(c.p.y_shape(), rng),
            c.accumulate ? test::random_buffer(c.p.x_shape(), rng) : Buffer(c.p.x_shape(), kNan)};
  const int64_t n = t.dy.numel();
  t.dy.values[0] = -0.0f;
  if (n > 2) t.dy.values[n - 1] = kNan, t.dy.values[n / 2] = std::numeric_limits<float>::infinity();
  return t;
}

struct Outputs {
  std::vector<float> y, dx;
};

// The op through its dispatcher, on the host buffers or on device copies of them.
Outputs run_op(const RepeatCase& c, const Tensors& t, Device device) {
  Buffer y(c.p.y_shape(), kNan), x = t.x, dy = t.dy, dx = t.dx_start;
  std::vector<Buffer*> all = {&x, &y, &dy, &dx};
  std::vector<TensorView> v;
  std::vector<Arena> arenas;
  arenas.reserve(all.size());
  for (Buffer* b : all) {
    if (device == Device::kCpu) {
      v.push_back(b->view());
      continue;
    }
    Arena& a =
        arenas.emplace_back(Arena::align_up(static_cast<size_t>(b->numel()) * 4), "test", device);
    v.push_back(a.carve<float>(b->shape));
    copy_view(b->view(), v.back());
  }
  repeat_points_forward(c.p, {.x = v[0], .y = v[1]});
  repeat_points_backward(c.p, {.dy = v[2], .dx = v[3], .accumulate_dx = c.accumulate});
  if (device != Device::kCpu) {
    copy_view(v[1], y.view());
    copy_view(v[3], dx.view());
  }
  return {y.values, dx.values};
}

class RepeatPointsHostMirror : public ::testing::TestWithParam<RepeatCase> {};

TEST_P(RepeatPointsHostMirror, KernelArithmeticMatchesCpuOp) {
  const RepeatCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_repeat_points_" + c.name()));
  const Tensors t = inputs(c);
  const Outputs cpu = run_op(c, t, Device::kCpu);
  std::vector<float> y(static_cast<size_t>(c.p.y_shape().numel()), kNan), dx = t.dx_start.values;
  for (int64_t i = 0; i < c.p.y_shape().numel(); ++i)
    repeat_points_math::forward_at(t.x.values.data(), y.data(), c.p.L, c.p.C, i);
  for (int64_t i = 0; i < c.p.x_shape().numel(); ++i)
    repeat_points_math::backward_at(t.dy.values.data(), dx.data(), c.p.L, c.p.C, c.accumulate, i);
  test::expect_same_bits(y, cpu.y, "y");
  test::expect_same_bits(dx, cpu.dx, "dx");
  // Model b's bits do not depend on B: each element reads only its own model's slice.
  if (c.p.B > 1) {
    const int64_t per = c.p.x_shape().numel() / c.p.B, dy_per = c.p.y_shape().numel() / c.p.B;
    std::vector<float> alone(static_cast<size_t>(per));
    if (c.accumulate) std::copy_n(t.dx_start.values.end() - per, per, alone.begin());
    for (int64_t i = 0; i < per; ++i)
      repeat_points_math::backward_at(t.dy.values.data() + (c.p.B - 1) * dy_per, alone.data(),
                                      c.p.L, c.p.C, c.accumulate, i);
    test::expect_same_bits(alone, std::vector<float>(dx.end() - per, dx.end()), "last model alone");
  }
}

class CudaRepeatPoints : public ::testing::TestWithParam<RepeatCase> {};

TEST_P(CudaRepeatPoints, MatchesCpuOp) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const RepeatCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_repeat_points_" + c.name()));
  const Tensors t = inputs(c);
  const Outputs cpu = run_op(c, t, Device::kCpu), gpu = run_op(c, t, Device::kCuda);
  test::expect_same_bits(gpu.y, cpu.y, "y");
  test::expect_same_bits(gpu.dx, cpu.dx, "dx");
}

std::string case_name(const ::testing::TestParamInfo<RepeatCase>& info) {
  return info.param.name();
}

INSTANTIATE_TEST_SUITE_P(Cases, RepeatPointsHostMirror, ::testing::ValuesIn(cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Cases, CudaRepeatPoints, ::testing::ValuesIn(cases()), case_name);

TEST(RepeatPointsDevices, MixedDevicesRaise) {
  const RepeatPointsParams p{.B = 2, .N = 1, .L = 3, .C = 2};
  Buffer x(p.x_shape()), y(p.y_shape());
  TensorView on_device = y.view();
  on_device.device = Device::kCuda;
  test::expect_error_containing([&] { repeat_points_forward(p, {.x = x.view(), .y = on_device}); },
                                "repeat_points output is on the CUDA device");
  TensorView dx_on_device = x.view();
  dx_on_device.device = Device::kCuda;
  test::expect_error_containing(
      [&] { repeat_points_backward(p, {.dy = y.view(), .dx = dx_on_device}); },
      "repeat_points input gradient is on the CUDA device");
}

}  // namespace
}  // namespace hfta
