// Fused LayerNorm on the op harness (tests/op_harness.h): fused(B) equals B reference
// single-model runs (forward, saved statistics and every gradient), with and without affine;
// reference gradients equal finite differences; PyTorch's semantics on a hand-computed case; bad
// shapes and eps raise hfta::Error.
#include <algorithm>
#include <cmath>

#include "fused_ops/layernorm.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::random_buffer;

using test::OpCase;
using test::Role;
using test::TensorSpec;

constexpr double kUnitRoundoff = 1.0 / (1 << 24);  // float's u = 2^-24

struct LnParams {
  int64_t B = 1;
  LayerNormParams ln;
  float offset = 0.0f;  // added to x: |mean| >> std checks the statistics' cancellation
  LayerNormParams params() const {
    LayerNormParams p = ln;
    p.B = B;
    return p;
  }
};

double max_abs(const TensorView& v) {
  double m = 0.0;
  for (int64_t i = 0; !v.empty() && i < v.numel(); ++i)
    m = std::max(m, double(std::fabs(v.data[i])));
  return m;
}

struct LayerNormOp {
  using Params = LnParams;
  static std::string describe(const LnParams& q) {
    const LayerNormParams p = q.params();
    return fmt::format("N={} F={} affine={} offset={} eps={}", p.N, p.F, p.affine, q.offset, p.eps);
  }
  static std::vector<TensorSpec> tensors(const LnParams& q, const OpCase<LnParams>& c) {
    const LayerNormParams p = q.params();
    std::vector<TensorSpec> t = {
        {.name = "x", .shape = p.x_shape(), .lo = q.offset - 1.0f, .hi = q.offset + 1.0f},
        {.name = "dy", .shape = p.y_shape()},
        {.name = "y", .shape = p.y_shape(), .role = Role::kOutput},
        {.name = "mean", .shape = p.saved_shape(), .role = Role::kSaved},
        {.name = "rstd", .shape = p.saved_shape(), .role = Role::kSaved}};
    if (p.affine)
      for (const char* name : {"gamma", "beta"}) {
        t.push_back({.name = name, .shape = p.param_shape()});
        t.push_back(
            {.name = std::string("d") + name, .shape = p.param_shape(), .role = Role::kParamGrad});
      }
    if (!c.no_dx) t.push_back({.name = "dx", .shape = p.x_shape(), .role = Role::kInputGrad});
    return t;
  }
  static void run(const LnParams& q, const test::Views& v, const test::RunContext& ctx) {
    const LayerNormParams p = q.params();
    const LayerNormSaved saved{.mean = v("mean"), .rstd = v("rstd")};
    const LayerNormForwardArgs f{
        .x = v("x"), .gamma = v("gamma"), .beta = v("beta"), .saved = saved, .y = v("y")};
    (ctx.ref ? ref::layernorm_forward : layernorm_forward)(p, f);
    if (ctx.forward_only) return;
    const LayerNormBackwardArgs b{.x = v("x"),
                                  .gamma = v("gamma"),
                                  .saved = saved,
                                  .dy = v("dy"),
                                  .dx = v("dx"),
                                  .dgamma = v("dgamma"),
                                  .dbeta = v("dbeta"),
                                  .accumulate_dx = ctx.accumulate_dx};
    (ctx.ref ? ref::layernorm_backward : layernorm_backward)(p, b);
  }
  // The fused CPU kernel sums each row of F features in float; the reference sums in double. A
  // float sum of k terms errs by at most k*u*sum|terms|, so the row statistics (mean, variance,
  // sum gdy, sum gdy*(x - mean)) carry a relative error of at most F*u on the scale of their
  // terms, and the few roundings after them add a handful of u: e = 4 * (F + 8) * u covers both
  // with a factor 4 of margin. The mean's error is e*max|x| (it cancels against x, so it scales
  // with |x|, not the std); it reaches the outputs multiplied by rstd. dgamma/dbeta sum the N
  // rows in double, so their error is N times a term's. Each tolerance is e times the magnitude
  // its error terms multiply (|dy|, |beta| <= 1 by construction).
  static std::pair<double, double> tolerance(const LnParams& q, const test::Views& v,
                                             const TensorSpec& s) {
    const LayerNormParams p = q.params();
    const double e = 4.0 * double(p.F + 8) * kUnitRoundoff;
    const TensorView x = v("x"), mean = v("mean"), rstd = v("rstd");
    const double x_max = max_abs(x), rstd_max = max_abs(rstd);
    const double gamma_max = p.affine ? max_abs(v("gamma")) : 1.0;
    double xhat_max = 0.0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t n = i / p.F;
      xhat_max = std::max(xhat_max, std::fabs(double(x.data[i]) - mean.data[n]) * rstd.data[n]);
    }
    const double mean_shift = x_max * rstd_max;  // a mean error of e*x_max, in units of std
    double t = 0.0;
    if (s.name == "y") {
      t = e * (gamma_max * (mean_shift + xhat_max + 1.0) + 1.0);
    } else if (s.name == "dx") {
      // dx = rstd*gdy + k1*(x - mean) + k0 with |k1*(x - mean)| <= rstd*xhat^2*|gdy|.
      t = e * gamma_max * rstd_max * (1.0 + xhat_max * (xhat_max + 2.0 * mean_shift));
    } else if (s.name == "dgamma") {
      t = e * (double(p.N) * (xhat_max + mean_shift) + 1.0);  // + the accumulated value
    } else if (s.name == "dbeta") {
      t = e * (double(p.N) + 1.0);
    } else if (s.name == "mean") {
      t = e * x_max;
    } else if (s.name == "rstd") {
      return {0.0, e};  // relative: the mean's error moves the variance only to second order
    }
    return {t, t};
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() {
    return {{"x", "dx"}, {"gamma", "dgamma"}, {"beta", "dbeta"}};
  }
  // L = sum(y * dy) over <= 35 outputs with |y| <= |xhat| + 1 <= sqrt(F - 1) + 1: rounding y to
  // float moves L by ~35 * 4 * 2^-24 ~ 8e-6, 4e-4 after dividing by 2*eps; the O(eps^2)
  // truncation term, with rstd ~ 2 over 5 to 7 features, is ~1e-4 * |L'''| / 6 ~ 1e-4.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 1e-3, 1e-3}; }
};

