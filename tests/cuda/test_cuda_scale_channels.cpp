// The CUDA channel scaling (fused_ops/cuda/scale_channels.cpp), MobileNetV3's squeeze-and-
// excitation `scale * x`: B in {1, 2, 3, 8}, planes of 1 to 49 positions (around the 8 lanes of
// the scale gradient's sum), dx and ds written, added or not wanted.
//   ScaleChannelsHostMirror (runs without a GPU): scale_channels_math.h over every element and
//     row, as the kernels run it, on NaN-filled outputs, equals the CPU op bit for bit.
//   CudaScaleChannels (skipped without a GPU): the op on device tensors equals the CPU op bit
//     for bit; ScaleChannelsDevices: tensors on two devices are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/scale_channels_math.h"
#include "fused_ops/scale_channels.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
using test::random_buffer;

struct ScaleCase {
  ScaleChannelsParams p;
  bool want_dx, want_ds, accumulate;
  std::string name() const {
    return fmt::format("B{}_N{}_C{}_HW{}{}{}{}", p.B, p.N, p.C, p.HW, want_dx ? "_dx" : "",
                       want_ds ? "_ds" : "", accumulate ? "_acc" : "");
  }
};

void PrintTo(const ScaleCase& c, std::ostream* os) { *os << c.name(); }

std::vector<ScaleCase> cases() {
  const struct {
    int64_t N, C, HW;
  } shapes[] = {{1, 1, 1}, {2, 5, 7}, {3, 16, 8}, {2, 3, 9}, {2, 4, 49}};
  std::vector<ScaleCase> out;
  int k = 0;
  for (const auto& s : shapes)
    for (int64_t B : {1, 2, 3, 8}) {
      const int variant = k++ % 4;  // both gradients, only dx, only ds; accumulate on odd cases
      out.push_back(
          {{.B = B, .N = s.N, .C = s.C, .HW = s.HW}, variant != 2, variant != 1, variant % 2 == 1});
    }
  return out;
}

struct Tensors {
  Buffer x, s, dy, dx_start, ds_start;
};

