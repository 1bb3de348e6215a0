// Fused BatchNorm2d: fused(B) equals B reference single-model runs (forward, saved statistics,
// running statistics over two training calls, and every gradient), in training and eval, with
// and without affine; reference gradients equal finite differences; PyTorch's semantics on a
// hand-computed case; bad shapes and hyperparameters raise hfta::Error.
#include <algorithm>
#include <cmath>

#include "fused_ops/batchnorm2d.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::random_buffer;

constexpr double kUnitRoundoff = 1.0 / (1 << 24);  // float's u = 2^-24

struct BnCase {
  int64_t N, C, H, W;
  bool affine, training;
  double momentum = 0.1;
  float offset = 0.0f;  // added to x: |mean| >> std checks the statistics' cancellation
  double eps = 1e-5;
};

// Model b's channels [b*C, (b+1)*C) of an [N, B*C, H, W] buffer, as a standalone [N, C, H, W].
Buffer gather_model(const Buffer& fused, int64_t B, int64_t b, int64_t C) {
  const int64_t N = fused.shape[0], hw = fused.shape[2] * fused.shape[3];
  Buffer out(Shape{N, C, fused.shape[2], fused.shape[3]});
  for (int64_t n = 0; n < N; ++n)
    std::copy_n(fused.values.data() + (n * B + b) * C * hw, C * hw, out.data() + n * C * hw);
  return out;
}

// A copy of model b's [1, C] slice of a [B, C] buffer.
Buffer model_slice(const Buffer& fused, int64_t b) {
  const int64_t C = fused.shape[1];
  Buffer out(Shape{1, C});
  std::copy_n(fused.values.data() + b * C, C, out.data());
  return out;
}

TensorView view_if(bool on, Buffer& buf) { return on ? buf.view() : TensorView(); }

double max_abs(const Buffer& buf) {
  double m = 0.0;
  for (float v : buf.values) m = std::max(m, double(std::fabs(v)));
  return m;
}

// max |x - mean| * rstd over a single model's [N, C, H, W] input, with its [1, C] statistics.
double max_xhat(const Buffer& x, const Buffer& mean, const Buffer& rstd) {
  const int64_t C = x.shape[1], hw = x.shape[2] * x.shape[3];
  double m = 0.0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = (i / hw) % C;
    m = std::max(m, std::fabs(double(x.values[i]) - mean.values[c]) * rstd.values[c]);
  }
  return m;
}

// The fused CPU kernel sums each [H*W] row in float and the N rows in double; the reference sums
// everything in double. A float sum of k terms errs by at most k*u*sum|terms|, so every statistic
// (mean, variance, sum dy, sum dy*(x - mean)) carries a relative error of at most (H*W)*u on the
// scale of its terms, and the few roundings after it add a handful of u: e = 4 * (H*W + 8) * u
// covers both with a factor 4 of margin. The mean's error is e*max|x| (it cancels against x, so
// it scales with |x|, not with the std); it reaches the outputs multiplied by rstd. Each tolerance
// below is e times the magnitude its error terms multiply (|dy|, |beta| <= 1 by construction).
struct BnTolerances {
  double forward, dx, dgamma, dbeta, running, mean, rstd;
};

BnTolerances tolerances(const BatchNorm2dParams& p, double x_max, double xhat_max, double rstd_max,
                        double gamma_max) {
  const double e = 4.0 * double(p.H * p.W + 8) * kUnitRoundoff;
  const double M = double(p.reduction_size());
  const double mean_shift = x_max * rstd_max;  // a mean error of e*x_max, in units of std
  BnTolerances t;
  t.forward = e * (gamma_max * (mean_shift + xhat_max + 1.0) + 1.0);
  // dx = a*dy + k1*(x - mean) + k0 with |k1*(x - mean)| <= a*xhat^2*|dy|, k1 from a float sum.
  t.dx = e * gamma_max * rstd_max * (1.0 + xhat_max * (xhat_max + 2.0 * mean_shift));
  t.dgamma = e * (M * (xhat_max + mean_shift) + 1.0);  // + the initial (accumulated) value
  t.dbeta = e * (M + 1.0);
  t.running = e * (x_max * x_max + 2.0);
  t.mean = e * x_max;
  t.rstd = e;  // relative: the mean's error moves the variance only to second order
  return t;
}

