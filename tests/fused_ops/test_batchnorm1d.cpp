// Fused BatchNorm1d on the rows layout [B, R, C] (tests/op_harness.h): fused(B) equals B
// reference single-model runs (forward, saved statistics, running statistics over two training
// calls, and every gradient), in training and eval, with and without affine and running
// statistics, on both sides of the 16-float vector width in C and of the kernel's row chunking;
// reference gradients equal finite differences; PyTorch's semantics by hand; BatchNorm1d on the
// channels layout [N, B*C, L] is batchnorm2d with H = 1, W = L, and agrees with this op on the
// transposed data; bad shapes and hyperparameters raise hfta::Error.
#include <algorithm>
#include <cmath>
#include <functional>

#include "fused_ops/batchnorm1d.h"
#include "fused_ops/batchnorm2d.h"
#include "norm_activation_check.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::expect_error_containing;
using test::random_buffer;

using test::OpCase;
using test::Role;
using test::TensorSpec;

constexpr double kUnitRoundoff = 1.0 / (1 << 24);  // float's u = 2^-24

struct Bn1Params {
  int64_t B = 1;
  BatchNorm1dParams bn;
  bool running = true;  // running statistics passed (training may skip them; eval needs them)
  float offset = 0.0f;  // added to x: |mean| >> std checks the statistics' cancellation
  BatchNorm1dParams params() const {
    BatchNorm1dParams p = bn;
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

struct BatchNorm1dOp {
  using Params = Bn1Params;
  static std::string describe(const Bn1Params& q) {
    const BatchNorm1dParams p = q.params();
    return fmt::format(
        "R={} C={} affine={} training={} running={} momentum={} offset={} eps={} activation={}",
        p.R, p.C, p.affine, p.training, q.running, p.momentum, q.offset, p.eps,
        p.activation ? activation_name(p.activation->kind) : "none");
  }
  static std::vector<TensorSpec> tensors(const Bn1Params& q, const OpCase<Bn1Params>& c) {
    const BatchNorm1dParams p = q.params();
    const Shape x = p.x_shape(), s = p.param_shape();
    const float lo = q.offset - 1.0f, hi = q.offset + 1.0f;
    std::vector<TensorSpec> t = {{.name = "x", .shape = x, .lo = lo, .hi = hi},
                                 {.name = "y", .shape = x, .role = Role::kOutput},
                                 {.name = "mean", .shape = s, .role = Role::kSaved},
                                 {.name = "rstd", .shape = s, .role = Role::kSaved},
                                 {.name = "dy", .shape = x}};
    if (q.running || !p.training) {
      t.push_back({.name = "running_mean",
                   .shape = s,
                   .role = Role::kState,
                   .lo = q.offset - 0.5f,
                   .hi = q.offset + 0.5f});
      t.push_back(
          {.name = "running_var", .shape = s, .role = Role::kState, .lo = 0.5f, .hi = 1.5f});
      // Two training calls: the running statistics must follow each model's own updates.
      if (p.training) t.push_back({.name = "x_prev", .shape = x, .lo = lo, .hi = hi});
    }
    if (p.affine)
      for (const char* name : {"gamma", "beta"}) {
        t.push_back({.name = name, .shape = s});
        t.push_back({.name = std::string("d") + name, .shape = s, .role = Role::kParamGrad});
      }
    if (!c.no_dx) t.push_back({.name = "dx", .shape = x, .role = Role::kInputGrad});
    return t;
  }
  static void run(const Bn1Params& q, const test::Views& v, const test::RunContext& ctx) {
    const BatchNorm1dParams p = q.params();
    const BatchNorm1dSaved saved{.mean = v("mean"), .rstd = v("rstd")};
    BatchNorm1dForwardArgs f{.x = v("x_prev"),
                             .gamma = v("gamma"),
                             .beta = v("beta"),
                             .running_mean = v("running_mean"),
                             .running_var = v("running_var"),
                             .saved = saved,
                             .y = v("y")};
    auto forward = ctx.ref ? ref::batchnorm1d_forward : batchnorm1d_forward;
    if (!f.x.empty()) forward(p, f);
    f.x = v("x");
    forward(p, f);
    if (ctx.forward_only) return;
    const BatchNorm1dBackwardArgs b{.x = v("x"),
                                    .gamma = v("gamma"),
                                    .beta = v("beta"),
                                    .y = v("y"),
                                    .saved = saved,
                                    .dy = v("dy"),
                                    .dx = v("dx"),
                                    .dgamma = v("dgamma"),
                                    .dbeta = v("dbeta"),
                                    .accumulate_dx = ctx.accumulate_dx};
    (ctx.ref ? ref::batchnorm1d_backward : batchnorm1d_backward)(p, b);
  }
  // The CPU kernel accumulates its statistics in double like the reference (only the order
  // differs), so the differences come from the float roundings after them: the saved mean
  // (relative u, i.e. u*max|x| absolute, reaching y times rstd), the float scale and the
  // coefficients of dx, and the few float operations per element. e = 16u covers those
  // handful of roundings with a factor ~4 of margin; each tolerance is e times the magnitude its
  // error terms multiply (|dy|, |beta| <= 1 by construction), as in test_batchnorm2d.cpp.
  static std::pair<double, double> tolerance(const Bn1Params& q, const test::Views& v,
                                             const TensorSpec& s) {
    const BatchNorm1dParams p = q.params();
    const double e = 16.0 * kUnitRoundoff;
    const TensorView x = v("x"), mean = v("mean"), rstd = v("rstd");
    const double x_max = std::max(max_abs(x), max_abs(v("x_prev")));
    const double rstd_max = max_abs(rstd), gamma_max = p.affine ? max_abs(v("gamma")) : 1.0;
    double xhat_max = 0.0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t c = i % p.C;
      xhat_max = std::max(xhat_max, std::fabs(double(x.data[i]) - mean.data[c]) * rstd.data[c]);
    }
    const double mean_shift = x_max * rstd_max;  // a mean error of e*x_max, in units of std
    double t = 0.0;
    if (s.name == "y") {
      t = e * (gamma_max * (mean_shift + xhat_max + 1.0) + 1.0);
    } else if (s.name == "dx") {
      t = e * gamma_max * rstd_max * (1.0 + xhat_max * (xhat_max + 2.0 * mean_shift));
    } else if (s.name == "dgamma" || s.name == "dbeta") {
      // Both sum dy and dy*(x - saved mean) in double from the same float inputs and scale by
      // the same saved rstd: only the final rounding (and the += onto the start) differ.
      return {e, e};
    } else if (s.name == "running_mean" || s.name == "running_var") {
      t = p.training ? e * (x_max * x_max + 2.0) : 0.0;
    } else if (s.name == "mean") {
      t = e * x_max;
    } else if (s.name == "rstd") {
      return {0.0, e};
    }
    return {t, t};
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() {
    return {{"x", "dx"}, {"gamma", "dgamma"}, {"beta", "dbeta"}};
  }
  // As test_batchnorm2d.cpp: L = sum(y * dy) over <= 48 outputs with |y| <= 3, eps = 1e-2:
  // rounding ~4e-4 after dividing by 2*eps, truncation ~2e-5.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 1e-3, 1e-3}; }
};

// C on both sides of a 16-float vector; R*C below and above the kernel's 16K-element chunk (one,
// a few, and the maximum 16 chunks per model, with a short last chunk); R = 2 (the smallest
// training batch); momentum 0 and 1; |mean| >> std; large eps; training with and without
// running statistics and eval; B in {1, 2, 3, 8}; 1 to 3 threads.
std::vector<OpCase<Bn1Params>> batchnorm1d_cases() {
  struct Size {
    int64_t R, C;
    bool affine;
    double momentum = 0.1;
    float offset = 0.0f;
    double eps = 1e-5;
  };
  const Size sizes[] = {
      {2, 1, true},                   // R = 2
      {7, 5, true},                   // odd sizes
      {9, 3, false},                  // no affine
      {5, 15, true},                  // C = 15
      {4, 16, false},                 // C = 16
      {6, 17, true},                  // C = 17
      {12, 64, true},                 // C = 64: four vectors
      {1100, 33, true},               // 2 chunks of 550 rows
      {2047, 40, true, 0.1, 3.0f},    // 4 chunks, the last one short, |mean| > std
      {6000, 64, true},               // 16 chunks (the maximum), the last one short
      {8, 3, true, 1.0},              // momentum 1: running = batch statistics
      {6, 4, true, 0.0},              // momentum 0: running unchanged
      {15, 9, true, 0.1, 5.0f},       // |mean| >> std
      {10, 4, true, 0.3, 0.0f, 0.5},  // large eps
      {12, 2, true},                  // small enough for finite differences
      {16, 3, false},                 // finite differences without affine
  };
  std::vector<OpCase<Bn1Params>> cases;
  int k = 0;
  for (int with_activation = 0; with_activation < 2; ++with_activation)
    for (const Size& s : sizes)
      for (int mode = 0; mode < 3; ++mode)  // training, training without running stats, eval
        for (int64_t B : test::model_counts()) {
          if (s.R * s.C > 50000 && B == 3) continue;  // keep the reference's time in check
          if (with_activation && s.R * s.C > 50000) continue;
          OpCase<Bn1Params> c;
          c.p.bn =
              BatchNorm1dParams{.R = s.R,
                                .C = s.C,
                                .eps = s.eps,
                                .momentum = s.momentum,
                                .affine = s.affine,
                                .training = mode != 2,
                                .activation = test::harness_activation(with_activation != 0, k)};
          test::set_batchnorm_case(c, s, mode, B, s.R + s.C, k);
          // Finite differences step across the activations' kinks.
          c.fd = B == 1 && s.R >= 12 && s.R * s.C <= 48 && s.offset == 0 && !c.p.bn.activation;
          c.name = fmt::format("R{}_C{}", s.R, s.C) + test::batchnorm_case_name(c, s, mode);
          cases.push_back(c);
        }
  return cases;
}

class BatchNorm1dHarness : public ::testing::TestWithParam<OpCase<Bn1Params>> {};
TEST_P(BatchNorm1dHarness, FusedEqualsSerial) { test::run_case<BatchNorm1dOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, BatchNorm1dHarness, ::testing::ValuesIn(batchnorm1d_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one), without fused activations (CPU only).
std::vector<OpCase<Bn1Params>> device_batchnorm1d_cases() {
  std::vector<OpCase<Bn1Params>> cases = batchnorm1d_cases();
  std::erase_if(cases, [](const OpCase<Bn1Params>& c) { return c.p.bn.activation.has_value(); });
  return test::device_cases<BatchNorm1dOp>(cases, Device::kCuda);
}
INSTANTIATE_TEST_SUITE_P(OnCuda, BatchNorm1dHarness,
                         ::testing::ValuesIn(device_batchnorm1d_cases()), test::CaseName());

// A fused activation gives, bit for bit, what BatchNorm1d and then the activation op give (the
// activation in place over BatchNorm's output, as a Net runs them), forward and backward,
// written and accumulated, training and eval, with rows split into several chunks, 1 to 3
// threads. gamma and beta spread the normalized values over both of ReLU6's clamps; outputs
// start as garbage.
TEST(BatchNorm1d, FusedActivationEqualsTheTwoOpsBitForBit) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 7);
  const std::pair<int64_t, int64_t> sizes[] = {{7, 5}, {12, 64}, {1100, 33}, {300, 17}};
  int k = 0;
  for (const auto& [R, C] : sizes)
    for (const ActivationParams& act : test::fusable_activations())
      for (bool training : {true, false})
        for (bool accumulate : {false, true}) {
          const int threads = 1 + k++ % 3;
          cpu::set_num_threads(threads);
          const BatchNorm1dParams p{
              .B = 3, .R = R, .C = C, .training = training, .activation = act};
          SCOPED_TRACE(fmt::format("R={} C={} {} {} {} {} threads={}", R, C,
                                   activation_name(act.kind), act.negative_slope,
                                   training ? "training" : "eval",
                                   accumulate ? "accumulate" : "write", threads));
          test::NormInputs in(p.x_shape(), p.param_shape(), rng);
          auto run = [&](bool fuse) {
            return test::run_norm(p, fuse, in, accumulate, batchnorm1d_forward,
                                  batchnorm1d_backward);
          };
          test::expect_same_outputs(run(true), run(false),
                                    act.kind == ActivationKind::kRelu6 && R >= 12);
        }
}

// The same data through this op and through batchnorm2d on the channels layout [N, B*C, 1, L]
// (torch's BatchNorm1d on [N, C, L] inputs): model b's rows r = n*L + l of channel c are
// x[n, b*C + c, 0, l]. Both must give the same outputs, statistics, running statistics and
// gradients, in training and eval, for every B; so BatchNorm1d in PointNet's channels form needs
// no op of its own. The two kernels sum in different orders (double here, float rows of L there):
// tolerance as batchnorm2d's, 4 * (L + 8) * u on the scale of each quantity.
TEST(BatchNorm1d, ChannelsLayoutIsBatchNorm2dWithHeightOne) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  const int64_t N = 3, C = 17, L = 21;
  for (int64_t B : test::model_counts())
    for (bool training : {true, false}) {
      SCOPED_TRACE(fmt::format("B={} training={}", B, training));
      RngStream rng(seed, static_cast<uint64_t>(B * 2 + training));
      const BatchNorm2dParams p2{
          .B = B, .N = N, .C = C, .H = 1, .W = L, .momentum = 0.2, .training = training};
      const BatchNorm1dParams p1{.B = B, .R = N * L, .C = C, .momentum = 0.2, .training = training};
      Buffer xc = random_buffer(p2.x_shape(), rng, 1.0f, 3.0f);
      Buffer dyc = random_buffer(p2.y_shape(), rng);
      Buffer gamma = random_buffer(p1.param_shape(), rng),
             beta = random_buffer(p1.param_shape(), rng);
      Buffer rmean = random_buffer(p1.param_shape(), rng, 1.5f, 2.5f);
      Buffer rvar = random_buffer(p1.param_shape(), rng, 0.2f, 0.5f);
      // channels [N, B*C, 1, L] -> rows [B, N*L, C], or back.
      auto rows_at = [&](int64_t n, int64_t b, int64_t c, int64_t l) {
        return (b * N * L + n * L + l) * C + c;
      };
      auto channels_at = [&](int64_t n, int64_t b, int64_t c, int64_t l) {
        return ((n * B + b) * C + c) * L + l;
      };
      auto to_rows = [&](const Buffer& from) {
        Buffer out(p1.x_shape());
        for (int64_t n = 0; n < N; ++n)
          for (int64_t b = 0; b < B; ++b)
            for (int64_t c = 0; c < C; ++c)
              for (int64_t l = 0; l < L; ++l)
                out.values[rows_at(n, b, c, l)] = from.values[channels_at(n, b, c, l)];
        return out;
      };
      Buffer xr = to_rows(xc), dyr = to_rows(dyc);
      struct Run {
        Buffer y, mean, rstd, rmean, rvar, dx, dgamma, dbeta;
      };
      auto make_run = [&](const Shape& x_shape) {
        const Shape s = p1.param_shape();
        return Run{Buffer(x_shape), Buffer(s), Buffer(s), rmean, rvar,
                   Buffer(x_shape), Buffer(s), Buffer(s)};
      };
      Run one = make_run(p1.x_shape()), two = make_run(p2.x_shape());
      batchnorm1d_forward(p1, {.x = xr.view(),
                               .gamma = gamma.view(),
                               .beta = beta.view(),
                               .running_mean = one.rmean.view(),
                               .running_var = one.rvar.view(),
                               .saved = {.mean = one.mean.view(), .rstd = one.rstd.view()},
                               .y = one.y.view()});
      batchnorm1d_backward(p1, {.x = xr.view(),
                                .gamma = gamma.view(),
                                .saved = {.mean = one.mean.view(), .rstd = one.rstd.view()},
                                .dy = dyr.view(),
                                .dx = one.dx.view(),
                                .dgamma = one.dgamma.view(),
                                .dbeta = one.dbeta.view()});
      batchnorm2d_forward(p2, {.x = xc.view(),
                               .gamma = gamma.view(),
                               .beta = beta.view(),
                               .running_mean = two.rmean.view(),
                               .running_var = two.rvar.view(),
                               .saved = {.mean = two.mean.view(), .rstd = two.rstd.view()},
                               .y = two.y.view()});
      batchnorm2d_backward(p2, {.x = xc.view(),
                                .gamma = gamma.view(),
                                .saved = {.mean = two.mean.view(), .rstd = two.rstd.view()},
                                .dy = dyc.view(),
                                .dx = two.dx.view(),
                                .dgamma = two.dgamma.view(),
                                .dbeta = two.dbeta.view()});
      // x in [1, 3] (|mean| ~ 2 ~ 3 std), rstd <= ~3.2 (eval: running_var >= 0.2), |gamma| <= 1.
      const double e = 4.0 * double(L + 8) * kUnitRoundoff, M = double(N * L);
      const double y_tol = e * 20.0, dx_tol = e * 3.2 * 40.0, sum_tol = e * M * 10.0;
      expect_close(to_rows(two.y), one.y, y_tol, y_tol, "y");
      expect_close(to_rows(two.dx), one.dx, dx_tol, dx_tol, "dx");
      expect_close(two.mean, one.mean, e * 3.0, e, "saved mean");
      expect_close(two.rstd, one.rstd, 0.0, e * 4.0, "saved rstd");
      expect_close(two.rmean, one.rmean, e * 3.0, e, "running_mean");
      expect_close(two.rvar, one.rvar, e * 10.0, e, "running_var");
      expect_close(two.dgamma, one.dgamma, sum_tol, e, "dgamma");
      expect_close(two.dbeta, one.dbeta, sum_tol, e, "dbeta");
    }
}