// F spans one SIMD vector, partial ones, and several column blocks of the parameter gradients
// (16-feature multiples up to 1024, fewer per task as B grows and as threads shrink); B*N rows
// below, at and above the thread count.
std::vector<OpCase<LnParams>> layernorm_cases() {
  struct Size {
    int64_t N, F;
    bool affine;
    float offset = 0.0f;
    double eps = 1e-5;
  };
  const Size sizes[] = {
      {1, 1, true},                 // one feature: xhat = 0, y = beta
      {3, 2, true},                 // two features: xhat = +-1
      {5, 7, true},                 // partial SIMD vector
      {3, 5, false},                // no affine, finite differences
      {4, 13, false},               // no affine
      {1, 15, true},                // one row per model
      {2, 16, true},                // one whole vector
      {2, 17, true},                // one past
      {7, 64, true},                // whole SIMD vectors
      {9, 65, true},                // one past
      {2, 129, false},              // no affine, two vectors and one
      {17, 33, true, 5.0f},         // |mean| >> std
      {6, 200, true},               // several vectors, a partial one
      {3, 1100, true},              // several column blocks even at B = 8
      {3, 9, true, 0.0f, 0.5},      // large eps
      {33, 768, true, 0.0f, 1e-6},  // a transformer width, small eps
  };
  std::vector<OpCase<LnParams>> cases;
  int k = 0;
  for (const Size& s : sizes)
    for (int64_t B : test::model_counts()) {
      OpCase<LnParams> c;
      c.p.ln = LayerNormParams{.N = s.N, .F = s.F, .eps = s.eps, .affine = s.affine};
      c.p.offset = s.offset;
      c.B = B;
      c.threads = 1 + (k++ % 3);
      c.accumulate_dx = (s.N + s.F + B) % 2 == 1;
      c.no_dx = s.affine && B == 3 && s.F % 2 == 0;
      c.fd = B == 1 && s.N * s.F <= 35 && s.F >= 5 && s.offset == 0;
      c.name = fmt::format("N{}_F{}_B{}{}{}{}_t{}{}{}", s.N, s.F, B, s.affine ? "" : "_noaffine",
                           s.offset != 0 ? "_offset" : "",
                           s.eps > 1e-3   ? "_bigeps"
                           : s.eps < 1e-5 ? "_smalleps"
                                          : "",
                           c.threads, c.accumulate_dx ? "_acc" : "", c.no_dx ? "_nodx" : "");
      cases.push_back(c);
    }
  return cases;
}

