// The CUDA flatten (fused_ops/cuda/flatten.cpp). FlattenHostMirror (runs without a GPU):
// flatten_math.h's index map driven over every output element as the kernels drive it, on
// NaN-filled outputs, equals the CPU op bit for bit, forward and backward (written and
// accumulated), and visits every input element exactly once. CudaFlatten (skipped without a GPU):
// the op through the dispatcher on device tensors, bit for bit the CPU op.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/flatten_math.h"
#include "fused_ops/flatten.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
using test::random_buffer;

struct FlattenCase {
  FlattenParams p;
  bool accumulate;
  std::string name() const {
    return fmt::format("B{}_N{}_C{}_{}x{}{}", p.B, p.N, p.C, p.H, p.W, accumulate ? "_acc" : "");
  }
};

void PrintTo(const FlattenCase& c, std::ostream* os) { *os << c.name(); }

std::vector<FlattenCase> cases() {
  // Features per sample F = C*H*W below, at and past the 256-thread blocks; B = 1 (a plain copy)
  // to 8; accumulate on and off.
  const struct {
    int64_t N, C, H, W;
  } shapes[] = {{1, 1, 1, 1}, {3, 2, 4, 4}, {2, 64, 2, 2}, {2, 3, 9, 10}, {4, 16, 7, 7}};
  std::vector<FlattenCase> out;
  int k = 0;
  for (const auto& s : shapes)
    for (int64_t B : {1, 2, 3, 8})
      out.push_back({{.B = B, .N = s.N, .C = s.C, .H = s.H, .W = s.W}, (k++ % 2) == 1});
  return out;
}

bool same_bits(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

struct Tensors {
  Buffer x, y, dy, dx;
};

Tensors inputs(const FlattenCase& c) {
  RngStream rng(test::case_seed("cuda_flatten_" + c.name()), 0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensors t;
  t.x = random_buffer(c.p.x_shape(), rng);
  t.y = Buffer(c.p.y_shape(), nan);
  t.dy = random_buffer(c.p.y_shape(), rng);
  t.dx = c.accumulate ? random_buffer(c.p.x_shape(), rng) : Buffer(c.p.x_shape(), nan);
  return t;
}

void expect_equal(const Buffer& got, const Buffer& want, const char* what) {
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_TRUE(same_bits(got.values[i], want.values[i]))
        << what << "[" << i << "] = " << got.values[i] << ", expected " << want.values[i];
}

// The case's inputs with the CPU op's y and dx.
Tensors cpu_result(const FlattenCase& c) {
  Tensors t = inputs(c);
  flatten_forward(c.p, {.x = t.x.view(), .y = t.y.view()});
  flatten_backward(c.p, {.dy = t.dy.view(), .dx = t.dx.view(), .accumulate_dx = c.accumulate});
  return t;
}

class FlattenOnDevice : public ::testing::TestWithParam<FlattenCase> {};

TEST_P(FlattenOnDevice, HostMirrorEqualsTheCpuOp) {
  const FlattenCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_flatten_" + c.name()));
  Tensors want = cpu_result(c), got = inputs(c);
  const int64_t B = c.p.B, N = c.p.N, F = c.p.features();
  std::vector<int> hits(static_cast<size_t>(got.x.numel()), 0);
  for (int64_t i = 0; i < B * N * F; ++i) {
    const int64_t j = flatten_math::x_index(i, B, N, F);
    ASSERT_GE(j, 0);
    ASSERT_LT(j, got.x.numel());
    ++hits[static_cast<size_t>(j)];
    got.y.values[i] = got.x.values[j];
    got.dx.values[j] = flatten_math::input_grad(c.accumulate ? got.dx.values[j] : 0.0f,
                                                got.dy.values[i], c.accumulate);
  }
  for (int h : hits) ASSERT_EQ(h, 1) << "the index map is not a permutation";
  expect_equal(got.y, want.y, "y");
  expect_equal(got.dx, want.dx, "dx");
}

TEST_P(FlattenOnDevice, DeviceEqualsTheCpuOp) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const FlattenCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_flatten_" + c.name()));
  Tensors want = cpu_result(c), got = inputs(c);
  const int64_t x_bytes = cuda::DeviceArena::align_up(got.x.numel() * sizeof(float));
  const int64_t y_bytes = cuda::DeviceArena::align_up(got.y.numel() * sizeof(float));
  cuda::DeviceArena arena(2 * x_bytes + 2 * y_bytes, "flatten test");
  const TensorView x = arena.carve(c.p.x_shape()), y = arena.carve(c.p.y_shape()),
                   dy = arena.carve(c.p.y_shape()), dx = arena.carve(c.p.x_shape());
  cuda::copy_to_device(got.x.view(), x);
  cuda::copy_to_device(got.y.view(), y);
  cuda::copy_to_device(got.dy.view(), dy);
  cuda::copy_to_device(got.dx.view(), dx);
  flatten_forward(c.p, {.x = x, .y = y});
  flatten_backward(c.p, {.dy = dy, .dx = dx, .accumulate_dx = c.accumulate});
  cuda::copy_to_host(y, got.y.view());
  cuda::copy_to_host(dx, got.dx.view());
  expect_equal(got.y, want.y, "y");
  expect_equal(got.dx, want.dx, "dx");
}

INSTANTIATE_TEST_SUITE_P(Cases, FlattenOnDevice, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(FlattenDevices, TensorsOnTwoDevicesRaise) {
  const FlattenParams p{.B = 2, .N = 1, .C = 1, .H = 1, .W = 1};
  std::vector<float> x(2), y(2);
  test::expect_error_containing_all(
      [&] {
        flatten_forward(p, {.x = TensorView(x.data(), p.x_shape()),
                            .y = TensorView(y.data(), p.y_shape(), Device::kCuda)});
      },
      {"flatten output is on the CUDA device", "runs on the CPU"});
  test::expect_error_containing_all(
      [&] {
        flatten_backward(p, {.dy = TensorView(y.data(), p.y_shape(), Device::kCuda),
                             .dx = TensorView(x.data(), p.x_shape())});
      },
      {"flatten input gradient is on the CPU", "runs on the CUDA device"});
}

}  // namespace
}  // namespace hfta
