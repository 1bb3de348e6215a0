// Device dispatch (fused_ops/dispatch.h), with or without the CUDA backend and with no GPU
// needed: one call's tensors must share a device, and CUDA tensors meet a clear hfta::Error where
// they cannot run (a build without the backend, an op without a CUDA kernel, no device).
#include <gtest/gtest.h>

#include <vector>

#include "fused_ops/add.h"
#include "fused_ops/conv2d.h"
#include "fused_ops/dispatch.h"
#include "fused_ops/linear.h"
#include "fused_ops/repeat_points.h"
#include "test_util.h"

#if HFTA_WITH_CUDA
#include "backend/cuda/runtime.h"
#endif

namespace hfta {
namespace {

const LinearParams kParams{.B = 2, .N = 2, .in_features = 3, .out_features = 2, .bias = false};

struct LinearTensors {
  std::vector<float> x = std::vector<float>(12), w = std::vector<float>(12),
                     y = std::vector<float>(8);
  LinearForwardArgs args(Device x_device, Device w_device) {
    return {.x = TensorView(x.data(), kParams.x_shape(), x_device),
            .weight = TensorView(w.data(), kParams.weight_shape(), w_device),
            .y = TensorView(y.data(), kParams.y_shape(), x_device)};
  }
};

TEST(DeviceDispatch, TensorsOfOneCallShareADevice) {
  LinearTensors t;
  test::expect_error_containing_all(
      [&] { linear_forward(kParams, t.args(Device::kCuda, Device::kCpu)); },
      {"linear weight is on the CPU", "runs on the CUDA device"});
  test::expect_error_containing_all(
      [&] { linear_forward(kParams, t.args(Device::kCpu, Device::kCuda)); },
      {"linear weight is on the CUDA device", "runs on the CPU"});
}

// conv2d checks every tensor's device too, forward and backward (CUDA kernel or not).
TEST(DeviceDispatch, Conv2dTensorsOfOneCallShareADevice) {
  const Conv2dParams p{.B = 2, .in_channels = 1, .out_channels = 2, .H = 3, .W = 3, .bias = true};
  std::vector<float> x(18), w(4), b(4), y(36);
  const TensorView xc(x.data(), p.x_shape(), Device::kCuda), xh(x.data(), p.x_shape());
  const TensorView wc(w.data(), p.weight_shape(), Device::kCuda), wh(w.data(), p.weight_shape());
  const TensorView bh(b.data(), p.bias_shape()), yh(y.data(), p.y_shape());
  const TensorView yc(y.data(), p.y_shape(), Device::kCuda);
  test::expect_error_containing_all(
      [&] { conv2d_forward(p, {.x = xc, .weight = wh, .bias = bh, .y = yc}); },
      {"conv2d weight is on the CPU", "runs on the CUDA device"});
  test::expect_error_containing_all(
      [&] { conv2d_forward(p, {.x = xh, .weight = wh, .bias = bh, .y = yc}); },
      {"conv2d output is on the CUDA device", "runs on the CPU"});
  test::expect_error_containing_all([&] { conv2d_backward(p, {.x = xh, .weight = wc, .dy = yh}); },
                                    {"conv2d weight is on the CUDA device", "runs on the CPU"});
  test::expect_error_containing_all(
      [&] {
        conv2d_backward(p, {.x = xh,
                            .weight = wh,
                            .dy = yh,
                            .dbias = TensorView(b.data(), p.bias_shape(), Device::kCuda)});
      },
      {"conv2d bias gradient is on the CUDA device", "runs on the CPU"});
}

// Host memory labelled as CUDA memory: every path below must raise before touching it.
TEST(DeviceDispatch, CudaTensorsRaiseWhereTheyCannotRun) {
  LinearTensors t;
#if HFTA_WITH_CUDA
  if (cuda::device_available()) GTEST_SKIP() << "a CUDA device is present: tests/cuda/ run";
  test::expect_error_containing(
      [&] { linear_forward(kParams, t.args(Device::kCuda, Device::kCuda)); }, "no CUDA device");
#else
  test::expect_error_containing_all(
      [&] { linear_forward(kParams, t.args(Device::kCuda, Device::kCuda)); },
      {"linear_forward got CUDA tensors", "no CUDA backend", "-DHFTA_CUDA=ON"});
#endif
}

// A CUDA build's message for an op without a CUDA kernel, from the dispatcher's own helper (the
// ops this test used, repeat_points among them, have kernels now); a CPU-only build says it has
// no CUDA backend.
TEST(DeviceDispatch, OpWithoutACudaKernelRaises) {
#if HFTA_WITH_CUDA
  test::expect_error_containing_all([&] { unsupported_device("some_op_forward", Device::kCuda); },
                                    {"some_op_forward has no CUDA kernel yet", "docs/cuda.md"});
#else
  const RepeatPointsParams p{};
  std::vector<float> x(1), y(1);
  const RepeatPointsForwardArgs args{.x = TensorView(x.data(), p.x_shape(), Device::kCuda),
                                     .y = TensorView(y.data(), p.y_shape(), Device::kCuda)};
  test::expect_error_containing_all([&] { repeat_points_forward(p, args); },
                                    {"repeat_points_forward got CUDA tensors", "no CUDA backend"});
#endif
}

// add has a CUDA kernel: without a device it raises before touching the (host) memory; a
// CPU-only build says it has no CUDA backend. Its operands must share a device.
TEST(DeviceDispatch, AddReachesItsCudaKernel) {
  std::vector<float> a(4), b(4), y(4);
  const Shape shape{4};
  const AddForwardArgs args{.a = TensorView(a.data(), shape, Device::kCuda),
                            .b = TensorView(b.data(), shape, Device::kCuda),
                            .y = TensorView(y.data(), shape, Device::kCuda)};
  test::expect_error_containing_all(
      [&] { add_forward({.a = args.a, .b = TensorView(b.data(), shape), .y = args.y}); },
      {"add second operand is on the CPU", "runs on the CUDA device"});
#if HFTA_WITH_CUDA
  if (cuda::device_available()) GTEST_SKIP() << "a CUDA device is present: tests/cuda/ run";
  test::expect_error_containing([&] { add_forward(args); }, "no CUDA device");
#else
  test::expect_error_containing_all([&] { add_forward(args); },
                                    {"add_forward got CUDA tensors", "no CUDA backend"});
#endif
}

}  // namespace
}  // namespace hfta
