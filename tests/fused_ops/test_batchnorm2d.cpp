// Fused BatchNorm2d on the op harness (tests/op_harness.h): fused(B) equals B reference
// single-model runs (forward, saved statistics, running statistics over two training calls, and
// every gradient), in training and eval, with and without affine and running statistics;
// reference gradients equal finite differences; PyTorch's semantics and running statistics on
// hand-computed cases; bad shapes and hyperparameters raise hfta::Error. A fused activation
// (ReLU, ReLU6, LeakyReLU) equals the two ops one after the other, bit for bit.
#include <algorithm>
#include <cmath>

#include "fused_ops/batchnorm2d.h"
#include "norm_activation_check.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::random_buffer;

using test::Layout;
using test::OpCase;
using test::Role;
using test::TensorSpec;

constexpr double kUnitRoundoff = 1.0 / (1 << 24);  // float's u = 2^-24

// The op's parameters plus what a case varies besides them.
struct BnParams {
  int64_t B = 1;
  BatchNorm2dParams bn;
  bool running = true;  // running statistics passed (training may skip them; eval needs them)
  float offset = 0.0f;  // added to x: |mean| >> std checks the statistics' cancellation
  BatchNorm2dParams params() const {
    BatchNorm2dParams p = bn;
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

struct BatchNorm2dOp {
  using Params = BnParams;
  static std::string describe(const BnParams& q) {
    const BatchNorm2dParams p = q.params();
    return fmt::format(
        "N={} C={} H={} W={} affine={} training={} running={} momentum={} offset={} eps={} "
        "activation={}",
        p.N, p.C, p.H, p.W, p.affine, p.training, q.running, p.momentum, q.offset, p.eps,
        p.activation ? activation_name(p.activation->kind) : "none");
  }
  static std::vector<TensorSpec> tensors(const BnParams& q, const OpCase<BnParams>& c) {
    const BatchNorm2dParams p = q.params();
    const Shape x = p.x_shape(), s = p.param_shape();
    const float lo = q.offset - 1.0f, hi = q.offset + 1.0f;
    auto channels = [&](std::string name, Role role) {
      return TensorSpec{.name = std::move(name),
                        .shape = x,
                        .layout = Layout::kChannels,
                        .role = role,
                        .lo = lo,
                        .hi = hi,
                        .channels = p.C};
    };
    std::vector<TensorSpec> t = {channels("x", Role::kInput),
                                 channels("y", Role::kOutput),
                                 {.name = "mean", .shape = s, .role = Role::kSaved},
                                 {.name = "rstd", .shape = s, .role = Role::kSaved}};
    TensorSpec dy = channels("dy", Role::kInput);
    dy.lo = -1.0f, dy.hi = 1.0f;
    t.push_back(dy);
    if (q.running || !p.training) {
      t.push_back({.name = "running_mean",
                   .shape = s,
                   .role = Role::kState,
                   .lo = q.offset - 0.5f,
                   .hi = q.offset + 0.5f});
      t.push_back(
          {.name = "running_var", .shape = s, .role = Role::kState, .lo = 0.5f, .hi = 1.5f});
      // Two training calls: the running statistics must follow each model's own updates.
      if (p.training) t.push_back(channels("x_prev", Role::kInput));
    }
    if (p.affine)
      for (const char* name : {"gamma", "beta"}) {
        t.push_back({.name = name, .shape = s});
        t.push_back({.name = std::string("d") + name, .shape = s, .role = Role::kParamGrad});
      }
    if (!c.no_dx) t.push_back(channels("dx", Role::kInputGrad));
    return t;
  }
  static void run(const BnParams& q, const test::Views& v, const test::RunContext& ctx) {
    const BatchNorm2dParams p = q.params();
    const BatchNorm2dSaved saved{.mean = v("mean"), .rstd = v("rstd")};
    BatchNorm2dForwardArgs f{.x = v("x_prev"),
                             .gamma = v("gamma"),
                             .beta = v("beta"),
                             .running_mean = v("running_mean"),
                             .running_var = v("running_var"),
                             .saved = saved,
                             .y = v("y")};
    auto forward = ctx.ref ? ref::batchnorm2d_forward : batchnorm2d_forward;
    if (!f.x.empty()) forward(p, f);
    f.x = v("x");
    forward(p, f);
    if (ctx.forward_only) return;
    const BatchNorm2dBackwardArgs b{.x = v("x"),
                                    .gamma = v("gamma"),
                                    .beta = v("beta"),
                                    .y = v("y"),
                                    .saved = saved,
                                    .dy = v("dy"),
                                    .dx = v("dx"),
                                    .dgamma = v("dgamma"),
                                    .dbeta = v("dbeta"),
                                    .accumulate_dx = ctx.accumulate_dx};
    (ctx.ref ? ref::batchnorm2d_backward : batchnorm2d_backward)(p, b);
  }
  // The fused CPU kernel sums each [H*W] row in float and the N rows in double; the reference
  // sums everything in double. A float sum of k terms errs by at most k*u*sum|terms|, so every
  // statistic (mean, variance, sum dy, sum dy*(x - mean)) carries a relative error of at most
  // (H*W)*u on the scale of its terms, and the few roundings after it add a handful of u:
  // e = 4 * (H*W + 8) * u covers both with a factor 4 of margin. The mean's error is e*max|x| (it
  // cancels against x, so it scales with |x|, not with the std); it reaches the outputs
  // multiplied by rstd. Each tolerance is e times the magnitude its error terms multiply
  // (|dy|, |beta| <= 1 by construction). Eval leaves the running statistics exactly as they were.
  static std::pair<double, double> tolerance(const BnParams& q, const test::Views& v,
                                             const TensorSpec& s) {
    const BatchNorm2dParams p = q.params();
    const double e = 4.0 * double(p.H * p.W + 8) * kUnitRoundoff;
    const double M = double(p.reduction_size());
    const TensorView x = v("x"), mean = v("mean"), rstd = v("rstd");
    const double x_max = std::max(max_abs(x), max_abs(v("x_prev")));
    const double rstd_max = max_abs(rstd), gamma_max = p.affine ? max_abs(v("gamma")) : 1.0;
    double xhat_max = 0.0;
    const int64_t hw = p.H * p.W;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t c = (i / hw) % p.C;
      xhat_max = std::max(xhat_max, std::fabs(double(x.data[i]) - mean.data[c]) * rstd.data[c]);
    }
    const double mean_shift = x_max * rstd_max;  // a mean error of e*x_max, in units of std
    double t = 0.0;
    if (s.name == "y") {
      t = e * (gamma_max * (mean_shift + xhat_max + 1.0) + 1.0);
    } else if (s.name == "dx") {
      // dx = a*dy + k1*(x - mean) + k0 with |k1*(x - mean)| <= a*xhat^2*|dy|, k1 from a float sum.
      t = e * gamma_max * rstd_max * (1.0 + xhat_max * (xhat_max + 2.0 * mean_shift));
    } else if (s.name == "dgamma") {
      t = e * (M * (xhat_max + mean_shift) + 1.0);  // + the initial (accumulated) value
    } else if (s.name == "dbeta") {
      t = e * (M + 1.0);
    } else if (s.name == "running_mean" || s.name == "running_var") {
      t = p.training ? e * (x_max * x_max + 2.0) : 0.0;
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
  // L = sum(y * dy) over <= 48 outputs with |y| <= 3: rounding y to float moves L by at most
  // 48 * 3 * 2^-24 ~ 9e-6, 4.3e-4 after dividing by 2*eps; the O(eps^2) truncation term, with
  // rstd ~ 2 and M >= 12, is ~1e-4 * |L'''| / 6 ~ 2e-5. 1e-3 covers both.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 1e-3, 1e-3}; }
};

// Sizes straddle the kernel's switches: H*W rows below, at and past a 16-float vector (and 64),
// the parallel_for over B*C channels below, at and above the thread count, M = N*H*W = 2 (the
// smallest training batch), N = 1, momentum 0 and 1, |mean| >> std, large eps; each in training
// with and without running statistics and in eval, B in {1, 2, 3, 8} and 1 to 3 threads.
std::vector<OpCase<BnParams>> batchnorm_cases() {
  struct Size {
    int64_t N, C, H, W;
    bool affine;
    double momentum = 0.1;
    float offset = 0.0f;
    double eps = 1e-5;
  };
  const Size sizes[] = {
      {2, 1, 1, 1, true},             // M = 2
      {3, 5, 7, 3, true},             // odd sizes
      {2, 3, 5, 9, false},            // no affine
      {3, 2, 3, 5, true},             // rows of 15
      {2, 2, 4, 4, false},            // rows of 16
      {2, 1, 1, 17, true},            // rows of 17
      {6, 17, 8, 8, true},            // rows of 64
      {5, 3, 4, 4, true, 1.0},        // momentum 1: running = batch statistics
      {2, 4, 3, 3, true, 0.0},        // momentum 0: running unchanged
      {3, 3, 5, 5, true, 0.1, 5.0f},  // |mean| >> std
      {1, 6, 1, 5, true},             // N = 1
      {4, 16, 11, 13, true, 0.1, 5.0f},
      {3, 4, 3, 5, true, 0.3, 0.0f, 0.5},  // large eps
      // Small planes with many channels: blocks of several channels walked sample by sample,
      // a partial last block (the 1x1, 2x2, 4x4 and 8x8 planes have compile-time loops)
      {2, 70, 1, 1, true},
      {3, 41, 2, 2, true},
      {2, 23, 4, 4, false},
      {3, 9, 8, 8, true},
      {2, 2, 2, 3, true},  // small enough for finite differences
  };
  std::vector<OpCase<BnParams>> cases;
  int k = 0;
  for (int with_activation = 0; with_activation < 2; ++with_activation)
    for (const Size& s : sizes)
      for (int mode = 0; mode < 3; ++mode)  // training, training without running stats, eval
        for (int64_t B : test::model_counts()) {
          OpCase<BnParams> c;
          c.p.bn =
              BatchNorm2dParams{.N = s.N,
                                .C = s.C,
                                .H = s.H,
                                .W = s.W,
                                .eps = s.eps,
                                .momentum = s.momentum,
                                .affine = s.affine,
                                .training = mode != 2,
                                .activation = test::harness_activation(with_activation != 0, k)};
          test::set_batchnorm_case(c, s, mode, B, s.N + s.C, k);
          // Finite differences step across the activations' kinks.
          c.fd = B == 1 && s.N * s.H * s.W >= 12 && s.N * s.C * s.H * s.W <= 48 && s.offset == 0 &&
                 !c.p.bn.activation;
          c.name = fmt::format("N{}_C{}_H{}_W{}", s.N, s.C, s.H, s.W) +
                   test::batchnorm_case_name(c, s, mode);
          cases.push_back(c);
        }
  return cases;
}

class BatchNorm2dHarness : public ::testing::TestWithParam<OpCase<BnParams>> {};
TEST_P(BatchNorm2dHarness, FusedEqualsSerial) { test::run_case<BatchNorm2dOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, BatchNorm2dHarness, ::testing::ValuesIn(batchnorm_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one), without fused activations (CPU only).
std::vector<OpCase<BnParams>> device_batchnorm_cases() {
  std::vector<OpCase<BnParams>> cases = batchnorm_cases();
  std::erase_if(cases, [](const OpCase<BnParams>& c) { return c.p.bn.activation.has_value(); });
  return test::device_cases<BatchNorm2dOp>(cases, Device::kCuda);
}
INSTANTIATE_TEST_SUITE_P(OnCuda, BatchNorm2dHarness, ::testing::ValuesIn(device_batchnorm_cases()),
                         test::CaseName());

// A fused activation gives, bit for bit, what BatchNorm2d and then the activation op give (as a
// Net runs them: the activation in place over BatchNorm's output, its gradient in a buffer of its
// own), forward and backward, written and accumulated, training and eval, on the plane sizes the
// kernel unrolls and others, with 1 to 3 threads. gamma and beta spread the normalized values
// over both of ReLU6's clamps; outputs start as garbage.
TEST(BatchNorm2d, FusedActivationEqualsTheTwoOpsBitForBit) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 7);
  struct Size {
    int64_t N, C, H, W;
  };
  const Size sizes[] = {{3, 5, 7, 3},  {2, 70, 1, 1}, {3, 41, 2, 2},
                        {2, 23, 4, 4}, {3, 9, 8, 8},  {2, 4, 16, 17}};
  int k = 0;
  for (const Size& sz : sizes)
    for (const ActivationParams& act : test::fusable_activations())
      for (bool training : {true, false})
        for (bool accumulate : {false, true}) {
          const int threads = 1 + k++ % 3;
          cpu::set_num_threads(threads);
          const BatchNorm2dParams p{.B = 3,
                                    .N = sz.N,
                                    .C = sz.C,
                                    .H = sz.H,
                                    .W = sz.W,
                                    .training = training,
                                    .activation = act};
          SCOPED_TRACE(fmt::format("N={} C={} H={} W={} {} {} {} {} threads={}", sz.N, sz.C, sz.H,
                                   sz.W, activation_name(act.kind), act.negative_slope,
                                   training ? "training" : "eval",
                                   accumulate ? "accumulate" : "write", threads));
          test::NormInputs in(p.x_shape(), p.param_shape(), rng);
          auto run = [&](bool fuse) {
            return test::run_norm(p, fuse, in, accumulate, batchnorm2d_forward,
                                  batchnorm2d_backward);
          };
          test::expect_same_outputs(run(true), run(false),
                                    act.kind == ActivationKind::kRelu6 && sz.N * sz.H * sz.W >= 16);
        }
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
