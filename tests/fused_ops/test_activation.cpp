// Fused activations on the op harness (tests/op_harness.h): the CPU kernel on B models equals the
// reference on each model alone, every kind (ReLU6, Hardswish, Hardsigmoid included), in both
// activation layouts, in place and not, dx written or accumulated; reference gradients equal finite
// differences; NaN propagates; bad shapes and slopes raise hfta::Error.
#include <algorithm>
#include <limits>

#include "fused_ops/activation.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::OpCase;
using test::Role;
using test::TensorSpec;

// Every kind, with LeakyReLU's slope positive (backward from y) and negative (from x); 0.2 is
// DCGAN's discriminator slope.
std::vector<ActivationParams> all_params() {
  return {{ActivationKind::kRelu},
          {ActivationKind::kLeakyRelu, 0.01f},
          {ActivationKind::kLeakyRelu, 0.2f},
          {ActivationKind::kLeakyRelu, 0.37f},
          {ActivationKind::kLeakyRelu, -0.25f},
          {ActivationKind::kGelu},
          {ActivationKind::kTanh},
          {ActivationKind::kSigmoid},
          {ActivationKind::kRelu6},
          {ActivationKind::kHardswish},
          {ActivationKind::kHardsigmoid}};
}

std::string describe(const ActivationParams& p) {
  return fmt::format("{} slope={}", activation_name(p.kind), p.negative_slope);
}

// Tolerance of the CPU kernel against the double reference, per element (the reference rounds
// once). ReLU/LeakyReLU/ReLU6 run the same float operations as the reference (compares, one
// multiply, each exactly rounded): bit-identical; so do Hardswish and Hardsigmoid, whose reference
// is PyTorch's float arithmetic (fused_ops/activation.h). Tanh and Sigmoid run oneDNN's JIT
// polynomials, measured at <= 1.2 and 4.2 ulp (forward) and <= 1.6 ulp (backward) on [-12, 12]; we
// allow 16 ulp plus 2e-7 absolute near zero. GELU uses oneDNN's erf approximation, whose error is
// absolute: measured <= 3.7e-7 (forward) and 2.6e-7 (backward) on [-12, 12]; we allow 1e-6.
double atol_for(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::kRelu:
    case ActivationKind::kLeakyRelu:
    case ActivationKind::kRelu6:
    case ActivationKind::kHardswish:
    case ActivationKind::kHardsigmoid:
      return 0.0;
    case ActivationKind::kGelu:
      return 1e-6;
    default:
      return 2e-7;
  }
}
double rtol_for(ActivationKind kind) {
  return atol_for(kind) == 0.0 ? 0.0 : 16 * std::ldexp(1.0, -24);
}
// On the GPU, tanh, sigmoid and GELU are libm formulas (fused_ops/cuda/activation_math.h, bounds
// derived in tests/cuda/test_cuda_activation.cpp): y within 15u relative (u = 2^-24) for x in
// [-5, 5], inside rtol_for's 16u. dx is compared with the reference's dx from the reference's y,
// while the device's backward reads its own y: tanh's 1 - y^2 moves by 2 |y| dy_err <= 2 * 9u
// and sigmoid's y (1 - y) by |1 - 2y| 15u, absolute, times |dy| <= 1, on top of 3u |dx|; GELU's
// dx (from x) within about 8u Phi + 15u |x phi| + 3u <= 20u. So 20u (1.2e-6) absolute for the
// three, where the CPU's measured polynomials need 2e-7 (tanh, sigmoid) and 1e-6 (GELU).
double device_atol_for(ActivationKind kind) {
  const double cpu = atol_for(kind);
  return cpu == 0.0 ? 0.0 : std::max(cpu, 20 * std::ldexp(1.0, -24));
}