void check_fused_equals_serial(int64_t B, const BnCase& c, uint64_t seed) {
  HFTA_SEEDED_TRACE(seed);
  SCOPED_TRACE(
      fmt::format("B={} N={} C={} H={} W={} affine={} training={} momentum={} offset={} eps={}", B,
                  c.N, c.C, c.H, c.W, c.affine, c.training, c.momentum, c.offset, c.eps));
  RngStream rng(seed, 0);
  BatchNorm2dParams p{B, c.N, c.C, c.H, c.W, c.eps, c.momentum, c.affine, c.training};
  // Two consecutive calls: running statistics must follow each model's own updates.
  Buffer x1 = random_buffer(p.x_shape(), rng, c.offset - 1.0f, c.offset + 1.0f);
  Buffer x2 = random_buffer(p.x_shape(), rng, c.offset - 1.0f, c.offset + 1.0f);
  Buffer gamma = test::random_buffer(p.param_shape(), rng),
         beta = random_buffer(p.param_shape(), rng);
  Buffer rmean = test::random_buffer(p.param_shape(), rng, c.offset - 0.5f, c.offset + 0.5f);
  Buffer rvar = test::random_buffer(p.param_shape(), rng, 0.5f, 1.5f);
  Buffer dy = test::random_buffer(p.y_shape(), rng);
  Buffer dgamma = test::random_buffer(p.param_shape(), rng),
         dbeta = random_buffer(p.param_shape(), rng);
  const Buffer rmean0 = rmean, rvar0 = rvar, dgamma0 = dgamma, dbeta0 = dbeta;
  Buffer mean(p.param_shape()), rstd(p.param_shape()), y(p.y_shape()), dx(p.x_shape());
  BatchNorm2dSaved saved{mean.view(), rstd.view()};
  for (Buffer* x : {&x1, &x2})
    batchnorm2d_forward(p, {.x = x->view(),
                            .gamma = view_if(c.affine, gamma),
                            .beta = view_if(c.affine, beta),
                            .running_mean = rmean.view(),
                            .running_var = rvar.view(),
                            .saved = saved,
                            .y = y.view()});
  batchnorm2d_backward(p, {.x = x2.view(),
                           .gamma = view_if(c.affine, gamma),
                           .saved = saved,
                           .dy = dy.view(),
                           .dx = dx.view(),
                           .dgamma = view_if(c.affine, dgamma),
                           .dbeta = view_if(c.affine, dbeta)});
  if (!c.training) {  // eval never touches the running statistics
    expect_close(rmean, rmean0, 0.0, 0.0, "eval running_mean unchanged");
    expect_close(rvar, rvar0, 0.0, 0.0, "eval running_var unchanged");
  }

  BatchNorm2dParams one = p;
  one.B = 1;
  for (int64_t b = 0; b < B; ++b) {
    SCOPED_TRACE(fmt::format("model b={}", b));
    Buffer xb1 = gather_model(x1, B, b, c.C), xb2 = gather_model(x2, B, b, c.C);
    Buffer gb = model_slice(gamma, b), sb = model_slice(beta, b);
    Buffer rmb = model_slice(rmean0, b), rvb = model_slice(rvar0, b);
    Buffer dgb = model_slice(dgamma0, b), dbb = model_slice(dbeta0, b);
    Buffer meanb(one.param_shape()), rstdb(one.param_shape()), yb(one.y_shape());
    Buffer dxb(one.x_shape()), dyb = gather_model(dy, B, b, c.C);
    BatchNorm2dSaved savedb{meanb.view(), rstdb.view()};
    for (Buffer* x : {&xb1, &xb2})
      ref::batchnorm2d_forward(one, {.x = x->view(),
                                     .gamma = view_if(c.affine, gb),
                                     .beta = view_if(c.affine, sb),
                                     .running_mean = rmb.view(),
                                     .running_var = rvb.view(),
                                     .saved = savedb,
                                     .y = yb.view()});
    ref::batchnorm2d_backward(one, {.x = xb2.view(),
                                    .gamma = view_if(c.affine, gb),
                                    .saved = savedb,
                                    .dy = dyb.view(),
                                    .dx = dxb.view(),
                                    .dgamma = view_if(c.affine, dgb),
                                    .dbeta = view_if(c.affine, dbb)});

    const double x_max = std::max(max_abs(xb1), max_abs(xb2));
    const double gamma_max = c.affine ? max_abs(gb) : 1.0;
    const BnTolerances t =
        tolerances(one, x_max, max_xhat(xb2, meanb, rstdb), max_abs(rstdb), gamma_max);
    expect_close(gather_model(y, B, b, c.C), yb, t.forward, t.forward, "forward");
    expect_close(model_slice(mean, b), meanb, t.mean, t.mean, "saved mean");
    expect_close(model_slice(rstd, b), rstdb, 0.0, t.rstd, "saved rstd");
    expect_close(model_slice(rmean, b), rmb, t.running, t.running, "running_mean");
    expect_close(model_slice(rvar, b), rvb, t.running, t.running, "running_var");
    expect_close(gather_model(dx, B, b, c.C), dxb, t.dx, t.dx, "input grad");
    if (c.affine) {
      expect_close(model_slice(dgamma, b), dgb, t.dgamma, t.dgamma, "gamma grad");
      expect_close(model_slice(dbeta, b), dbb, t.dbeta, t.dbeta, "beta grad");
    }
  }
}

