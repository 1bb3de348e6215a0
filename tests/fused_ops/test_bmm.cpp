// Fused per-sample matrix products (PointNet's transforms) on the op harness
// (tests/op_harness.h): fused(B) equals B reference single-model runs for y, dx and dt (written
// and accumulated), on both GEMM backends, across models and inside each GEMM, with K and M on
// both sides of the 16-float vector width; reference gradients equal finite differences; each
// gradient honours its own accumulate flag and may be skipped; bad shapes raise hfta::Error.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "fused_ops/bmm.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::expect_error_containing;
using test::OpCase;
using test::random_buffer;
using test::Role;
using test::TensorSpec;

constexpr double kUnitRoundoff = 1.0 / (1 << 24);  // float's u = 2^-24

// max over the outputs of one product C[i, j] = sum_k A(i, k) B(k, j) of sum_k |A(i, k) B(k, j)|,
// with A and B given by element accessors.
template <typename FA, typename FB>
double max_abs_sum(int64_t rows, int64_t cols, int64_t inner, FA&& a, FB&& b) {
  double worst = 0.0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      double s = 0.0;
      for (int64_t k = 0; k < inner; ++k) s += std::fabs(double(a(i, k)) * b(k, j));
      worst = std::max(worst, s);
    }
  return worst;
}