// One of the two canonical activation layouts: model b's single-model tensor is [N, F] in the
// linear layout ([B, N, F] fused) and [N, C, HW] in the conv layout ([N, B*C, HW] fused).
struct ActP {
  int64_t B = 1;
  ActivationParams act;
  bool conv = false;
  int64_t N = 1, C = 1, HW = 1;  // linear: F = C * HW
  bool in_place = false;         // the fast path runs in place (y over x where allowed, dx over dy)
  bool fd = false;               // inputs kept off the kinks (finite differences)
  Shape shape() const { return conv ? Shape{N, B * C, HW} : Shape{B, N, C * HW}; }
};

struct ActivationOp {
  using Params = ActP;
  static std::string describe(const ActP& q) {
    return fmt::format("{} conv={} N={} C={} HW={} in_place={}", hfta::describe(q.act), q.conv, q.N,
                       q.C, q.HW, q.in_place);
  }
  static std::vector<TensorSpec> tensors(const ActP& q, const OpCase<ActP>& c) {
    const bool relu6 = q.act.kind == ActivationKind::kRelu6;
    TensorSpec x{
        .name = "x",
        .shape = q.shape(),
        .layout = q.conv ? test::Layout::kChannels : test::Layout::kModelMajor,
        .atol = c.device == Device::kCuda ? device_atol_for(q.act.kind) : atol_for(q.act.kind),
        .rtol = rtol_for(q.act.kind),
        .lo = relu6  ? -3.0f
              : q.fd ? -3.0f
                     : -5.0f,
        .hi = relu6  ? 9.0f
              : q.fd ? 3.0f
                     : 5.0f,
        .channels = q.C};
    if (q.fd)  // off the kinks at 0, +-3 (and 6), where a finite difference straddles two slopes
      x.adjust = [](std::vector<float>& v) {
        for (float& e : v) {
          if (std::fabs(e) < 0.1f) e = e < 0.0f ? -0.1f : 0.1f;
          if (std::fabs(e - 6.0f) < 0.1f) e = e < 6.0f ? 5.9f : 6.1f;
          if (std::fabs(std::fabs(e) - 3.0f) < 0.1f) e = e < 0.0f ? -2.9f : 2.9f;
        }
      };
    else  // exact zeros, negative zeros, ReLU6's 6 and the hard activations' +-3 at the kinks
      x.adjust = [](std::vector<float>& v) {
        for (size_t i = 0; i < v.size(); i += 7) v[i] = 0.0f;
        for (size_t i = 3; i < v.size(); i += 11) v[i] = -0.0f;
        for (size_t i = 5; i < v.size(); i += 13) v[i] = 6.0f;
        for (size_t i = 2; i < v.size(); i += 17) v[i] = 3.0f;
        for (size_t i = 4; i < v.size(); i += 19) v[i] = -3.0f;
      };
    TensorSpec dy = x, y = x, dx = x;
    dy.name = "dy", dy.lo = -1.0f, dy.hi = 1.0f, dy.adjust = nullptr;
    y.name = "y", y.role = Role::kOutput;
    dx.name = "dx", dx.role = Role::kInputGrad;
    return {x, dy, y, dx};
  }
  static void run(const ActP& q, const test::Views& v, const test::RunContext& ctx) {
    const ActivationParams& p = q.act;
    const TensorView x = v("x"), y = v("y"), dy = v("dy"), dx = v("dx");
    if (ctx.ref) {
      ref::activation_forward(p, {.x = x, .y = y});
      if (!ctx.forward_only)
        ref::activation_backward(
            p, {.x = x, .y = y, .dy = dy, .dx = dx, .accumulate_dx = ctx.accumulate_dx});
      return;
    }
    if (!q.in_place) {
      activation_forward(p, {.x = x, .y = y});
      activation_backward(p,
                          {.x = x, .y = y, .dy = dy, .dx = dx, .accumulate_dx = ctx.accumulate_dx});
      return;
    }
    // In place: y over a copy of x where backward reads y (x then is gone: backward gets only
    // y); dx over a copy of dy. The copies leave x and dy intact for the reference.
    const bool from_y = p.backward_reads_output();
    if (from_y) {
      test::copy_values(x, y);
      activation_forward(p, {.x = y, .y = y});
    } else {
      activation_forward(p, {.x = x, .y = y});
    }
    test::copy_values(dy, dx);
    activation_backward(
        p, {.x = from_y ? TensorView() : x, .y = from_y ? y : TensorView(), .dy = dx, .dx = dx});
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() { return {{"x", "dx"}}; }
  // eps = 1e-2: truncation error eps^2 |f'''| / 6 <= 2e-5 (|f'''| <= 1 for gelu/tanh/sigmoid, 0
  // for the piecewise-linear ones off their kinks); rounding: y is float, so each difference
  // quotient carries about 2 * 2^-24 * |y| / (2 eps) <= 4e-5 at |y| <= 6.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 1e-4, 1e-4}; }
};

// Every kind in both layouts; sizes around the 16-float vectors and the CPU kernel's 16K-element
// chunks (at B = 1 and B = 8), B in {1, 2, 3, 8}, 1 to 3 threads; in place on the fast path (dx
// over dy is not allowed with accumulate_dx).
std::vector<OpCase<ActP>> activation_cases() {
  struct Size {
    bool conv;
    int64_t N, C, HW;
    bool fd = false;
  };
  const Size sizes[] = {
      {false, 1, 1, 1},     {false, 5, 7, 3},    {false, 1, 17, 1}, {false, 1, 16383, 1},
      {false, 1, 16385, 1}, {false, 33, 65, 17},  // > one 16K-element chunk at B = 8
      {true, 3, 5, 7},      {true, 2, 3, 1},     {true, 4, 6, 169}, {false, 2, 3, 5, true},
  };
  std::vector<OpCase<ActP>> cases;
  int k = 0;
  for (const ActivationParams& p : all_params())
    for (const Size& s : sizes)
      for (int64_t B : test::model_counts())
        for (bool in_place : {false, true}) {
          if (s.fd && (B > 1 || in_place)) continue;
          if (s.C > 10000 && B == 3) continue;
          OpCase<ActP> c;
          c.p = ActP{.act = p, .conv = s.conv, .N = s.N, .C = s.C, .HW = s.HW};
          c.p.in_place = in_place, c.p.fd = s.fd;
          c.B = B;
          c.threads = 1 + (k++ % 3);
          c.accumulate_dx = !in_place && (s.N + s.C + B) % 2 == 1;
          c.fd = s.fd;
          const std::string slope = p.kind == ActivationKind::kLeakyRelu
                                        ? fmt::format("{}{}", p.negative_slope < 0 ? "m" : "",
                                                      int(std::fabs(p.negative_slope) * 100))
                                        : "";
          c.name = fmt::format("{}{}_{}_N{}_C{}_HW{}_B{}_t{}{}{}{}", activation_name(p.kind), slope,
                               s.conv ? "conv" : "linear", s.N, s.C, s.HW, B, c.threads,
                               in_place ? "_inplace" : "", c.accumulate_dx ? "_acc" : "",
                               c.fd ? "_fd" : "");
          cases.push_back(c);
        }
  return cases;
}

class ActivationHarness : public ::testing::TestWithParam<OpCase<ActP>> {};
TEST_P(ActivationHarness, FusedEqualsSerial) { test::run_case<ActivationOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, ActivationHarness, ::testing::ValuesIn(activation_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one), every kind.
INSTANTIATE_TEST_SUITE_P(OnCuda, ActivationHarness,
                         ::testing::ValuesIn(test::device_cases<ActivationOp>(activation_cases(),
                                                                              Device::kCuda)),
                         test::CaseName());

// Inputs in [-5, 5] plus exact zeros and values right at the kinks.
Buffer activation_input(Shape s, RngStream& rng) {
  Buffer x = test::random_buffer(s, rng, -5.0f, 5.0f);
  for (int64_t i = 0; i < x.numel(); i += 7) x.values[i] = 0.0f;
  for (int64_t i = 3; i < x.numel(); i += 11) x.values[i] = -0.0f;
  for (int64_t i = 5; i < x.numel(); i += 13) x.values[i] = 6.0f;
  return x;
}

TEST(Activation, ReferenceInPlaceEqualsOutOfPlace) {
  uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 2);
  for (const auto& p : all_params()) {
    SCOPED_TRACE(describe(p));
    Buffer x = activation_input(Shape{3, 4, 5}, rng), dy = test::random_buffer(x.shape, rng);
    Buffer y(x.shape), dx(x.shape), x_inplace = x, dy_inplace = dy;
    ref::activation_forward(p, {.x = x.view(), .y = y.view()});
    ref::activation_backward(p, {.x = x.view(), .y = y.view(), .dy = dy.view(), .dx = dx.view()});
    ref::activation_forward(p, {.x = x_inplace.view(), .y = x_inplace.view()});
    if (p.backward_reads_output()) {
      ref::activation_backward(p, {.x = TensorView(),
                                   .y = x_inplace.view(),
                                   .dy = dy_inplace.view(),
                                   .dx = dy_inplace.view()});
      expect_close(x_inplace, y, 0.0, 0.0, "in-place forward");
      expect_close(dy_inplace, dx, 0.0, 0.0, "in-place backward");
    }
  }
}

TEST(Activation, NanPropagates) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto& p : all_params()) {
    SCOPED_TRACE(describe(p));
    Buffer x(Shape{2, 20}, 0.5f), y(x.shape);
    x.values[3] = nan;
    x.values[37] = nan;  // in the vector body and in the tail of the oneDNN kernels
    activation_forward(p, {.x = x.view(), .y = y.view()});
    for (int64_t i = 0; i < x.numel(); ++i)
      EXPECT_EQ(std::isnan(y.values[i]), std::isnan(x.values[i])) << "element " << i;
    Buffer ref_y(x.shape);
    ref::activation_forward(p, {.x = x.view(), .y = ref_y.view()});
    EXPECT_TRUE(std::isnan(ref_y.values[3]));
  }
}