TEST(BatchNorm2d, FusedEqualsSerial) {
  const BnCase cases[] = {
      {2, 1, 1, 1, true, true},                   // M = N*H*W = 2, the smallest training batch
      {3, 5, 7, 3, true, true},                   // odd sizes
      {2, 3, 5, 9, false, true},                  // no affine
      {4, 7, 3, 5, true, false},                  // eval
      {3, 2, 9, 7, false, false},                 // eval, no affine
      {5, 3, 4, 4, true, true, 1.0},              // momentum 1: running = batch statistics
      {2, 4, 3, 3, true, true, 0.0},              // momentum 0: running unchanged
      {3, 3, 5, 5, true, true, 0.1, 5.0f},        // |mean| >> std
      {1, 6, 1, 5, true, true},                   // N = 1
      {6, 17, 8, 8, true, true},                  // rows of 64: whole SIMD vectors
      {4, 16, 11, 13, true, false, 0.1, 5.0f},    // eval, |running_mean| >> std
      {3, 4, 3, 5, true, false, 0.1, 0.0f, 0.5},  // eval, large eps
      {3, 4, 3, 5, false, true, 0.3, 0.0f, 0.5},  // training, large eps
  };
  uint64_t seed = test::seed_for_test();
  for (int64_t B : test::model_counts())
    for (const auto& c : cases) check_fused_equals_serial(B, c, seed++);
}

// Skipped gradients stay untouched and do not change the others.
TEST(BatchNorm2d, EmptyGradientsAreSkipped) {
  uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 2);
  BatchNorm2dParams p{3, 4, 5, 3, 3};
  Buffer x = test::random_buffer(p.x_shape(), rng), gamma = random_buffer(p.param_shape(), rng);
  Buffer beta = test::random_buffer(p.param_shape(), rng),
         dy = test::random_buffer(p.y_shape(), rng);
  Buffer mean(p.param_shape()), rstd(p.param_shape()), y(p.y_shape());
  BatchNorm2dSaved saved{mean.view(), rstd.view()};
  batchnorm2d_forward(p, {.x = x.view(),
                          .gamma = gamma.view(),
                          .beta = beta.view(),
                          .running_mean = {},
                          .running_var = {},
                          .saved = saved,
                          .y = y.view()});
  Buffer dx_all(p.x_shape()), dg_all(p.param_shape()), db_all(p.param_shape());
  batchnorm2d_backward(p, {.x = x.view(),
                           .gamma = gamma.view(),
                           .saved = saved,
                           .dy = dy.view(),
                           .dx = dx_all.view(),
                           .dgamma = dg_all.view(),
                           .dbeta = db_all.view()});
  Buffer dx(p.x_shape()), dg(p.param_shape());
  batchnorm2d_backward(p, {.x = x.view(),
                           .gamma = gamma.view(),
                           .saved = saved,
                           .dy = dy.view(),
                           .dx = {},
                           .dgamma = dg.view(),
                           .dbeta = {}});
  expect_close(dg, dg_all, 0.0, 0.0, "gamma grad without dx");
  batchnorm2d_backward(p, {.x = x.view(),
                           .gamma = gamma.view(),
                           .saved = saved,
                           .dy = dy.view(),
                           .dx = dx.view(),
                           .dgamma = {},
                           .dbeta = {}});
  expect_close(dx, dx_all, 0.0, 0.0, "dx without parameter grads");
}

