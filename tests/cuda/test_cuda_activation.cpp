// The CUDA activations (fused_ops/cuda/activation.cpp): every kind (LeakyReLU with slopes 0.01
// and -0.2), forward and backward (written and accumulated), on sizes around the launch's
// 256-thread blocks and inputs that hit every kink and special value (0, -0, -3, 3, 6, just inside
// and outside them, +-inf, NaN), spread over [-8, 8].
//   ActivationHostMirror (runs without a GPU): activation_math.h over every element, as the
//     kernels run it, on NaN-filled outputs. ReLU, LeakyReLU, ReLU6, Hardswish and Hardsigmoid
//     equal the CPU op bit for bit (NaN as any NaN); tanh, sigmoid and GELU (oneDNN's polynomials
//     on the CPU) equal the reference within the per-element bound of libm_bound below, the
//     backward from the mirror's own y where it reads y.
//   CudaActivation (skipped without a GPU): the op on device tensors, the same comparisons.
#include <gtest/gtest.h>

#include <algorithm>
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
      {{.kind = ActivationKind::kHardsigmoid}, activation_math::kHardsigmoid},
      {{.kind = ActivationKind::kTanh}, activation_math::kTanh},
      {{.kind = ActivationKind::kSigmoid}, activation_math::kSigmoid},
      {{.kind = ActivationKind::kGelu}, activation_math::kGelu}};
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

// Whether the kind runs libm formulas (tanh, sigmoid, GELU) rather than the CPU's float
// operations.
bool uses_libm(const ActivationCase& c) {
  return c.p.kind == ActivationKind::kTanh || c.p.kind == ActivationKind::kSigmoid ||
         c.p.kind == ActivationKind::kGelu;
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

// Bounds for the libm kinds, in u = 2^-24 (one rounding's relative error), with every libm call
// (tanhf, expf, erfcf) within 4 ulp = 8u, device or host (CUDA documents 2, 2 and 4 ulp):
//   tanh y:     the call, and the reference's rounding: (8 + 1)u |y|.
//   sigmoid y:  e within 8u; 1 + e adds e/(1+e) 8u <= 4u and a rounding; the division a rounding:
//               1/(1+e) within 6u, e/(1+e) within 14u; the reference's rounding: 15u |y|.
//   GELU y:     z = v * float(1/sqrt 2) within 2u; erfc(t), t = -z, within 8u plus its argument's
//               error times |t d ln erfc(t)/dt| <= k(t) = t (t + sqrt(t^2 + 2)) for t > 0 (from
//               erfc(t) >= 2 exp(-t^2) / (sqrt(pi) (t + sqrt(t^2 + 2)))), <= 1 for t <= 0; the
//               product and the reference round: (8 + 2 k(t) + 2)u |y|.
//   tanh, sigmoid dx from y: fmaf rounds 1 - y^2 (y - y^2) once, the product and the reference
//               once each: 3u |dx|, from the same y.
//   GELU dx:    Phi within e_c = (8 + 2 k(t))u, phi(x) = c exp(-x*x/2) within
//               e_p = (8 + x^2/2 + 2)u (x*x rounds, which moves exp by x^2/2 u), the fma and the
//               product round: |dy| (Phi e_c + |x phi| e_p + 2u |Phi + x phi|), and the reference.
// The reference computes GELU's 1 + erf(z) in double, which cancels for x < -3: erf's error (an
// ulp of double, <= 2^-53) stays absolute, so the reference itself is off by up to
// 0.5 |x| 2^-53 (y) and 0.5 |dy| 2^-53 (dx): 2^-52 |x| and 2^-52 |dy| are added (at x = -7.5 that
// is 1e-3 of y, where the erfc form is within 1e-5).
// Accumulating adds the bound once more rounded on both sides: 2u |dx|. Subnormal results get
// 1e-37 (a few of the smallest normal float's ulp) absolute.
constexpr double kU = 1.0 / (1 << 24), kLibm = 8 * kU, kTiny = 1e-37, kRefErf = 0x1p-52;

double erfc_condition(double x) {  // k(t), t = -x / sqrt 2
  const double t = -x / std::sqrt(2.0);
  return t > 0.0 ? t * (t + std::sqrt(t * t + 2.0)) : 1.0;
}

double forward_bound(ActivationKind kind, double x, double y) {
  switch (kind) {
    case ActivationKind::kTanh:
      return (kLibm + kU) * std::fabs(y) + kTiny;
    case ActivationKind::kSigmoid:
      return (1.5 * kLibm + 3 * kU) * std::fabs(y) + kTiny;
    default:
      return (kLibm + 2 * erfc_condition(x) * kU + 2 * kU) * std::fabs(y) + kRefErf * std::fabs(x) +
             kTiny;
  }
}

double backward_bound(ActivationKind kind, double x, double g, double dy) {
  if (kind != ActivationKind::kGelu) return 3 * kU * std::fabs(g) + kTiny;
  const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
  const double xpdf = x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
  const double e_c = kLibm + 2 * erfc_condition(x) * kU, e_p = kLibm + (0.5 * x * x + 2) * kU;
  return std::fabs(dy) * (cdf * e_c + std::fabs(xpdf) * e_p + 2 * kU * std::fabs(cdf + xpdf)) +
         kU * std::fabs(g) + kRefErf * std::fabs(dy) + kTiny;
}

// got against want within bound[i]; NaN must meet NaN and an infinity the same infinity.
void expect_within(const std::vector<float>& got, const std::vector<float>& want,
                   const std::vector<double>& bound, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < want.size() && reported < 5; ++i) {
    const bool ok = std::isnan(want[i])   ? std::isnan(got[i])
                    : std::isinf(want[i]) ? got[i] == want[i]
                                          : std::fabs(double(got[i]) - want[i]) <= bound[i];
    if (ok) continue;
    ++reported;
    ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", expected " << want[i] << " within "
                  << bound[i];
  }
}