class LayerNormHarness : public ::testing::TestWithParam<OpCase<LnParams>> {};
TEST_P(LayerNormHarness, FusedEqualsSerial) { test::run_case<LayerNormOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, LayerNormHarness, ::testing::ValuesIn(layernorm_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCuda, LayerNormHarness,
                         ::testing::ValuesIn(test::device_cases<LayerNormOp>(layernorm_cases(),
                                                                             Device::kCuda)),
                         test::CaseName());

// Skipped gradients stay untouched and do not change the others.
TEST(LayerNorm, EmptyGradientsAreSkipped) {
  uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 2);
  LayerNormParams p{3, 5, 70};
  Buffer x = test::random_buffer(p.x_shape(), rng), gamma = random_buffer(p.param_shape(), rng);
  Buffer beta = test::random_buffer(p.param_shape(), rng),
         dy = test::random_buffer(p.y_shape(), rng);
  Buffer mean(p.saved_shape()), rstd(p.saved_shape()), y(p.y_shape());
  LayerNormSaved saved{mean.view(), rstd.view()};
  layernorm_forward(
      p,
      {.x = x.view(), .gamma = gamma.view(), .beta = beta.view(), .saved = saved, .y = y.view()});
  Buffer dx_all(p.x_shape()), dg_all(p.param_shape()), db_all(p.param_shape());
  layernorm_backward(p, {.x = x.view(),
                         .gamma = gamma.view(),
                         .saved = saved,
                         .dy = dy.view(),
                         .dx = dx_all.view(),
                         .dgamma = dg_all.view(),
                         .dbeta = db_all.view()});
  Buffer dx(p.x_shape()), db(p.param_shape());
  layernorm_backward(p, {.x = x.view(),
                         .gamma = gamma.view(),
                         .saved = saved,
                         .dy = dy.view(),
                         .dx = {},
                         .dgamma = {},
                         .dbeta = db.view()});
  expect_close(db, db_all, 0.0, 0.0, "beta grad alone");
  layernorm_backward(p, {.x = x.view(),
                         .gamma = gamma.view(),
                         .saved = saved,
                         .dy = dy.view(),
                         .dx = dx.view(),
                         .dgamma = {},
                         .dbeta = {}});
  expect_close(dx, dx_all, 0.0, 0.0, "dx without parameter grads");
}