// PyTorch's semantics on numbers worked by hand: one channel holding 1, 2, 3, 4 has batch mean
// 2.5, biased variance 1.25 (used to normalize) and unbiased variance 5/3 (used for running_var).
TEST(BatchNorm2d, MatchesPyTorchSemanticsByHand) {
  BatchNorm2dParams p{1, 4, 1, 1, 1};
  p.affine = false;
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fused" : "reference");
    Buffer x(p.x_shape()), y(p.y_shape()), mean(p.param_shape()), rstd(p.param_shape());
    x.values = {1.0f, 2.0f, 3.0f, 4.0f};
    Buffer rmean(p.param_shape(), 0.0f), rvar(p.param_shape(), 1.0f);
    BatchNorm2dSaved saved{mean.view(), rstd.view()};
    auto forward = fused ? batchnorm2d_forward : ref::batchnorm2d_forward;
    forward(p, {.x = x.view(),
                .running_mean = rmean.view(),
                .running_var = rvar.view(),
                .saved = saved,
                .y = y.view()});
    const double r = 1.0 / std::sqrt(1.25 + 1e-5);
    EXPECT_NEAR(y.values[0], -1.5 * r, 1e-6);
    EXPECT_NEAR(y.values[3], 1.5 * r, 1e-6);
    EXPECT_NEAR(mean.values[0], 2.5, 1e-6);
    EXPECT_NEAR(rstd.values[0], r, 1e-6);
    EXPECT_NEAR(rmean.values[0], 0.1 * 2.5, 1e-6);
    EXPECT_NEAR(rvar.values[0], 0.9 * 1.0 + 0.1 * (5.0 / 3.0), 1e-6);
  }
}

// Eval normalizes with the running statistics, eps inside the square root (running_var = 0
// makes rstd = 1/sqrt(eps) exactly visible), and backward is the affine-only gradient.
TEST(BatchNorm2d, EvalUsesRunningStatisticsByHand) {
  BatchNorm2dParams p{1, 2, 1, 1, 1};
  p.training = false;
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fused" : "reference");
    Buffer x(p.x_shape()), y(p.y_shape()), mean(p.param_shape()), rstd(p.param_shape());
    Buffer gamma(p.param_shape(), 2.0f), beta(p.param_shape(), 0.5f);
    Buffer rmean(p.param_shape(), 1.0f), rvar(p.param_shape(), 0.0f);
    Buffer dy(p.y_shape()), dx(p.x_shape()), dgamma(p.param_shape()), dbeta(p.param_shape());
    x.values = {3.0f, -1.0f};
    dy.values = {1.0f, 0.5f};
    BatchNorm2dSaved saved{mean.view(), rstd.view()};
    auto forward = fused ? batchnorm2d_forward : ref::batchnorm2d_forward;
    auto backward = fused ? batchnorm2d_backward : ref::batchnorm2d_backward;
    forward(p, {.x = x.view(),
                .gamma = gamma.view(),
                .beta = beta.view(),
                .running_mean = rmean.view(),
                .running_var = rvar.view(),
                .saved = saved,
                .y = y.view()});
    backward(p, {.x = x.view(),
                 .gamma = gamma.view(),
                 .saved = saved,
                 .dy = dy.view(),
                 .dx = dx.view(),
                 .dgamma = dgamma.view(),
                 .dbeta = dbeta.view()});
    const double r = 1.0 / std::sqrt(1e-5);  // 316.2...: float keeps ~7 digits, so rel 1e-6
    EXPECT_NEAR(y.values[0], 2.0 * r * 2.0 + 0.5, 1e-6 * 4.0 * r);
    EXPECT_NEAR(y.values[1], -2.0 * r * 2.0 + 0.5, 1e-6 * 4.0 * r);
    EXPECT_EQ(rmean.values[0], 1.0f);
    EXPECT_EQ(rvar.values[0], 0.0f);
    EXPECT_NEAR(dx.values[0], 2.0 * r, 1e-6 * 2.0 * r);
    EXPECT_NEAR(dx.values[1], 0.5 * 2.0 * r, 1e-6 * 2.0 * r);
    EXPECT_NEAR(dgamma.values[0], 1.0 * 2.0 * r - 0.5 * 2.0 * r, 1e-6 * 2.0 * r);
    EXPECT_NEAR(dbeta.values[0], 1.5, 1e-6);
  }
}