// Checks y and dx (what the mirror or the device computed) for the case: bit for bit against the
// CPU op, or, for the libm kinds, against the reference within the bounds above (dx from the
// reference's backward on the checked y where the kind reads y).
void expect_matches(const ActivationCase& c, Tensors& t, Buffer& y, const Buffer& dx) {
  const Shape shape{c.numel};
  if (!uses_libm(c)) {
    Tensors copy = t;
    Buffer y_want, dx_want;
    cpu_reference(c, copy, y_want, dx_want);
    test::expect_same_bits(y.values, y_want.values, "y");
    test::expect_same_bits(dx.values, dx_want.values, "dx");
    return;
  }
  Buffer y_want(shape, std::numeric_limits<float>::quiet_NaN()), dx_want = t.dx_start;
  Buffer g_want(shape, std::numeric_limits<float>::quiet_NaN());
  ref::activation_forward(c.p, {.x = t.x.view(), .y = y_want.view()});
  const bool from_y = c.p.backward_reads_output();
  const ActivationBackwardArgs args{.x = from_y ? TensorView() : t.x.view(),
                                    .y = from_y ? y.view() : TensorView(),
                                    .dy = t.dy.view()};
  ActivationBackwardArgs plain = args, accumulated = args;
  plain.dx = g_want.view();
  accumulated.dx = dx_want.view();
  accumulated.accumulate_dx = c.accumulate;
  ref::activation_backward(c.p, plain);
  ref::activation_backward(c.p, accumulated);
  std::vector<double> y_bound(y.values.size()), dx_bound(y.values.size());
  for (size_t i = 0; i < y_bound.size(); ++i) {
    const double x = t.x.values[i];
    y_bound[i] = forward_bound(c.p.kind, x, y_want.values[i]);
    dx_bound[i] = backward_bound(c.p.kind, x, g_want.values[i], t.dy.values[i]);
    if (c.accumulate) dx_bound[i] += 2 * kU * (std::fabs(dx_want.values[i]) + dx_bound[i]);
  }
  expect_within(y.values, y_want.values, y_bound, "y");
  expect_within(dx.values, dx_want.values, dx_bound, "dx");
}

class ActivationHostMirror : public ::testing::TestWithParam<ActivationCase> {};

TEST_P(ActivationHostMirror, EqualsTheCpuOpOrTheReference) {
  const ActivationCase& c = GetParam();
  const uint64_t seed = test::case_seed("cuda_activation_" + c.name());
  HFTA_CASE_TRACE(seed);
  Tensors t = inputs(c, seed);
  Buffer y(Shape{c.numel}, std::numeric_limits<float>::quiet_NaN()), dx = t.dx_start;
  for (int64_t i = 0; i < c.numel; ++i)
    activation_math::activation_forward_at(c.kernel_kind, c.p.negative_slope, t.x.values.data(),
                                           y.values.data(), i);
  const float* v = c.p.backward_reads_output() ? y.values.data() : t.x.values.data();
  for (int64_t i = 0; i < c.numel; ++i)
    activation_math::activation_backward_at(c.kernel_kind, c.p.negative_slope, v,
                                            t.dy.values.data(), dx.values.data(), c.accumulate, i);
  expect_matches(c, t, y, dx);
}

INSTANTIATE_TEST_SUITE_P(Cases, ActivationHostMirror, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

class CudaActivation : public ::testing::TestWithParam<ActivationCase> {};

TEST_P(CudaActivation, EqualsTheCpuOpOrTheReference) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const ActivationCase& c = GetParam();
  const uint64_t seed = test::case_seed("cuda_activation_" + c.name());
  HFTA_CASE_TRACE(seed);
  Tensors t = inputs(c, seed);
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
  expect_matches(c, t, y, dx);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaActivation, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

}  // namespace
}  // namespace hfta
