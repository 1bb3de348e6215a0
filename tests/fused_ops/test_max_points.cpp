// Max over points on the op harness (tests/op_harness.h): fused(B) equals B reference
// single-model runs exactly (y, argmax, dx written and accumulated), with ties (the first maximum
// must win), C on both sides of the 16-float vector width and of the kernel's 256-channel block;
// reference gradients equal finite differences; NaN, -inf and ties by hand; forward without
// argmax; bad shapes raise hfta::Error.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "fused_ops/max_points.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::expect_error_containing;
using test::Fill;
using test::OpCase;
using test::random_buffer;
using test::Role;
using test::TensorSpec;

// A selection and at most one addition per element: every comparison is exact.
struct MaxOverPointsOp {
  using Params = MaxOverPointsParams;
  static std::string describe(const MaxOverPointsParams& p) {
    return fmt::format("N={} L={} C={}", p.N, p.L, p.C);
  }
  static std::vector<TensorSpec> tensors(const MaxOverPointsParams& p,
                                         const OpCase<MaxOverPointsParams>& c) {
    // Finite differences need distinct values 2*eps apart (numel <= 40 over [-1, 1]); otherwise
    // ties, so the first maximum must win.
    const Fill fill = c.fd ? Fill::kDistinct : Fill::kTies;
    return {{.name = "x", .shape = p.x_shape(), .fill = fill},
            {.name = "dy", .shape = p.y_shape()},
            {.name = "y", .shape = p.y_shape(), .role = Role::kOutput, .atol = 0, .rtol = 0},
            {.name = "argmax", .shape = p.argmax_shape(), .role = Role::kSaved, .is_index = true},
            {.name = "dx", .shape = p.x_shape(), .role = Role::kInputGrad, .atol = 0, .rtol = 0}};
  }
  static void run(const MaxOverPointsParams& p, const test::Views& v, const test::RunContext& ctx) {
    const MaxOverPointsSaved saved{.argmax = v.index("argmax")};
    (ctx.ref ? ref::max_over_points_forward : max_over_points_forward)(
        p, {.x = v("x"), .saved = saved, .y = v("y")});
    if (ctx.forward_only) return;
    (ctx.ref ? ref::max_over_points_backward : max_over_points_backward)(
        p, {.saved = saved, .dy = v("dy"), .dx = v("dx"), .accumulate_dx = ctx.accumulate_dx});
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() { return {{"x", "dx"}}; }
  // Piecewise linear and no value within 2*eps of another: exact up to rounding L (|y| <= 1,
  // at most 8 outputs) over 2*eps.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 1e-4, 1e-4}; }
};

std::vector<OpCase<MaxOverPointsParams>> max_cases() {
  struct Size {
    int64_t N, L, C;
    bool fd = false;
  };
  const Size sizes[] = {
      {1, 1, 1},   {2, 5, 3},   {3, 17, 15}, {2, 9, 16},   {1, 33, 17},     {2, 40, 64},
      {1, 7, 255}, {2, 6, 256}, {1, 5, 257}, {3, 50, 600}, {1, 4, 5, true}, {2, 3, 4, true},
  };
  std::vector<OpCase<MaxOverPointsParams>> cases;
  int k = 0;
  for (const Size& s : sizes)
    for (int64_t B : test::model_counts()) {
      OpCase<MaxOverPointsParams> c;
      c.p = MaxOverPointsParams{.N = s.N, .L = s.L, .C = s.C};
      c.B = B;
      c.threads = 1 + (k++ % 3);
      c.accumulate_dx = (s.L + s.C + B) % 2 == 1;
      c.fd = s.fd && B == 1;
      c.name = fmt::format("N{}_L{}_C{}_B{}_t{}{}{}", s.N, s.L, s.C, B, c.threads,
                           c.accumulate_dx ? "_acc" : "", c.fd ? "_fd" : "");
      cases.push_back(c);
    }
  return cases;
}

class MaxOverPointsHarness : public ::testing::TestWithParam<OpCase<MaxOverPointsParams>> {};
TEST_P(MaxOverPointsHarness, FusedEqualsSerial) { test::run_case<MaxOverPointsOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, MaxOverPointsHarness, ::testing::ValuesIn(max_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCuda, MaxOverPointsHarness,
                         ::testing::ValuesIn(test::device_cases<MaxOverPointsOp>(max_cases(),
                                                                                 Device::kCuda)),
                         test::CaseName());

// One channel's points by hand, as model 1 of B = 2 (model 0 holds zeros), through the fused op
// and the reference; both must agree bit for bit, NaNs included.
struct Hand {
  MaxOverPointsParams p;
  Buffer x, y;
  std::vector<int32_t> argmax;
  explicit Hand(std::vector<float> points)
      : p{.B = 2, .N = 1, .L = int64_t(points.size()), .C = 1} {
    x = Buffer(p.x_shape()), y = Buffer(p.y_shape());
    std::copy(points.begin(), points.end(), x.values.begin() + p.L);
    argmax.assign(2, -7);
    max_over_points_forward(
        p, {.x = x.view(), .saved = {IndexView(argmax.data(), p.argmax_shape())}, .y = y.view()});
    Buffer y_ref(p.y_shape());
    std::vector<int32_t> argmax_ref(2, -7);
    ref::max_over_points_forward(p, {.x = x.view(),
                                     .saved = {IndexView(argmax_ref.data(), p.argmax_shape())},
                                     .y = y_ref.view()});
    EXPECT_EQ(std::memcmp(y.data(), y_ref.data(), sizeof(float) * 2), 0) << "reference";
    EXPECT_EQ(argmax, argmax_ref) << "reference argmax";
  }
  float out() const { return y.values[1]; }
  int32_t at() const { return argmax[1]; }
};

TEST(MaxOverPoints, TorchSemanticsByHand) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Hand ties({1, 3, 2, 3});
  EXPECT_EQ(ties.out(), 3.0f);
  EXPECT_EQ(ties.at(), 1);  // the first maximum wins
  Hand flat({5, 5, 5});
  EXPECT_EQ(flat.at(), 0);
  Hand negative({-4, -3, -2, -9});
  EXPECT_EQ(negative.out(), -2.0f);
  EXPECT_EQ(negative.at(), 2);
  Hand all_inf({-inf, -inf});
  EXPECT_EQ(all_inf.out(), -inf);
  EXPECT_EQ(all_inf.at(), 0);
  Hand with_nan({1, nan, 7, nan});  // NaN propagates; argmax is the first NaN
  EXPECT_TRUE(std::isnan(with_nan.out()));
  EXPECT_EQ(with_nan.at(), 1);
  Hand first_nan({nan, 7});
  EXPECT_TRUE(std::isnan(first_nan.out()));
  EXPECT_EQ(first_nan.at(), 0);
  Hand last_nan({7, 9, nan});
  EXPECT_TRUE(std::isnan(last_nan.out()));
  EXPECT_EQ(last_nan.at(), 2);
}

// NaN in one lane of a vector must not leak into its neighbours: a row of 40 channels with a NaN
// at one point of channel 21 only.
TEST(MaxOverPoints, NanStaysInItsChannel) {
  const MaxOverPointsParams p{.B = 1, .N = 1, .L = 6, .C = 40};
  Buffer x(p.x_shape()), y(p.y_shape());
  for (int64_t i = 0; i < x.numel(); ++i) x.values[i] = float(i % 7);
  x.values[3 * 40 + 21] = std::numeric_limits<float>::quiet_NaN();
  std::vector<int32_t> argmax(40);
  max_over_points_forward(
      p, {.x = x.view(), .saved = {IndexView(argmax.data(), p.argmax_shape())}, .y = y.view()});
  for (int64_t c = 0; c < 40; ++c) {
    if (c == 21) {
      EXPECT_TRUE(std::isnan(y.values[c]));
      EXPECT_EQ(argmax[c], 3);
    } else {
      EXPECT_FALSE(std::isnan(y.values[c])) << c;
    }
  }
}

// Forward without argmax (evaluation) computes the same output.
TEST(MaxOverPoints, ForwardWithoutArgmax) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 2);
  const MaxOverPointsParams p{.B = 3, .N = 2, .L = 30, .C = 300};
  Buffer x = random_buffer(p.x_shape(), rng), y(p.y_shape()), y_eval(p.y_shape());
  std::vector<int32_t> argmax(static_cast<size_t>(p.argmax_shape().numel()));
  max_over_points_forward(
      p, {.x = x.view(), .saved = {IndexView(argmax.data(), p.argmax_shape())}, .y = y.view()});
  max_over_points_forward(p, {.x = x.view(), .saved = {}, .y = y_eval.view()});
  expect_close(y_eval, y, 0.0, 0.0, "forward without argmax");
}