// PyTorch's semantics on numbers worked by hand: one channel holding 1, 2, 3, 4 has batch mean
// 2.5, biased variance 1.25 (used to normalize) and unbiased variance 5/3 (used for running_var).
// A second model (B = 2) holds 2, 4, 6, 8: mean 5, biased variance 5, unbiased 20/3.
TEST(BatchNorm1d, MatchesPyTorchSemanticsByHand) {
  BatchNorm1dParams p{.B = 2, .R = 4, .C = 1, .affine = false};
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fused" : "reference");
    Buffer x(p.x_shape()), y(p.y_shape()), mean(p.param_shape()), rstd(p.param_shape());
    x.values = {1.0f, 2.0f, 3.0f, 4.0f, 2.0f, 4.0f, 6.0f, 8.0f};
    Buffer rmean(p.param_shape(), 0.0f), rvar(p.param_shape(), 1.0f);
    auto forward = fused ? batchnorm1d_forward : ref::batchnorm1d_forward;
    forward(p, {.x = x.view(),
                .running_mean = rmean.view(),
                .running_var = rvar.view(),
                .saved = {.mean = mean.view(), .rstd = rstd.view()},
                .y = y.view()});
    const double r0 = 1.0 / std::sqrt(1.25 + 1e-5), r1 = 1.0 / std::sqrt(5.0 + 1e-5);
    EXPECT_NEAR(y.values[0], -1.5 * r0, 1e-6);
    EXPECT_NEAR(y.values[3], 1.5 * r0, 1e-6);
    EXPECT_NEAR(y.values[4], -3.0 * r1, 1e-6);
    EXPECT_NEAR(mean.values[0], 2.5, 1e-6);
    EXPECT_NEAR(mean.values[1], 5.0, 1e-6);
    EXPECT_NEAR(rstd.values[1], r1, 1e-6);
    EXPECT_NEAR(rmean.values[0], 0.25, 1e-6);
    EXPECT_NEAR(rvar.values[0], 0.9 + 0.1 * (5.0 / 3.0), 1e-6);
    EXPECT_NEAR(rmean.values[1], 0.5, 1e-6);
    EXPECT_NEAR(rvar.values[1], 0.9 + 0.1 * (20.0 / 3.0), 1e-6);
  }
}

