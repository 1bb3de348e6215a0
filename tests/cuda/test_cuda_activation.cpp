// The CUDA activations (fused_ops/cuda/activation.cpp): ReLU, LeakyReLU (slopes 0.01 and -0.2),
// ReLU6, Hardswish and Hardsigmoid, forward and backward (written and accumulated), on sizes
// around the launch's 256-thread blocks and inputs that hit every kink and special value (0, -0,
// -3, 3, 6, just inside and outside them, +-inf, NaN), spread over [-8, 8].
//   ActivationHostMirror (runs without a GPU): activation_math.h over every element, as the
//     kernels run it, equals the CPU op bit for bit (NaN as any NaN), on NaN-filled outputs.
//   CudaActivation (skipped without a GPU): the op on device tensors equals the CPU op bit for
//     bit; GELU, tanh and sigmoid raise on the device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "fused_ops/activation.h"
#include "fused_ops/cuda/activation_math.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
using test::random_buffer;

struct ActivationCase {
  ActivationParams p;
  int kernel_kind;  // activation_math::Kind
  int64_t numel;
  bool accumulate;
  std::string name() const {
    return fmt::format(
        "{}{}_n{}{}", activation_name(p.kind),
        p.kind == ActivationKind::kLeakyRelu ? (p.negative_slope < 0 ? "_negslope" : "_slope") : "",
        numel, accumulate ? "_acc" : "");
  }
};

void PrintTo(const ActivationCase& c, std::ostream* os) { *os << c.name(); }

std::vector<ActivationCase> cases() {
  const struct {
    ActivationParams p;
    int kind;
  } kinds[] = {
      {{.kind = ActivationKind::kRelu}, activation_math::kRelu},
      {{.kind = ActivationKind::kLeakyRelu, .negative_slope = 0.01f}, activation_math::kLeakyRelu},
      {{.kind = ActivationKind::kLeakyRelu, .negative_slope = -0.2f}, activation_math::kLeakyRelu},
      {{.kind = ActivationKind::kRelu6}, activation_math::kRelu6},
      {{.kind = ActivationKind::kHardswish}, activation_math::kHardswish},
      {{.kind = ActivationKind::kHardsigmoid}, activation_math::kHardsigmoid}};
  std::vector<ActivationCase> out;
  for (const auto& k : kinds)
    for (int64_t n : {1, 33, 255, 256, 257, 4099})
      for (bool accumulate : {false, true}) out.push_back({k.p, k.kind, n, accumulate});
  return out;
}

struct Tensors {
  Buffer x, dy, dx_start;
};

Tensors inputs(const ActivationCase& c, uint64_t seed) {
  RngStream rng(seed, 0);
  const Shape shape{c.numel};
  const float inf = std::numeric_limits<float>::infinity(),
              nan = std::numeric_limits<float>::quiet_NaN();
  Tensors t{random_buffer(shape, rng, -8.0f, 8.0f), random_buffer(shape, rng),
            c.accumulate ? random_buffer(shape, rng) : Buffer(shape, nan)};
  const float special[] = {0.0f,
                           -0.0f,
                           -3.0f,
                           3.0f,
                           6.0f,
                           std::nextafter(6.0f, 0.0f),
                           std::nextafter(3.0f, 0.0f),
                           std::nextafter(-3.0f, 0.0f),
                           -1.5f,
                           inf,
                           -inf,
                           nan,
                           1e-30f,
                           -1e-30f};
  for (size_t k = 0; k < std::size(special) && static_cast<int64_t>(k) < c.numel; ++k)
    t.x.values[static_cast<size_t>(c.numel - 1 - static_cast<int64_t>(k))] = special[k];
  if (c.numel > 3) t.dy.values[1] = inf;  // a gradient the kinks must select away, not multiply
  return t;
}