TEST(MaxOverPoints, BadShapesRaiseClearErrors) {
  const MaxOverPointsParams p{.B = 2, .N = 3, .L = 5, .C = 4};
  Buffer x(p.x_shape()), y(p.y_shape()), dx(p.x_shape());
  std::vector<int32_t> argmax(24);
  const IndexView at(argmax.data(), p.argmax_shape());
  Buffer rows_x(Shape{2, 15, 4});
  expect_error_containing(
      [&] { max_over_points_forward(p, {.x = rows_x.view(), .saved = {at}, .y = y.view()}); },
      "max_over_points input has shape [2, 15, 4], expected [2, 3, 5, 4]");
  expect_error_containing(
      [&] { max_over_points_forward(p, {.x = x.view(), .saved = {at}, .y = x.view()}); },
      "max_over_points output has shape [2, 3, 5, 4], expected [2, 3, 4]");
  expect_error_containing(
      [&] {
        max_over_points_forward(
            p, {.x = x.view(), .saved = {IndexView(argmax.data(), Shape{2, 12})}, .y = y.view()});
      },
      "max_over_points saved argmax has shape [2, 12], expected [2, 3, 4]");
  MaxOverPointsParams bad = p;
  bad.L = 0;
  expect_error_containing(
      [&] { max_over_points_forward(bad, {.x = x.view(), .saved = {at}, .y = y.view()}); },
      "max_over_points sizes must be positive");
  expect_error_containing(
      [&] { max_over_points_backward(p, {.saved = {}, .dy = y.view(), .dx = dx.view()}); },
      "max_over_points backward needs the saved argmax");
  expect_error_containing(
      [&] { max_over_points_backward(p, {.saved = {at}, .dy = y.view(), .dx = y.view()}); },
      "max_over_points input gradient has shape [2, 3, 4], expected [2, 3, 5, 4]");
}

}  // namespace
}  // namespace hfta