TEST(BatchNorm2d, ReferenceGradientsMatchFiniteDifferences) {
  for (bool training : {true, false}) {
    uint64_t seed = test::seed_for_test();
    HFTA_SEEDED_TRACE(seed);
    SCOPED_TRACE(training ? "training" : "eval");
    RngStream rng(seed, 1);
    BatchNorm2dParams p{2, 2, 2, 2, 3};
    p.training = training;
    Buffer x = test::random_buffer(p.x_shape(), rng), g = random_buffer(p.y_shape(), rng);
    Buffer gamma = test::random_buffer(p.param_shape(), rng, 0.5f, 1.5f);
    Buffer beta = test::random_buffer(p.param_shape(), rng);
    Buffer rmean = test::random_buffer(p.param_shape(), rng, -0.5f, 0.5f);
    Buffer rvar = test::random_buffer(p.param_shape(), rng, 0.5f, 1.5f);
    Buffer y(p.y_shape()), mean(p.param_shape()), rstd(p.param_shape());
    Buffer dx(p.x_shape()), dgamma(p.param_shape()), dbeta(p.param_shape());
    BatchNorm2dSaved saved{mean.view(), rstd.view()};
    // Training updates the running statistics on every call; y does not depend on them.
    auto forward = [&] {
      ref::batchnorm2d_forward(p, {.x = x.view(),
                                   .gamma = gamma.view(),
                                   .beta = beta.view(),
                                   .running_mean = rmean.view(),
                                   .running_var = rvar.view(),
                                   .saved = saved,
                                   .y = y.view()});
    };
    forward();
    ref::batchnorm2d_backward(p, {.x = x.view(),
                                  .gamma = gamma.view(),
                                  .saved = saved,
                                  .dy = g.view(),
                                  .dx = dx.view(),
                                  .dgamma = dgamma.view(),
                                  .dbeta = dbeta.view()});
    // L = sum(y * g) over 48 outputs with |y| <= 3: rounding y to float moves L by at most
    // 48 * 3 * 2^-24 ~ 9e-6, i.e. 4.3e-4 after dividing by 2*eps; the O(eps^2) truncation term,
    // with rstd ~ 2 and M = 12, is ~1e-4 * |L'''| / 6 ~ 2e-5. 1e-3 covers both.
    const double eps = 1e-2, tol = 1e-3;
    test::expect_gradient_matches_finite_differences(forward, x, y, g, dx, eps, tol, tol, "dx");
    test::expect_gradient_matches_finite_differences(forward, gamma, y, g, dgamma, eps, tol, tol,
                                                     "dgamma");
    test::expect_gradient_matches_finite_differences(forward, beta, y, g, dbeta, eps, tol, tol,
                                                     "dbeta");
  }
}