// The CPU op's y and dx for the case.
void cpu_reference(const ActivationCase& c, Tensors& t, Buffer& y, Buffer& dx) {
  const Shape shape{c.numel};
  y = Buffer(shape, std::numeric_limits<float>::quiet_NaN());
  dx = t.dx_start;
  activation_forward(c.p, {.x = t.x.view(), .y = y.view()});
  activation_backward(c.p, {.x = t.x.view(),
                            .y = y.view(),
                            .dy = t.dy.view(),
                            .dx = dx.view(),
                            .accumulate_dx = c.accumulate});
}

class ActivationHostMirror : public ::testing::TestWithParam<ActivationCase> {};

TEST_P(ActivationHostMirror, EqualsTheCpuOp) {
  const ActivationCase& c = GetParam();
  const uint64_t seed = test::case_seed("cuda_activation_" + c.name());
  HFTA_CASE_TRACE(seed);
  Tensors t = inputs(c, seed);
  Buffer y_want, dx_want;
  cpu_reference(c, t, y_want, dx_want);
  Buffer y(Shape{c.numel}, std::numeric_limits<float>::quiet_NaN()), dx = t.dx_start;
  for (int64_t i = 0; i < c.numel; ++i)
    activation_math::activation_forward_at(c.kernel_kind, c.p.negative_slope, t.x.values.data(),
                                           y.values.data(), i);
  const float* v = c.p.backward_reads_output() ? y.values.data() : t.x.values.data();
  for (int64_t i = 0; i < c.numel; ++i)
    activation_math::activation_backward_at(c.kernel_kind, c.p.negative_slope, v,
                                            t.dy.values.data(), dx.values.data(), c.accumulate, i);
  test::expect_same_bits(y.values, y_want.values, "y");
  test::expect_same_bits(dx.values, dx_want.values, "dx");
}

INSTANTIATE_TEST_SUITE_P(Cases, ActivationHostMirror, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

class CudaActivation : public ::testing::TestWithParam<ActivationCase> {};

TEST_P(CudaActivation, EqualsTheCpuOp) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const ActivationCase& c = GetParam();
  const uint64_t seed = test::case_seed("cuda_activation_" + c.name());
  HFTA_CASE_TRACE(seed);
  Tensors t = inputs(c, seed);
  Buffer y_want, dx_want;
  cpu_reference(c, t, y_want, dx_want);
  const Shape shape{c.numel};
  cuda::DeviceArena arena(4 * cuda::DeviceArena::align_up(c.numel * sizeof(float)), "activation");
  const TensorView x_dev = arena.carve(shape), y_dev = arena.carve(shape),
                   dy_dev = arena.carve(shape), dx_dev = arena.carve(shape);
  cuda::copy_to_device(t.x.view(), x_dev);
  cuda::copy_to_device(Buffer(shape, std::numeric_limits<float>::quiet_NaN()).view(), y_dev);
  cuda::copy_to_device(t.dy.view(), dy_dev);
  cuda::copy_to_device(t.dx_start.view(), dx_dev);
  activation_forward(c.p, {.x = x_dev, .y = y_dev});
  activation_backward(
      c.p, {.x = x_dev, .y = y_dev, .dy = dy_dev, .dx = dx_dev, .accumulate_dx = c.accumulate});
  Buffer y(shape), dx(shape);
  cuda::copy_to_host(y_dev, y.view());
  cuda::copy_to_host(dx_dev, dx.view());
  test::expect_same_bits(y.values, y_want.values, "y");
  test::expect_same_bits(dx.values, dx_want.values, "dx");
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaActivation, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(CudaActivationKinds, KindsWithoutAKernelRaise) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  cuda::DeviceArena arena(1024, "gelu test");
  const TensorView x = arena.carve(Shape{4}), y = arena.carve(Shape{4});
  for (ActivationKind kind :
       {ActivationKind::kGelu, ActivationKind::kTanh, ActivationKind::kSigmoid})
    test::expect_error_containing_all([&] { activation_forward({.kind = kind}, {.x = x, .y = y}); },
                                      {"no CUDA kernel", activation_name(kind)});
}

}  // namespace
}  // namespace hfta