struct BmmOp {
  using Params = BmmParams;
  static std::string describe(const BmmParams& p) {
    return fmt::format("N={} L={} K={} M={}", p.N, p.L, p.K, p.M);
  }
  static std::vector<TensorSpec> tensors(const BmmParams& p, const OpCase<BmmParams>& c) {
    std::vector<TensorSpec> t = {{.name = "x", .shape = p.x_shape()},
                                 {.name = "t", .shape = p.t_shape()},
                                 {.name = "dy", .shape = p.y_shape()},
                                 {.name = "y", .shape = p.y_shape(), .role = Role::kOutput},
                                 {.name = "dt", .shape = p.t_shape(), .role = Role::kInputGrad}};
    if (!c.no_dx) t.push_back({.name = "dx", .shape = p.x_shape(), .role = Role::kInputGrad});
    return t;
  }
  static void run(const BmmParams& p, const test::Views& v, const test::RunContext& ctx) {
    (ctx.ref ? ref::bmm_forward : bmm_forward)(p, {.x = v("x"), .t = v("t"), .y = v("y")});
    if (ctx.forward_only) return;
    (ctx.ref ? ref::bmm_backward : bmm_backward)(p, {.x = v("x"),
                                                     .t = v("t"),
                                                     .dy = v("dy"),
                                                     .dx = v("dx"),
                                                     .dt = v("dt"),
                                                     .accumulate_dx = ctx.accumulate_dx,
                                                     .accumulate_dt = ctx.accumulate_dx});
  }
  // A float dot product of n terms errs by at most n*u*sum|terms| (any summation order, blocked
  // or not), plus u*|result| for the final rounding of the reference and u*|start| for an
  // accumulated start (|start| <= 1). The bound uses model b's own data for each product.
  static std::pair<double, double> tolerance(const BmmParams& p, const test::Views& v,
                                             const TensorSpec& s) {
    const int64_t L = p.L, K = p.K, M = p.M;
    const float *x = v("x").data, *t = v("t").data, *dy = v("dy").data;
    double sum = 0.0;
    int64_t inner = 1;
    for (int64_t i = 0; i < p.N; ++i) {
      const float *xi = x + i * L * K, *ti = t + i * K * M, *dyi = dy + i * L * M;
      if (s.name == "y") {
        inner = K;
        sum = std::max(sum, max_abs_sum(
                                L, M, K, [&](int64_t l, int64_t k) { return xi[l * K + k]; },
                                [&](int64_t k, int64_t m) { return ti[k * M + m]; }));
      } else if (s.name == "dx") {
        inner = M;
        sum = std::max(sum, max_abs_sum(
                                L, K, M, [&](int64_t l, int64_t m) { return dyi[l * M + m]; },
                                [&](int64_t m, int64_t k) { return ti[k * M + m]; }));
      } else if (s.name == "dt") {
        inner = L;
        sum = std::max(sum, max_abs_sum(
                                K, M, L, [&](int64_t k, int64_t l) { return xi[l * K + k]; },
                                [&](int64_t l, int64_t m) { return dyi[l * M + m]; }));
      }
    }
    return {double(inner + 2) * kUnitRoundoff * (sum + 1.0), 2.0 * kUnitRoundoff};
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() {
    return {{"x", "dx"}, {"t", "dt"}};
  }
  // Bilinear, so central differences have no truncation error in each argument alone; rounding
  // y to float moves L = sum(y * dy) by at most numel(y) * u * max|y| ~ 60 * 6e-8 * 4 = 1.4e-5,
  // 7e-4 after dividing by 2*eps.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 2e-3, 2e-3}; }
};

// K and M: PointNet's 3 and 64, and both sides of 16; L up to a few hundred points; problems
// B*N below, at and above the thread count (across models vs inside each GEMM), both GEMM
// libraries; B in {1, 2, 3, 8}.
std::vector<OpCase<BmmParams>> bmm_cases() {
  struct Size {
    int64_t N, L, K, M;
    bool fd = false;
  };
  const Size sizes[] = {
      {1, 1, 1, 1},    {2, 7, 3, 3},       {3, 50, 3, 64},     {2, 33, 64, 3},
      {1, 40, 15, 17}, {2, 17, 16, 16},    {1, 20, 17, 15},    {2, 120, 64, 64},
      {4, 300, 3, 3},  {1, 5, 2, 3, true}, {2, 3, 3, 2, true},
  };
  std::vector<OpCase<BmmParams>> cases;
  int k = 0;
  for (const Size& s : sizes)
    for (int64_t B : test::model_counts()) {
      OpCase<BmmParams> c;
      c.p = BmmParams{.N = s.N, .L = s.L, .K = s.K, .M = s.M};
      c.B = B;
      c.threads = 1 + (k % 3);
      c.gemm = k % 2 == 0 ? cpu::GemmBackend::kOneDnn : cpu::GemmBackend::kOpenBlas;
      c.parallelism = k % 5 == 4 ? cpu::ModelParallelism::kInsideOp : cpu::ModelParallelism::kAuto;
      ++k;
      c.accumulate_dx = (s.L + s.K + B) % 2 == 1;
      c.no_dx = s.N == 2 && B == 3;
      c.fd = s.fd && B == 1;
      c.name =
          fmt::format("N{}_L{}_K{}_M{}_B{}_t{}_{}{}{}{}{}", s.N, s.L, s.K, s.M, B, c.threads,
                      c.gemm == cpu::GemmBackend::kOneDnn ? "onednn" : "openblas",
                      c.parallelism == cpu::ModelParallelism::kInsideOp ? "_inside" : "",
                      c.accumulate_dx ? "_acc" : "", c.no_dx ? "_nodx" : "", c.fd ? "_fd" : "");
      cases.push_back(c);
    }
  return cases;
}

class BmmHarness : public ::testing::TestWithParam<OpCase<BmmParams>> {};
TEST_P(BmmHarness, FusedEqualsSerial) { test::run_case<BmmOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, BmmHarness, ::testing::ValuesIn(bmm_cases()), test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCuda, BmmHarness,
                         ::testing::ValuesIn(test::device_cases<BmmOp>(bmm_cases(), Device::kCuda)),
                         test::CaseName());

// Each gradient follows its own accumulate flag (the harness sets both alike), and an empty one
// is skipped without changing the other: every combination against the reference, fused B = 3.
TEST(Bmm, GradientsFollowTheirOwnAccumulateFlags) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 1);
  const BmmParams p{.B = 3, .N = 2, .L = 19, .K = 3, .M = 17};
  Buffer x = random_buffer(p.x_shape(), rng), t = random_buffer(p.t_shape(), rng);
  Buffer dy = random_buffer(p.y_shape(), rng);
  const Buffer dx0 = random_buffer(p.x_shape(), rng), dt0 = random_buffer(p.t_shape(), rng);
  for (int flags = 0; flags < 4; ++flags)
    for (int wanted = 1; wanted < 4; ++wanted) {  // bit 0: dx, bit 1: dt
      const bool acc_dx = flags & 1, acc_dt = flags & 2;
      SCOPED_TRACE(
          fmt::format("accumulate_dx={} accumulate_dt={} wanted={}", acc_dx, acc_dt, wanted));
      auto start = [](const Buffer& random, bool accumulate) {
        return accumulate ? random : Buffer(random.shape, std::numeric_limits<float>::quiet_NaN());
      };
      Buffer dx = start(dx0, acc_dx), dt = start(dt0, acc_dt);
      Buffer dx_ref = dx, dt_ref = dt;
      const Buffer dx_before = dx, dt_before = dt;
      const bool want_dx = wanted & 1, want_dt = wanted & 2;
      bmm_backward(p, {.x = x.view(),
                       .t = t.view(),
                       .dy = dy.view(),
                       .dx = want_dx ? dx.view() : TensorView(),
                       .dt = want_dt ? dt.view() : TensorView(),
                       .accumulate_dx = acc_dx,
                       .accumulate_dt = acc_dt});
      ref::bmm_backward(p, {.x = x.view(),
                            .t = t.view(),
                            .dy = dy.view(),
                            .dx = dx_ref.view(),
                            .dt = dt_ref.view(),
                            .accumulate_dx = acc_dx,
                            .accumulate_dt = acc_dt});
      // Sums of at most 19 products of values in [-1, 1] plus a start in [-1, 1].
      const double tol = 24.0 * 20.0 * kUnitRoundoff;
      if (want_dx)
        expect_close(dx, dx_ref, tol, tol, "dx");
      else
        EXPECT_EQ(std::memcmp(dx.data(), dx_before.values.data(), sizeof(float) * dx.numel()), 0);
      if (want_dt)
        expect_close(dt, dt_ref, tol, tol, "dt");
      else
        EXPECT_EQ(std::memcmp(dt.data(), dt_before.values.data(), sizeof(float) * dt.numel()), 0);
    }
}