// torch.nn.LayerNorm on a row 1, 2, 3, 4: mean 2.5, BIASED variance 1.25, eps inside the root;
// a one-feature row normalizes to exactly 0, leaving beta.
TEST(LayerNorm, MatchesPyTorchSemanticsByHand) {
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fused" : "reference");
    auto forward = fused ? layernorm_forward : ref::layernorm_forward;
    LayerNormParams p{1, 1, 4};
    p.affine = false;
    Buffer x(p.x_shape()), y(p.y_shape()), mean(p.saved_shape()), rstd(p.saved_shape());
    x.values = {1.0f, 2.0f, 3.0f, 4.0f};
    forward(p, {.x = x.view(),
                .gamma = {},
                .beta = {},
                .saved = LayerNormSaved{mean.view(), rstd.view()},
                .y = y.view()});
    const double r = 1.0 / std::sqrt(1.25 + 1e-5);
    EXPECT_NEAR(y.values[0], -1.5 * r, 1e-6);
    EXPECT_NEAR(y.values[2], 0.5 * r, 1e-6);
    EXPECT_NEAR(mean.values[0], 2.5, 1e-6);
    EXPECT_NEAR(rstd.values[0], r, 1e-6);

    LayerNormParams single{2, 1, 1};
    Buffer xs(single.x_shape()), ys(single.y_shape()), gamma(single.param_shape(), 3.0f);
    Buffer beta(single.param_shape()), ms(single.saved_shape()), rs(single.saved_shape());
    xs.values = {7.0f, -2.0f};
    beta.values = {0.25f, -0.5f};
    forward(single, {.x = xs.view(),
                     .gamma = gamma.view(),
                     .beta = beta.view(),
                     .saved = LayerNormSaved{ms.view(), rs.view()},
                     .y = ys.view()});
    EXPECT_EQ(ys.values[0], 0.25f);
    EXPECT_EQ(ys.values[1], -0.5f);
  }
}

TEST(LayerNorm, BadShapesAndEpsRaiseClearErrors) {
  LayerNormParams p{2, 3, 5};
  Buffer x(p.x_shape()), y(p.y_shape()), gamma(p.param_shape()), beta(p.param_shape());
  Buffer mean(p.saved_shape()), rstd(p.saved_shape());
  LayerNormSaved saved{mean.view(), rstd.view()};
  auto message_of = [&](const LayerNormParams& q, TensorView gv, const LayerNormSaved& s) {
    try {
      layernorm_forward(
          q, {.x = x.view(), .gamma = gv, .beta = beta.view(), .saved = s, .y = y.view()});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto expect_message = [](const std::string& message, const std::string& expected) {
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  };
  Buffer wrong_gamma(Shape{2, 4});
  expect_message(message_of(p, wrong_gamma.view(), saved),
                 "layernorm gamma (affine = true) has shape [2, 4], expected [2, 5]");
  expect_message(message_of(p, {}, saved), "layernorm gamma (affine = true) is missing");
  LayerNormParams bad = p;
  for (double eps : {0.0, -1e-5, std::nan("")}) {
    bad.eps = eps;
    expect_message(message_of(bad, gamma.view(), saved),
                   fmt::format("layernorm eps is {}, expected a finite value > 0", eps));
  }
  bad = p;
  bad.F = 0;
  expect_message(message_of(bad, gamma.view(), saved), "layernorm sizes must be positive");
  expect_message(message_of(p, gamma.view(), LayerNormSaved{mean.view(), {}}),
                 "layernorm saved.rstd is missing");
  Buffer wrong_dx(Shape{2, 5, 3});
  EXPECT_THROW(layernorm_backward(p, {.x = x.view(),
                                      .gamma = gamma.view(),
                                      .saved = saved,
                                      .dy = y.view(),
                                      .dx = wrong_dx.view(),
                                      .dgamma = gamma.view(),
                                      .dbeta = beta.view()}),
               Error);
  Buffer wrong_dy(Shape{3, 2, 5});
  EXPECT_THROW(layernorm_backward(p, {.x = x.view(),
                                      .gamma = gamma.view(),
                                      .saved = saved,
                                      .dy = wrong_dy.view(),
                                      .dx = x.view(),
                                      .dgamma = gamma.view(),
                                      .dbeta = beta.view()}),
               Error);
}

}  // namespace
}  // namespace hfta