// Eval: running statistics, eps inside the square root, affine-only gradient.
TEST(BatchNorm1d, EvalUsesRunningStatisticsByHand) {
  BatchNorm1dParams p{.B = 1, .R = 2, .C = 1, .training = false};
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fused" : "reference");
    Buffer x(p.x_shape()), y(p.y_shape()), mean(p.param_shape()), rstd(p.param_shape());
    Buffer gamma(p.param_shape(), 2.0f), beta(p.param_shape(), 0.5f);
    Buffer rmean(p.param_shape(), 1.0f), rvar(p.param_shape(), 3.0f);
    Buffer dy(p.y_shape()), dx(p.x_shape()), dgamma(p.param_shape()), dbeta(p.param_shape());
    x.values = {3.0f, -1.0f};
    dy.values = {1.0f, 0.5f};
    const BatchNorm1dSaved saved{.mean = mean.view(), .rstd = rstd.view()};
    (fused ? batchnorm1d_forward : ref::batchnorm1d_forward)(p, {.x = x.view(),
                                                                 .gamma = gamma.view(),
                                                                 .beta = beta.view(),
                                                                 .running_mean = rmean.view(),
                                                                 .running_var = rvar.view(),
                                                                 .saved = saved,
                                                                 .y = y.view()});
    (fused ? batchnorm1d_backward : ref::batchnorm1d_backward)(p, {.x = x.view(),
                                                                   .gamma = gamma.view(),
                                                                   .saved = saved,
                                                                   .dy = dy.view(),
                                                                   .dx = dx.view(),
                                                                   .dgamma = dgamma.view(),
                                                                   .dbeta = dbeta.view()});
    const double r = 1.0 / std::sqrt(3.0 + 1e-5);
    EXPECT_NEAR(y.values[0], 2.0 * r * 2.0 + 0.5, 1e-6);
    EXPECT_NEAR(y.values[1], -2.0 * r * 2.0 + 0.5, 1e-6);
    EXPECT_EQ(rmean.values[0], 1.0f);
    EXPECT_EQ(rvar.values[0], 3.0f);
    EXPECT_NEAR(dx.values[0], 2.0 * r, 1e-6);
    EXPECT_NEAR(dx.values[1], 0.5 * 2.0 * r, 1e-6);
    EXPECT_NEAR(dgamma.values[0], 1.0 * 2.0 * r - 0.5 * 2.0 * r, 1e-6);
    EXPECT_NEAR(dbeta.values[0], 1.5, 1e-6);
  }
}

