// Fused LayerNorm: fused(B) equals B reference single-model runs (forward, saved statistics and
// every gradient), with and without affine; reference gradients equal finite differences;
// PyTorch's semantics on a hand-computed case; bad shapes and eps raise hfta::Error.
#include <algorithm>
#include <cmath>

#include "fused_ops/layernorm.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::random_buffer;

constexpr double kUnitRoundoff = 1.0 / (1 << 24);  // float's u = 2^-24

struct LnCase {
  int64_t N, F;
  bool affine;
  float offset = 0.0f;  // added to x: |mean| >> std checks the statistics' cancellation
  double eps = 1e-5;
};

TensorView view_if(bool on, const TensorView& v) { return on ? v : TensorView(); }

double max_abs(const float* v, int64_t n) {
  double m = 0.0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, double(std::fabs(v[i])));
  return m;
}

// The fused CPU kernel sums each row of F features in float; the reference sums in double. A
// float sum of k terms errs by at most k*u*sum|terms|, so the row statistics (mean, variance,
// sum gdy, sum gdy*(x - mean)) carry a relative error of at most F*u on the scale of their terms,
// and the few roundings after them add a handful of u: e = 4 * (F + 8) * u covers both with a
// factor 4 of margin. The mean's error is e*max|x| (it cancels against x, so it scales with |x|,
// not the std); it reaches the outputs multiplied by rstd. dgamma/dbeta sum the N rows in double,
// so their error is N times a term's. Each tolerance is e times the magnitude its error terms
// multiply (|dy|, |beta| <= 1 by construction).
struct LnTolerances {
  double forward, dx, dgamma, dbeta, mean, rstd;
};

LnTolerances tolerances(const LayerNormParams& p, double x_max, double xhat_max, double rstd_max,
                        double gamma_max) {
  const double e = 4.0 * double(p.F + 8) * kUnitRoundoff;
  const double mean_shift = x_max * rstd_max;  // a mean error of e*x_max, in units of std
  LnTolerances t;
  t.forward = e * (gamma_max * (mean_shift + xhat_max + 1.0) + 1.0);
  // dx = rstd*gdy + k1*(x - mean) + k0 with |k1*(x - mean)| <= rstd*xhat^2*|gdy|.
  t.dx = e * gamma_max * rstd_max * (1.0 + xhat_max * (xhat_max + 2.0 * mean_shift));
  t.dgamma = e * (double(p.N) * (xhat_max + mean_shift) + 1.0);  // + the accumulated value
  t.dbeta = e * (double(p.N) + 1.0);
  t.mean = e * x_max;
  t.rstd = e;  // relative: the mean's error moves the variance only to second order
  return t;
}