TEST(BatchNorm2d, BadShapesAndHyperparametersRaiseClearErrors) {
  BatchNorm2dParams p{2, 3, 4, 5, 5};
  Buffer x(p.x_shape()), y(p.y_shape()), gamma(p.param_shape()), beta(p.param_shape());
  Buffer rmean(p.param_shape()), rvar(p.param_shape(), 1.0f);
  Buffer mean(p.param_shape()), rstd(p.param_shape());
  BatchNorm2dSaved saved{mean.view(), rstd.view()};
  auto message_of = [&](const BatchNorm2dParams& q, TensorView xv, TensorView rm, TensorView rv) {
    try {
      batchnorm2d_forward(q, {.x = xv,
                              .gamma = gamma.view(),
                              .beta = beta.view(),
                              .running_mean = rm,
                              .running_var = rv,
                              .saved = saved,
                              .y = y.view()});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto expect_message = [](const std::string& message, const std::string& expected) {
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  };
  Buffer wrong_x(Shape{3, 4, 5, 5});  // forgot the B models on the channel axis
  expect_message(message_of(p, wrong_x.view(), rmean.view(), rvar.view()),
                 "batchnorm2d input has shape [3, 4, 5, 5], expected [3, 8, 5, 5]");
  BatchNorm2dParams bad = p;
  bad.momentum = 1.5;
  expect_message(message_of(bad, x.view(), rmean.view(), rvar.view()),
                 "batchnorm2d momentum is 1.5, expected a value in [0, 1]");
  bad.momentum = -0.1;
  expect_message(message_of(bad, x.view(), rmean.view(), rvar.view()),
                 "batchnorm2d momentum is -0.1, expected a value in [0, 1]");
  for (double eps : {0.0, -1e-5}) {
    bad = p;
    bad.eps = eps;
    expect_message(message_of(bad, x.view(), rmean.view(), rvar.view()),
                   "expected a finite value > 0");
  }
  bad = p;
  bad.C = 0;
  expect_message(message_of(bad, x.view(), rmean.view(), rvar.view()), "sizes must be positive");
  // One value per channel cannot be normalized in training (PyTorch raises too).
  BatchNorm2dParams single{2, 1, 4, 1, 1};
  Buffer x1(single.x_shape()), y1(single.y_shape());
  EXPECT_THROW(batchnorm2d_forward(single, {.x = x1.view(),
                                            .gamma = gamma.view(),
                                            .beta = beta.view(),
                                            .running_mean = rmean.view(),
                                            .running_var = rvar.view(),
                                            .saved = saved,
                                            .y = y1.view()}),
               Error);
  expect_message(message_of(p, x.view(), rmean.view(), {}), "pass both");
  bad = p;
  bad.training = false;
  expect_message(message_of(bad, x.view(), {}, {}), "running_mean (required in eval mode)");
  EXPECT_THROW(batchnorm2d_forward(p, {.x = x.view(),
                                       .gamma = {},
                                       .beta = beta.view(),
                                       .running_mean = rmean.view(),
                                       .running_var = rvar.view(),
                                       .saved = saved,
                                       .y = y.view()}),
               Error);
  Buffer wrong_dx(Shape{3, 8, 5, 4});
  EXPECT_THROW(batchnorm2d_backward(p, {.x = x.view(),
                                        .gamma = gamma.view(),
                                        .saved = saved,
                                        .dy = y.view(),
                                        .dx = wrong_dx.view(),
                                        .dgamma = gamma.view(),
                                        .dbeta = beta.view()}),
               Error);
  BatchNorm2dSaved missing{mean.view(), {}};
  EXPECT_THROW(batchnorm2d_backward(p, {.x = x.view(),
                                        .gamma = gamma.view(),
                                        .saved = missing,
                                        .dy = y.view(),
                                        .dx = x.view(),
                                        .dgamma = gamma.view(),
                                        .dbeta = beta.view()}),
               Error);
}

// accumulate_dx adds the input gradient into dx, in training and eval, fast and reference.
TEST(BatchNorm2d, AccumulateDxAddsToDx) {
  const uint64_t seed = test::case_seed("BatchNorm2d.AccumulateDxAddsToDx");
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 0);
  for (bool training : {true, false})
    for (bool fast : {true, false}) {
      BatchNorm2dParams p{3, 4, 5, 3, 7};
      p.training = training;
      Buffer x = test::random_buffer(p.x_shape(), rng), gamma = random_buffer(p.param_shape(), rng);
      Buffer beta = test::random_buffer(p.param_shape(), rng),
             dy = test::random_buffer(p.y_shape(), rng);
      Buffer rm = test::random_buffer(p.param_shape(), rng),
             rv = random_buffer(p.param_shape(), rng, 0.5f, 1.5f);
      Buffer mean(p.param_shape()), rstd(p.param_shape()), y(p.y_shape());
      const BatchNorm2dSaved saved{mean.view(), rstd.view()};
      batchnorm2d_forward(p, {.x = x.view(),
                              .gamma = gamma.view(),
                              .beta = beta.view(),
                              .running_mean = rm.view(),
                              .running_var = rv.view(),
                              .saved = saved,
                              .y = y.view()});
      test::expect_dx_accumulates(
          [&](TensorView dx, bool acc) {
            const BatchNorm2dBackwardArgs a{.x = x.view(),
                                            .gamma = gamma.view(),
                                            .saved = saved,
                                            .dy = dy.view(),
                                            .dx = dx,
                                            .accumulate_dx = acc};
            fast ? batchnorm2d_backward(p, a) : ref::batchnorm2d_backward(p, a);
          },
          p.x_shape(), seed, fmt::format("training={} fast={}", training, fast));
    }
}

// Running statistics over k = 3 training steps, worked out by hand (momentum 0.1, PyTorch's
// running = 0.9 * running + 0.1 * batch statistic, UNBIASED variance for running_var). One
// model, two channels, N = 2, H*W = 2; channel 0 holds {1, 2, 3, 4} shifted by the step,
// channel 1 the constant-ish {5, 5, 5, 7}.
//   channel 0, step s (s = 0, 1, 2): values {1+s, 2+s, 3+s, 4+s}: mean 2.5 + s, unbiased var 5/3
//     running_mean: 0 -> 0.25 -> 0.25*0.9 + 0.35 = 0.575 -> 0.575*0.9 + 0.45 = 0.9675
//     running_var:  1 -> 0.9 + 1/6 = 1.0666667 -> 0.96 + 1/6 = 1.1266667 -> 1.014 + 1/6 = 1.1806667
//   channel 1, every step: {5, 5, 5, 7}: mean 5.5, squared deviations 0.25*3 + 2.25 = 3,
//     unbiased var 3/3 = 1 (biased would be 0.75)
//     running_mean: 0 -> 0.55 -> 1.045 -> 1.4905
//     running_var:  1 -> 1 -> 1 -> 1            (a biased update would drift to 0.927)
TEST(BatchNorm2d, RunningStatisticsOverThreeStepsByHand) {
  for (bool fast : {true, false}) {
    SCOPED_TRACE(fast ? "fast" : "reference");
    BatchNorm2dParams p{1, 2, 2, 1, 2};  // B=1, N=2, C=2, H=1, W=2
    p.momentum = 0.1;
    p.affine = false;
    Buffer rmean(p.param_shape(), 0.0f), rvar(p.param_shape(), 1.0f);
    Buffer x(p.x_shape()), y(p.y_shape()), mean(p.param_shape()), rstd(p.param_shape());
    for (int s = 0; s < 3; ++s) {
      const float f = static_cast<float>(s);
      // [N, C, H, W]: n=0: c0 {1, 2}, c1 {5, 5}; n=1: c0 {3, 4}, c1 {5, 7}.
      x.values = {1 + f, 2 + f, 5, 5, 3 + f, 4 + f, 5, 7};
      const BatchNorm2dForwardArgs a{.x = x.view(),
                                     .running_mean = rmean.view(),
                                     .running_var = rvar.view(),
                                     .saved = {.mean = mean.view(), .rstd = rstd.view()},
                                     .y = y.view()};
      fast ? batchnorm2d_forward(p, a) : ref::batchnorm2d_forward(p, a);
    }
    EXPECT_NEAR(rmean.values[0], 0.9675, 1e-6);
    EXPECT_NEAR(rvar.values[0], 1.0140 + 1.0 / 6.0, 1e-6);
    EXPECT_NEAR(rmean.values[1], 1.4905, 1e-6);
    EXPECT_NEAR(rvar.values[1], 1.0, 1e-6);
  }
}

}  // namespace
}  // namespace hfta