// A product by hand: model 1, sample 0 of B = 2, N = 1: [1 2; 3 4] @ [1 0 2; 0 1 -1].
TEST(Bmm, ProductByHand) {
  const BmmParams p{.B = 2, .N = 1, .L = 2, .K = 2, .M = 3};
  Buffer x(p.x_shape()), t(p.t_shape()), y(p.y_shape());
  x.values = {0, 0, 0, 0, 1, 2, 3, 4};
  t.values = {0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 1, -1};
  bmm_forward(p, {.x = x.view(), .t = t.view(), .y = y.view()});
  const std::vector<float> want = {0, 0, 0, 0, 0, 0, 1, 2, 0, 3, 4, 2};
  EXPECT_EQ(y.values, want);
  EXPECT_DOUBLE_EQ(p.forward_flops(), 2.0 * 2 * 1 * 2 * 2 * 3);
}

TEST(Bmm, BadShapesRaiseClearErrors) {
  const BmmParams p{.B = 2, .N = 3, .L = 5, .K = 3, .M = 4};
  Buffer x(p.x_shape()), t(p.t_shape()), y(p.y_shape());
  Buffer t_transposed(Shape{2, 3, 4, 3});
  expect_error_containing(
      [&] { bmm_forward(p, {.x = x.view(), .t = t_transposed.view(), .y = y.view()}); },
      "bmm input t (one K x M matrix per sample) has shape [2, 3, 4, 3], expected [2, 3, 3, 4]");
  Buffer rows_x(Shape{2, 15, 3});  // the rows layout without the samples split out
  expect_error_containing(
      [&] { bmm_forward(p, {.x = rows_x.view(), .t = t.view(), .y = y.view()}); },
      "bmm input x has shape [2, 15, 3], expected [2, 3, 5, 3]");
  expect_error_containing([&] { bmm_forward(p, {.x = x.view(), .t = t.view()}); },
                          "bmm output is missing");
  BmmParams bad = p;
  bad.K = 0;
  expect_error_containing([&] { bmm_forward(bad, {.x = x.view(), .t = t.view(), .y = y.view()}); },
                          "bmm sizes must be positive");
  expect_error_containing(
      [&] { bmm_backward(p, {.x = x.view(), .t = t.view(), .dy = y.view(), .dt = x.view()}); },
      "bmm t gradient has shape [2, 3, 5, 3], expected [2, 3, 3, 4]");
  expect_error_containing([&] { bmm_backward(p, {.x = x.view(), .t = t.view(), .dy = x.view()}); },
                          "bmm output gradient has shape");
}

}  // namespace
}  // namespace hfta