void check_fused_equals_serial(int64_t B, const LnCase& c, uint64_t seed) {
  HFTA_SEEDED_TRACE(seed);
  SCOPED_TRACE(fmt::format("B={} N={} F={} affine={} offset={} eps={}", B, c.N, c.F, c.affine,
                           c.offset, c.eps));
  RngStream rng(seed, 0);
  LayerNormParams p{B, c.N, c.F, c.eps, c.affine};
  Buffer x = test::random_buffer(p.x_shape(), rng, c.offset - 1.0f, c.offset + 1.0f);
  Buffer gamma = test::random_buffer(p.param_shape(), rng),
         beta = random_buffer(p.param_shape(), rng);
  Buffer dy = test::random_buffer(p.y_shape(), rng);
  Buffer dgamma = test::random_buffer(p.param_shape(), rng),
         dbeta = random_buffer(p.param_shape(), rng);
  const Buffer dgamma0 = dgamma, dbeta0 = dbeta;  // accumulate semantics: nonzero start
  Buffer mean(p.saved_shape()), rstd(p.saved_shape()), y(p.y_shape()), dx(p.x_shape());
  LayerNormSaved saved{mean.view(), rstd.view()};
  layernorm_forward(p, {.x = x.view(),
                        .gamma = view_if(c.affine, gamma.view()),
                        .beta = view_if(c.affine, beta.view()),
                        .saved = saved,
                        .y = y.view()});
  layernorm_backward(p, {.x = x.view(),
                         .gamma = view_if(c.affine, gamma.view()),
                         .saved = saved,
                         .dy = dy.view(),
                         .dx = dx.view(),
                         .dgamma = view_if(c.affine, dgamma.view()),
                         .dbeta = view_if(c.affine, dbeta.view())});

  LayerNormParams one = p;
  one.B = 1;
  // Model b alone: B=1 views of its contiguous slices.
  auto slice = [](const Buffer& buf, Shape single, int64_t b) {
    return TensorView(const_cast<float*>(buf.values.data()) + b * single.numel(), single);
  };
  for (int64_t b = 0; b < B; ++b) {
    SCOPED_TRACE(fmt::format("model b={}", b));
    Buffer meanb(one.saved_shape()), rstdb(one.saved_shape()), yb(one.y_shape());
    Buffer dxb(one.x_shape()), dgb(one.param_shape()), dbb(one.param_shape());
    std::copy_n(dgamma0.values.data() + b * dgb.numel(), dgb.numel(), dgb.data());
    std::copy_n(dbeta0.values.data() + b * dbb.numel(), dbb.numel(), dbb.data());
    LayerNormSaved savedb{meanb.view(), rstdb.view()};
    TensorView xb = slice(x, one.x_shape(), b), gb = slice(gamma, one.param_shape(), b);
    ref::layernorm_forward(one, {.x = xb,
                                 .gamma = view_if(c.affine, gb),
                                 .beta = view_if(c.affine, slice(beta, one.param_shape(), b)),
                                 .saved = savedb,
                                 .y = yb.view()});
    ref::layernorm_backward(one, {.x = xb,
                                  .gamma = view_if(c.affine, gb),
                                  .saved = savedb,
                                  .dy = slice(dy, one.y_shape(), b),
                                  .dx = dxb.view(),
                                  .dgamma = view_if(c.affine, dgb.view()),
                                  .dbeta = view_if(c.affine, dbb.view())});

    double xhat_max = 0.0;
    for (int64_t i = 0; i < xb.numel(); ++i) {
      const int64_t n = i / c.F;
      xhat_max = std::max(
          xhat_max, std::fabs(double(xb.data[i]) - meanb.values[n]) * double(rstdb.values[n]));
    }
    const double gamma_max = c.affine ? max_abs(gb.data, gb.numel()) : 1.0;
    const LnTolerances t = tolerances(one, max_abs(xb.data, xb.numel()), xhat_max,
                                      max_abs(rstdb.data(), rstdb.numel()), gamma_max);
    expect_close(y.data() + b * yb.numel(), yb.data(), yb.numel(), t.forward, t.forward, "forward");
    expect_close(mean.data() + b * c.N, meanb.data(), c.N, t.mean, t.mean, "saved mean");
    expect_close(rstd.data() + b * c.N, rstdb.data(), c.N, 0.0, t.rstd, "saved rstd");
    expect_close(dx.data() + b * dxb.numel(), dxb.data(), dxb.numel(), t.dx, t.dx, "input grad");
    if (c.affine) {
      expect_close(dgamma.data() + b * c.F, dgb.data(), c.F, t.dgamma, t.dgamma, "gamma grad");
      expect_close(dbeta.data() + b * c.F, dbb.data(), c.F, t.dbeta, t.dbeta, "beta grad");
    }
  }
}

TEST(LayerNorm, FusedEqualsSerial) {
  // F spans one SIMD vector, partial ones, and several column blocks of the parameter gradients
  // (16-feature multiples up to 1024, fewer per task as B grows).
  const LnCase cases[] = {
      {1, 1, true},                 // one feature: xhat = 0, y = beta
      {3, 2, true},                 // two features: xhat = +-1
      {5, 7, true},                 // partial SIMD vector
      {4, 13, false},               // no affine
      {7, 64, true},                // whole SIMD vectors
      {9, 65, true},                // one past
      {2, 129, false},              // no affine, two vectors and one
      {17, 33, true, 5.0f},         // |mean| >> std
      {6, 200, true},               // several vectors, a partial one
      {3, 1100, true},              // several column blocks even at B = 8
      {3, 9, true, 0.0f, 0.5},      // large eps
      {33, 768, true, 0.0f, 1e-6},  // a transformer width, small eps
  };
  uint64_t seed = test::seed_for_test();
  for (int64_t B : test::model_counts())
    for (const auto& c : cases) check_fused_equals_serial(B, c, seed++);
}

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

