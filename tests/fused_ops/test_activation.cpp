// Fused activations: the CPU kernel on B models equals the reference on each model alone, in
// both activation layouts, in place and not; reference gradients equal finite differences; NaN
// propagates; bad shapes and slopes raise hfta::Error.
#include <limits>

#include "fused_ops/activation.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;

// Every kind, with LeakyReLU's slope positive (backward from y) and negative (from x).
std::vector<ActivationParams> all_params() {
  return {{ActivationKind::kRelu},
          {ActivationKind::kLeakyRelu, 0.01f},
          {ActivationKind::kLeakyRelu, 0.37f},
          {ActivationKind::kLeakyRelu, -0.25f},
          {ActivationKind::kGelu},
          {ActivationKind::kTanh},
          {ActivationKind::kSigmoid}};
}

std::string describe(const ActivationParams& p) {
  return fmt::format("{} slope={}", activation_name(p.kind), p.negative_slope);
}

// Tolerance of the CPU kernel against the double reference, per element (the reference rounds
// once). ReLU/LeakyReLU run the same float operations as the reference (one compare, one
// multiply, each exactly rounded): bit-identical. Tanh and Sigmoid run oneDNN's JIT polynomials,
// measured at <= 1.2 and 4.2 ulp (forward) and <= 1.6 ulp (backward) on [-12, 12]; we allow 16 ulp
// plus 2e-7 absolute near zero. GELU uses oneDNN's erf approximation, whose error is absolute:
// measured <= 3.7e-7 (forward) and 2.6e-7 (backward) on [-12, 12]; we allow 1e-6.
double atol_for(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::kRelu:
    case ActivationKind::kLeakyRelu:
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

// The two canonical activation layouts. Model b's single-model tensor is [N, F] in the linear
// layout and [N, C, HW] in the conv layout.
struct Layout {
  bool conv;
  int64_t N, C, HW;  // linear: F = C * HW
  Shape fused(int64_t B) const { return conv ? Shape{N, B * C, HW} : Shape{B, N, C * HW}; }
  Shape single() const { return conv ? Shape{N, C, HW} : Shape{N, C * HW}; }
  // Index in the fused tensor of element i of model b's single-model tensor.
  int64_t fused_index(int64_t B, int64_t b, int64_t i) const {
    if (!conv) return b * N * C * HW + i;
    int64_t n = i / (C * HW), rest = i % (C * HW);
    return (n * B + b) * C * HW + rest;
  }
  Buffer gather(const Buffer& fused_buf, int64_t B, int64_t b) const {
    Buffer out(single());
    for (int64_t i = 0; i < out.numel(); ++i)
      out.values[i] = fused_buf.values[fused_index(B, b, i)];
    return out;
  }
};

// Inputs in [-5, 5] plus exact zeros and values right at the kinks.
Buffer activation_input(Shape s, RngStream& rng) {
  Buffer x = test::random_buffer(s, rng, -5.0f, 5.0f);
  for (int64_t i = 0; i < x.numel(); i += 7) x.values[i] = 0.0f;
  for (int64_t i = 3; i < x.numel(); i += 11) x.values[i] = -0.0f;
  return x;
}

void check_fused_equals_serial(const ActivationParams& p, int64_t B, const Layout& layout,
                               bool in_place, uint64_t seed) {
  HFTA_SEEDED_TRACE(seed);
  SCOPED_TRACE(fmt::format("{} B={} conv={} N={} C={} HW={} in_place={}", describe(p), B,
                           layout.conv, layout.N, layout.C, layout.HW, in_place));
  RngStream rng(seed, 0);
  const Shape shape = layout.fused(B);
  Buffer x = activation_input(shape, rng), dy = test::random_buffer(shape, rng);
  const Buffer x0 = x, dy0 = dy;
  Buffer y(shape), dx(shape);
  // In place: y is x's buffer and dx is dy's; backward gets only what it reads.
  const bool from_y = p.backward_reads_output();
  if (in_place && from_y) {
    activation_forward(p, {.x = x.view(), .y = x.view()});
    activation_backward(p, {.x = TensorView(), .y = x.view(), .dy = dy.view(), .dx = dy.view()});
    y = x, dx = dy;
  } else if (in_place) {
    activation_forward(p, {.x = x.view(), .y = y.view()});
    activation_backward(p, {.x = x.view(), .y = TensorView(), .dy = dy.view(), .dx = dy.view()});
    dx = dy;
  } else {
    activation_forward(p, {.x = x.view(), .y = y.view()});
    activation_backward(p, {.x = x.view(), .y = y.view(), .dy = dy.view(), .dx = dx.view()});
  }

  for (int64_t b = 0; b < B; ++b) {
    SCOPED_TRACE(fmt::format("model {}", b));
    Buffer xb = layout.gather(x0, B, b), dyb = layout.gather(dy0, B, b);
    Buffer yb(layout.single()), dxb(layout.single());
    ref::activation_forward(p, {.x = xb.view(), .y = yb.view()});
    ref::activation_backward(p,
                             {.x = xb.view(), .y = yb.view(), .dy = dyb.view(), .dx = dxb.view()});
    const double atol = atol_for(p.kind), rtol = rtol_for(p.kind);
    expect_close(layout.gather(y, B, b), yb, atol, rtol, "forward");
    expect_close(layout.gather(dx, B, b), dxb, atol, rtol, "input grad");
  }
}

TEST(Activation, FusedEqualsSerial) {
  const Layout layouts[] = {
      {false, 1, 1, 1}, {false, 5, 7, 3}, {false, 33, 65, 17},  // > one 16K-element chunk at B=8
      {true, 3, 5, 7},  {true, 2, 3, 1},  {true, 4, 6, 169},
  };
  uint64_t seed = test::seed_for_test();
  for (const auto& p : all_params())
    for (int64_t B : test::model_counts())
      for (const auto& layout : layouts)
        for (bool in_place : {false, true})
          check_fused_equals_serial(p, B, layout, in_place, seed++);
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

TEST(Activation, ReferenceGradientsMatchFiniteDifferences) {
  uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 1);
  for (const auto& p : all_params()) {
    SCOPED_TRACE(describe(p));
    Buffer x = test::random_buffer(Shape{2, 3, 5}, rng, -3.0f, 3.0f);
    // Keep away from the ReLU kink at 0, where the finite difference straddles two slopes.
    for (float& v : x.values)
      if (std::fabs(v) < 0.1f) v = v < 0.0f ? -0.1f : 0.1f;
    Buffer g = test::random_buffer(x.shape, rng), y(x.shape), dx(x.shape);
    auto forward = [&] { ref::activation_forward(p, {.x = x.view(), .y = y.view()}); };
    forward();
    ref::activation_backward(p, {.x = x.view(), .y = y.view(), .dy = g.view(), .dx = dx.view()});
    // eps = 1e-2: truncation error eps^2 |f'''| / 6 <= 2e-5 (|f'''| <= 1 for gelu/tanh/sigmoid,
    // 0 for the piecewise-linear ones away from 0); rounding: y is float, so each difference
    // quotient carries about 2 * 2^-24 * |y| / (2 eps) <= 2e-5 at |y| <= 3.
    const double eps = 1e-2, tol = 1e-4;
    test::expect_gradient_matches_finite_differences(forward, x, y, g, dx, eps, tol, tol, "dx");
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

TEST(Activation, AccumulateDxAddsToDx) {
  const uint64_t seed = test::case_seed("Activation.AccumulateDxAddsToDx");
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 0);
  for (auto kind : {ActivationKind::kRelu, ActivationKind::kLeakyRelu, ActivationKind::kGelu,
                    ActivationKind::kTanh, ActivationKind::kSigmoid})
    for (bool fast : {true, false}) {
      const ActivationParams p{.kind = kind};
      const Shape shape{3, 5, 37};
      Buffer x = test::random_buffer(shape, rng, -3.0f, 3.0f), y(shape);
      Buffer dy = test::random_buffer(shape, rng);
      activation_forward(p, {.x = x.view(), .y = y.view()});
      test::expect_dx_accumulates(
          [&](TensorView dx, bool acc) {
            const ActivationBackwardArgs a{
                .x = x.view(), .y = y.view(), .dy = dy.view(), .dx = dx, .accumulate_dx = acc};
            fast ? activation_backward(p, a) : ref::activation_backward(p, a);
          },
          shape, seed, fmt::format("{} fast={}", activation_name(kind), fast));
    }
}

}  // namespace
}  // namespace hfta
