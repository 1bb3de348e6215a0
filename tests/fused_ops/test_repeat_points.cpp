// Repeat over points on the op harness (tests/op_harness.h): fused(B) equals B reference
// single-model runs exactly (y, and dx written and accumulated: both sum the points in the same
// order in double), with C on both sides of the 16-float vector width and of the backward's
// 256-channel block, L on both sides of the forward's 16K-float chunk; reference gradients
// equal finite differences; torch's repeat by hand; bad shapes raise hfta::Error. The harness's
// cases run again on the GPU (OnCuda, skipped without one).
#include <functional>

#include "fused_ops/repeat_points.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_error_containing;
using test::OpCase;
using test::Role;
using test::TensorSpec;

struct RepeatPointsOp {
  using Params = RepeatPointsParams;
  static std::string describe(const RepeatPointsParams& p) {
    return fmt::format("N={} L={} C={}", p.N, p.L, p.C);
  }
  static std::vector<TensorSpec> tensors(const RepeatPointsParams& p,
                                         const OpCase<RepeatPointsParams>&) {
    return {{.name = "x", .shape = p.x_shape()},
            {.name = "dy", .shape = p.y_shape()},
            {.name = "y", .shape = p.y_shape(), .role = Role::kOutput, .atol = 0, .rtol = 0},
            {.name = "dx", .shape = p.x_shape(), .role = Role::kInputGrad, .atol = 0, .rtol = 0}};
  }
  static void run(const RepeatPointsParams& p, const test::Views& v, const test::RunContext& ctx) {
    (ctx.ref ? ref::repeat_points_forward : repeat_points_forward)(p, {.x = v("x"), .y = v("y")});
    if (ctx.forward_only) return;
    (ctx.ref ? ref::repeat_points_backward : repeat_points_backward)(
        p, {.dy = v("dy"), .dx = v("dx"), .accumulate_dx = ctx.accumulate_dx});
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() { return {{"x", "dx"}}; }
  // Linear: no truncation error; rounding of L (|y| <= 1, <= 60 outputs) over 2*eps.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 5e-4, 5e-4}; }
};

std::vector<OpCase<RepeatPointsParams>> repeat_cases() {
  struct Size {
    int64_t N, L, C;
    bool fd = false;
  };
  const Size sizes[] = {
      {1, 1, 1},    {2, 5, 3},       {3, 9, 15},      {2, 4, 16},  {1, 6, 17},
      {2, 300, 64}, {1, 17, 1024},   {2, 3, 255},     {1, 2, 256}, {2, 7, 257},
      {1, 2500, 7}, {2, 4, 3, true}, {1, 6, 2, true},
  };
  std::vector<OpCase<RepeatPointsParams>> cases;
  int k = 0;
  for (const Size& s : sizes)
    for (int64_t B : test::model_counts()) {
      OpCase<RepeatPointsParams> c;
      c.p = RepeatPointsParams{.N = s.N, .L = s.L, .C = s.C};
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

class RepeatPointsHarness : public ::testing::TestWithParam<OpCase<RepeatPointsParams>> {};
TEST_P(RepeatPointsHarness, FusedEqualsSerial) { test::run_case<RepeatPointsOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, RepeatPointsHarness, ::testing::ValuesIn(repeat_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCuda, RepeatPointsHarness,
                         ::testing::ValuesIn(test::device_cases<RepeatPointsOp>(repeat_cases(),
                                                                                Device::kCuda)),
                         test::CaseName());

// torch: g.view(C, 1).repeat(1, L) is [C, L]; in the rows layout each point l holds the whole
// feature. B = 2, N = 1, L = 3, C = 2; backward sums each channel over the points.
TEST(RepeatPoints, ByHand) {
  const RepeatPointsParams p{.B = 2, .N = 1, .L = 3, .C = 2};
  Buffer x(p.x_shape()), y(p.y_shape());
  x.values = {1, 2, 3, 4};
  repeat_points_forward(p, {.x = x.view(), .y = y.view()});
  const std::vector<float> want = {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4};
  EXPECT_EQ(y.values, want);
  Buffer dy(p.y_shape()), dx(p.x_shape(), 100.0f);
  dy.values = {1, 10, 2, 20, 3, 30, 4, 40, 5, 50, 6, 60};
  repeat_points_backward(p, {.dy = dy.view(), .dx = dx.view()});
  EXPECT_EQ(dx.values, (std::vector<float>{6, 60, 15, 150}));
  repeat_points_backward(p, {.dy = dy.view(), .dx = dx.view(), .accumulate_dx = true});
  EXPECT_EQ(dx.values, (std::vector<float>{12, 120, 30, 300}));
}

TEST(RepeatPoints, BadShapesRaiseClearErrors) {
  const RepeatPointsParams p{.B = 2, .N = 3, .L = 5, .C = 4};
  Buffer x(p.x_shape()), y(p.y_shape());
  Buffer channels_x(Shape{3, 8});
  expect_error_containing(
      [&] { repeat_points_forward(p, {.x = channels_x.view(), .y = y.view()}); },
      "repeat_points input has shape [3, 8], expected [2, 3, 4]");
  expect_error_containing([&] { repeat_points_forward(p, {.x = x.view(), .y = x.view()}); },
                          "repeat_points output has shape [2, 3, 4], expected [2, 3, 5, 4]");
  RepeatPointsParams bad = p;
  bad.L = 0;
  expect_error_containing([&] { repeat_points_forward(bad, {.x = x.view(), .y = y.view()}); },
                          "repeat_points sizes must be positive");
  expect_error_containing([&] { repeat_points_backward(p, {.dy = y.view()}); },
                          "repeat_points input gradient is missing");
  expect_error_containing([&] { repeat_points_backward(p, {.dy = x.view(), .dx = x.view()}); },
                          "repeat_points output gradient has shape");
}

}  // namespace
}  // namespace hfta