TEST(LayerNorm, ReferenceGradientsMatchFiniteDifferences) {
  for (bool affine : {true, false}) {
    uint64_t seed = test::seed_for_test();
    HFTA_SEEDED_TRACE(seed);
    SCOPED_TRACE(affine ? "affine" : "no affine");
    RngStream rng(seed, 1);
    LayerNormParams p{2, 3, 5};
    p.affine = affine;
    Buffer x = test::random_buffer(p.x_shape(), rng), g = random_buffer(p.y_shape(), rng);
    Buffer gamma = test::random_buffer(p.param_shape(), rng, 0.5f, 1.5f);
    Buffer beta = test::random_buffer(p.param_shape(), rng);
    Buffer y(p.y_shape()), mean(p.saved_shape()), rstd(p.saved_shape());
    Buffer dx(p.x_shape()), dgamma(p.param_shape()), dbeta(p.param_shape());
    LayerNormSaved saved{mean.view(), rstd.view()};
    auto forward = [&] {
      ref::layernorm_forward(p, {.x = x.view(),
                                 .gamma = view_if(affine, gamma.view()),
                                 .beta = view_if(affine, beta.view()),
                                 .saved = saved,
                                 .y = y.view()});
    };
    forward();
    ref::layernorm_backward(p, {.x = x.view(),
                                .gamma = view_if(affine, gamma.view()),
                                .saved = saved,
                                .dy = g.view(),
                                .dx = dx.view(),
                                .dgamma = view_if(affine, dgamma.view()),
                                .dbeta = view_if(affine, dbeta.view())});
    // L = sum(y * g) over 30 outputs with |y| <= 2*1.5 + 1 (|xhat| <= sqrt(F - 1) = 2): rounding
    // y to float moves L by at most 30 * 4 * 2^-24 ~ 7e-6, i.e. 3.6e-4 after dividing by 2*eps;
    // the O(eps^2) truncation term, with rstd ~ 2 over 5 features, is ~1e-4 * |L'''| / 6 ~ 1e-4.
    const double eps = 1e-2, tol = 1e-3;
    test::expect_gradient_matches_finite_differences(forward, x, y, g, dx, eps, tol, tol, "dx");
    if (!affine) continue;
    test::expect_gradient_matches_finite_differences(forward, gamma, y, g, dgamma, eps, tol, tol,
                                                     "dgamma");
    test::expect_gradient_matches_finite_differences(forward, beta, y, g, dbeta, eps, tol, tol,
                                                     "dbeta");
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

TEST(LayerNorm, AccumulateDxAddsToDx) {
  const uint64_t seed = test::case_seed("LayerNorm.AccumulateDxAddsToDx");
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 0);
  for (bool affine : {true, false})
    for (bool fast : {true, false}) {
      LayerNormParams p{3, 5, 37};
      p.affine = affine;
      Buffer x = test::random_buffer(p.x_shape(), rng), gamma = random_buffer(p.param_shape(), rng);
      Buffer beta = test::random_buffer(p.param_shape(), rng),
             dy = test::random_buffer(p.y_shape(), rng);
      Buffer mean(p.saved_shape()), rstd(p.saved_shape()), y(p.y_shape());
      const LayerNormSaved saved{mean.view(), rstd.view()};
      const TensorView g = affine ? gamma.view() : TensorView();
      layernorm_forward(p, {.x = x.view(),
                            .gamma = g,
                            .beta = affine ? beta.view() : TensorView(),
                            .saved = saved,
                            .y = y.view()});
      test::expect_dx_accumulates(
          [&](TensorView dx, bool acc) {
            const LayerNormBackwardArgs a{.x = x.view(),
                                          .gamma = g,
                                          .saved = saved,
                                          .dy = dy.view(),
                                          .dx = dx,
                                          .accumulate_dx = acc};
            fast ? layernorm_backward(p, a) : ref::layernorm_backward(p, a);
          },
          p.x_shape(), seed, fmt::format("affine={} fast={}", affine, fast));
    }
}

}  // namespace
}  // namespace hfta