Tensors inputs(const ScaleCase& c) {
  RngStream rng(test::case_seed("cuda_scale_channels_" + c.name()), 0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensors t{random_buffer(c.p.x_shape(), rng), random_buffer(c.p.s_shape(), rng, 0.0f, 1.0f),
            random_buffer(c.p.x_shape(), rng),
            c.accumulate ? random_buffer(c.p.x_shape(), rng) : Buffer(c.p.x_shape(), nan),
            c.accumulate ? random_buffer(c.p.s_shape(), rng) : Buffer(c.p.s_shape(), nan)};
  return t;
}

struct Outputs {
  Buffer y, dx, ds;
};

Outputs cpu_op(const ScaleCase& c, Tensors& t) {
  Outputs o{Buffer(c.p.x_shape(), std::numeric_limits<float>::quiet_NaN()), t.dx_start, t.ds_start};
  scale_channels_forward(c.p, {.x = t.x.view(), .s = t.s.view(), .y = o.y.view()});
  scale_channels_backward(c.p, {.x = t.x.view(),
                                .s = t.s.view(),
                                .dy = t.dy.view(),
                                .dx = c.want_dx ? o.dx.view() : TensorView(),
                                .ds = c.want_ds ? o.ds.view() : TensorView(),
                                .accumulate_dx = c.accumulate,
                                .accumulate_ds = c.accumulate});
  return o;
}

class ScaleChannelsHostMirror : public ::testing::TestWithParam<ScaleCase> {};

TEST_P(ScaleChannelsHostMirror, EqualsTheCpuOp) {
  const ScaleCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_scale_channels_" + c.name()));
  Tensors t = inputs(c);
  const Outputs want = cpu_op(c, t);
  Outputs got{Buffer(c.p.x_shape(), std::numeric_limits<float>::quiet_NaN()), t.dx_start,
              t.ds_start};
  const int64_t rows = c.p.N * c.p.B * c.p.C, n = rows * c.p.HW;
  for (int64_t e = 0; e < n; ++e)
    scale_channels_math::forward_at(t.x.values.data(), t.s.values.data(), got.y.values.data(),
                                    c.p.HW, e);
  if (c.want_ds)
    for (int64_t r = 0; r < rows; ++r)
      scale_channels_math::ds_at(t.x.values.data(), t.dy.values.data(), got.ds.values.data(),
                                 c.p.HW, c.accumulate, r);
  if (c.want_dx)
    for (int64_t e = 0; e < n; ++e)
      scale_channels_math::dx_at(t.dy.values.data(), t.s.values.data(), got.dx.values.data(),
                                 c.p.HW, c.accumulate, e);
  test::expect_same_bits(got.y.values, want.y.values, "y");
  test::expect_same_bits(got.dx.values, want.dx.values, "dx");
  test::expect_same_bits(got.ds.values, want.ds.values, "ds");
}

INSTANTIATE_TEST_SUITE_P(Cases, ScaleChannelsHostMirror, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

class CudaScaleChannels : public ::testing::TestWithParam<ScaleCase> {};

TEST_P(CudaScaleChannels, EqualsTheCpuOp) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const ScaleCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_scale_channels_" + c.name()));
  Tensors t = inputs(c);
  const Outputs want = cpu_op(c, t);
  const Shape xs = c.p.x_shape(), ss = c.p.s_shape();
  const size_t xb = cuda::DeviceArena::align_up(xs.numel() * sizeof(float)),
               sb = cuda::DeviceArena::align_up(ss.numel() * sizeof(float));
  cuda::DeviceArena arena(4 * xb + 2 * sb, "scale_channels test");
  const TensorView x = arena.carve(xs), y = arena.carve(xs), dy = arena.carve(xs),
                   dx = arena.carve(xs), s = arena.carve(ss), ds = arena.carve(ss);
  cuda::copy_to_device(t.x.view(), x);
  cuda::copy_to_device(t.s.view(), s);
  cuda::copy_to_device(t.dy.view(), dy);
  cuda::copy_to_device(Buffer(xs, std::numeric_limits<float>::quiet_NaN()).view(), y);
  cuda::copy_to_device(t.dx_start.view(), dx);
  cuda::copy_to_device(t.ds_start.view(), ds);
  scale_channels_forward(c.p, {.x = x, .s = s, .y = y});
  scale_channels_backward(c.p, {.x = x,
                                .s = s,
                                .dy = dy,
                                .dx = c.want_dx ? dx : TensorView(),
                                .ds = c.want_ds ? ds : TensorView(),
                                .accumulate_dx = c.accumulate,
                                .accumulate_ds = c.accumulate});
  Outputs got{Buffer(xs), Buffer(xs), Buffer(ss)};
  cuda::copy_to_host(y, got.y.view());
  cuda::copy_to_host(dx, got.dx.view());
  cuda::copy_to_host(ds, got.ds.view());
  test::expect_same_bits(got.y.values, want.y.values, "y");
  test::expect_same_bits(got.dx.values, want.dx.values, "dx");
  test::expect_same_bits(got.ds.values, want.ds.values, "ds");
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaScaleChannels, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(ScaleChannelsDevices, TensorsOnTwoDevicesAreRefused) {
  const ScaleChannelsParams p{.B = 1, .N = 1, .C = 2, .HW = 3};
  std::vector<float> x(6), s(2), y(6);
  // A view that claims device memory (never dereferenced: the check comes first).
  const TensorView on_device(y.data(), p.x_shape(), Device::kCuda);
  test::expect_error_containing_all(
      [&] {
        scale_channels_forward(p, {.x = TensorView(x.data(), p.x_shape()),
                                   .s = TensorView(s.data(), p.s_shape()),
                                   .y = on_device});
      },
      {"scale_channels output", "CUDA device"});
}

}  // namespace
}  // namespace hfta