TEST(BatchNorm1d, BadShapesAndHyperparametersRaiseClearErrors) {
  const BatchNorm1dParams p{.B = 2, .R = 10, .C = 4};
  Buffer x(p.x_shape()), y(p.y_shape()), gamma(p.param_shape()), beta(p.param_shape());
  Buffer rmean(p.param_shape()), rvar(p.param_shape(), 1.0f);
  Buffer mean(p.param_shape()), rstd(p.param_shape());
  const BatchNorm1dSaved saved{.mean = mean.view(), .rstd = rstd.view()};
  auto forward = [&](const BatchNorm1dParams& q, TensorView xv, TensorView rm, TensorView rv) {
    return [=, &gamma, &beta, &y] {
      batchnorm1d_forward(q, {.x = xv,
                              .gamma = gamma.view(),
                              .beta = beta.view(),
                              .running_mean = rm,
                              .running_var = rv,
                              .saved = saved,
                              .y = y.view()});
    };
  };
  Buffer channels_x(Shape{10, 8});  // forgot the models' axis
  expect_error_containing(forward(p, channels_x.view(), rmean.view(), rvar.view()),
                          "batchnorm1d input has shape [10, 8], expected [2, 10, 4]");
  BatchNorm1dParams bad = p;
  bad.momentum = 1.5;
  expect_error_containing(forward(bad, x.view(), rmean.view(), rvar.view()),
                          "batchnorm1d momentum is 1.5, expected a value in [0, 1]");
  bad = p;
  bad.eps = 0.0;
  expect_error_containing(forward(bad, x.view(), rmean.view(), rvar.view()),
                          "expected a finite value > 0");
  bad = p;
  bad.C = 0;
  expect_error_containing(forward(bad, x.view(), rmean.view(), rvar.view()),
                          "batchnorm1d sizes must be positive");
  const BatchNorm1dParams single{.B = 2, .R = 1, .C = 4};
  Buffer x1(single.x_shape()), y1(single.y_shape());
  expect_error_containing(
      [&] {
        batchnorm1d_forward(single, {.x = x1.view(),
                                     .gamma = gamma.view(),
                                     .beta = beta.view(),
                                     .saved = saved,
                                     .y = y1.view()});
      },
      "R = 1 row per model");
  expect_error_containing(forward(p, x.view(), rmean.view(), {}), "pass both");
  bad = p;
  bad.training = false;
  expect_error_containing(forward(bad, x.view(), {}, {}), "running_mean (required in eval mode)");
  Buffer wrong_dx(Shape{2, 10, 5});
  expect_error_containing(
      [&] {
        batchnorm1d_backward(p, {.x = x.view(),
                                 .gamma = gamma.view(),
                                 .saved = saved,
                                 .dy = y.view(),
                                 .dx = wrong_dx.view()});
      },
      "batchnorm1d input gradient has shape [2, 10, 5], expected [2, 10, 4]");
  expect_error_containing(
      [&] {
        batchnorm1d_backward(p, {.x = x.view(),
                                 .gamma = gamma.view(),
                                 .saved = {.mean = mean.view()},
                                 .dy = y.view(),
                                 .dx = x.view()});
      },
      "batchnorm1d saved.rstd is missing");
}

}  // namespace
}  // namespace hfta