TEST(Activation, BadInputsRaiseClearErrors) {
  Buffer x(Shape{2, 3, 4}), y(Shape{2, 3, 4}), wrong(Shape{2, 4, 3});
  ActivationParams relu{ActivationKind::kRelu};
  try {
    activation_forward(relu, {.x = x.view(), .y = wrong.view()});
    FAIL() << "expected hfta::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("relu output has shape [2, 4, 3], expected [2, 3, 4]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(activation_forward(relu, {.x = x.view(), .y = TensorView()}), Error);
  EXPECT_THROW(activation_forward(relu, {.x = TensorView(), .y = y.view()}), Error);
  // GELU's backward reads x: an empty x (e.g. after an in-place forward) is refused.
  ActivationParams gelu{ActivationKind::kGelu};
  try {
    activation_backward(gelu, {.x = TensorView(), .y = y.view(), .dy = y.view(), .dx = x.view()});
    FAIL() << "expected hfta::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gelu input (its backward reads the input"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(
      activation_backward(relu, {.x = x.view(), .y = TensorView(), .dy = y.view(), .dx = x.view()}),
      Error);
  EXPECT_THROW(
      activation_backward(relu, {.x = x.view(), .y = y.view(), .dy = y.view(), .dx = wrong.view()}),
      Error);
  ActivationParams bad_slope{ActivationKind::kLeakyRelu, std::numeric_limits<float>::infinity()};
  EXPECT_THROW(activation_forward(bad_slope, {.x = x.view(), .y = y.view()}), Error);
}

}  // namespace
}  // namespace hfta
