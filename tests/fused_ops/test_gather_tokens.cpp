// The token gather (a masked LM's predicted rows): by hand, with a zero row and a row gathered
// twice; fused(B) equals B reference runs on the op harness (rows drawn with repeats and negative
// rows, R and K from 1 to 40, D across the vector width, accumulate_dx, finite differences), on
// the CPU and on the GPU; a row outside the window and bad shapes raise hfta::Error.
// Tolerances: forward copies (exact); the input gradient adds a row's gradients in float in row
// order where the reference sums them in double: at most K terms of |dy| <= 1, so within
// K^2 2^-24 (exact when no row repeats).
#include <cmath>
#include <limits>

#include "fused_ops/gather_tokens.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_error_containing;
using test::OpCase;
using test::Role;
using test::TensorSpec;

// B = 2, R = 3 rows of D = 2; rows {2, -1, 0, 2}: row 2 twice, a zero row, row 1 never.
TEST(GatherTokens, ByHand) {
  const GatherTokensParams p{.B = 2, .R = 3, .K = 4, .D = 2};
  Buffer x(p.x_shape()), y(p.y_shape(), std::numeric_limits<float>::quiet_NaN());
  x.values = {1, 2, 3, 4, 5, 6, /* model 1 */ 7, 8, 9, 10, 11, 12};
  std::vector<int32_t> rows = {2, -1, 0, 2};
  const IndexView r(rows.data(), p.rows_shape());
  gather_tokens_forward(p, {.x = x.view(), .rows = r, .y = y.view()});
  EXPECT_EQ(y.values,
            (std::vector<float>{5, 6, 0, 0, 1, 2, 5, 6, /**/ 11, 12, 0, 0, 7, 8, 11, 12}));
  Buffer dy(p.y_shape()), dx(p.x_shape(), std::numeric_limits<float>::quiet_NaN());
  for (size_t i = 0; i < dy.values.size(); ++i) dy.values[i] = static_cast<float>(i + 1);
  gather_tokens_backward(p, {.rows = r, .dy = dy.view(), .dx = dx.view()});
  EXPECT_EQ(dx.values, (std::vector<float>{5, 6, 0, 0, 8, 10, /**/ 13, 14, 0, 0, 24, 26}));
  gather_tokens_backward(p, {.rows = r, .dy = dy.view(), .dx = dx.view(), .accumulate_dx = true});
  EXPECT_EQ(dx.values, (std::vector<float>{10, 12, 0, 0, 16, 20, /**/ 26, 28, 0, 0, 48, 52}));
}

TEST(GatherTokens, RowOutsideTheWindowRaises) {
  const GatherTokensParams p{.B = 1, .R = 3, .K = 2, .D = 1};
  Buffer x(p.x_shape()), y(p.y_shape());
  std::vector<int32_t> rows = {0, 3};
  const IndexView r(rows.data(), p.rows_shape());
  expect_error_containing(
      [&] { gather_tokens_forward(p, {.x = x.view(), .rows = r, .y = y.view()}); },
      "gathered token row 3 is outside the window's 3 rows");
  expect_error_containing(
      [&] { gather_tokens_backward(p, {.rows = r, .dy = y.view(), .dx = x.view()}); },
      "gathered token row 3 is outside the window's 3 rows");
}

TEST(GatherTokens, BadShapesAreErrors) {
  const GatherTokensParams p{.B = 2, .R = 3, .K = 2, .D = 4};
  Buffer x(p.x_shape()), y(p.y_shape());
  std::vector<int32_t> rows = {0, 1, 2};
  const IndexView two(rows.data(), p.rows_shape()), three(rows.data(), Shape{3});
  expect_error_containing(
      [&] { gather_tokens_forward(p, {.x = y.view(), .rows = two, .y = y.view()}); },
      "gather_tokens input has shape [2, 2, 4], expected [2, 3, 4]");
  expect_error_containing(
      [&] { gather_tokens_forward(p, {.x = x.view(), .rows = three, .y = y.view()}); },
      "gather_tokens row indices has shape [3], expected [2]");
  expect_error_containing(
      [&] { gather_tokens_backward(p, {.rows = two, .dy = x.view(), .dx = x.view()}); },
      "gather_tokens output gradient has shape");
  GatherTokensParams bad = p;
  bad.D = 0;
  expect_error_containing(
      [&] { gather_tokens_forward(bad, {.x = x.view(), .rows = two, .y = y.view()}); },
      "gather_tokens sizes must be positive");
  TensorView on_device = y.view();
  on_device.device = Device::kCuda;
  expect_error_containing(
      [&] { gather_tokens_forward(p, {.x = x.view(), .rows = two, .y = on_device}); },
      "gather_tokens output is on the CUDA device");
}

// ---- the op harness (tests/op_harness.h): fused(B) equals B single-model references ----

struct GatherTokensOp {
  using Params = GatherTokensParams;
  static std::string describe(const GatherTokensParams& p) {
    return fmt::format("R={} K={} D={}", p.R, p.K, p.D);
  }
  static std::vector<TensorSpec> tensors(const GatherTokensParams& p,
                                         const OpCase<GatherTokensParams>& c) {
    const double sum_bound = double(p.K) * double(p.K) * std::ldexp(1.0, -24);
    std::vector<TensorSpec> t = {
        {.name = "x", .shape = p.x_shape()},
        // Rows in [-2, R): repeats and zero rows; the same list for every model.
        {.name = "rows",
         .shape = p.rows_shape(),
         .layout = test::Layout::kShared,
         .lo = -2.0f,
         .hi = static_cast<float>(p.R),
         .is_index = true},
        {.name = "dy", .shape = p.y_shape()},
        {.name = "y", .shape = p.y_shape(), .role = Role::kOutput, .atol = 0.0, .rtol = 0.0}};
    if (!c.no_dx)
      t.push_back({.name = "dx",
                   .shape = p.x_shape(),
                   .role = Role::kInputGrad,
                   .atol = sum_bound,
                   .rtol = std::ldexp(1.0, -24)});
    return t;
  }
  static void run(const GatherTokensParams& p, const test::Views& v, const test::RunContext& ctx) {
    (ctx.ref ? ref::gather_tokens_forward : gather_tokens_forward)(
        p, {.x = v("x"), .rows = v.index("rows"), .y = v("y")});
    if (ctx.forward_only) return;
    (ctx.ref ? ref::gather_tokens_backward : gather_tokens_backward)(
        p, {.rows = v.index("rows"),
            .dy = v("dy"),
            .dx = v("dx"),
            .accumulate_dx = ctx.accumulate_dx});
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() { return {{"x", "dx"}}; }
  // Linear: no truncation error; rounding of L (|y| <= 1, <= 60 outputs) over 2*eps.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 5e-4, 5e-4}; }
};

// R rows per model (a window's n*T), K gathered (n*K), D features: one row, more gathered than
// there are rows (repeats), BERT-like shapes, D around the 16-float vector width.
std::vector<OpCase<GatherTokensParams>> gather_cases() {
  const struct {
    int64_t R, K, D;
    bool fd = false;
  } sizes[] = {{1, 1, 1},   {1, 3, 2},   {5, 2, 16}, {8, 12, 17},
               {40, 6, 15}, {32, 5, 64}, {3, 7, 1},  {4, 3, 2, true}};
  std::vector<OpCase<GatherTokensParams>> cases;
  int i = 0;
  for (const auto& s : sizes)
    for (int64_t B : test::model_counts()) {
      OpCase<GatherTokensParams> c;
      c.p = GatherTokensParams{.R = s.R, .K = s.K, .D = s.D};
      c.B = B;
      c.threads = 1 + (i % 3);
      c.accumulate_dx = (s.R + s.K + B) % 2 == 1;
      c.no_dx = s.D == 17 && B == 2;
      c.fd = s.fd && B == 1;
      ++i;
      c.name =
          fmt::format("R{}_K{}_D{}_B{}_t{}{}{}{}", s.R, s.K, s.D, B, c.threads,
                      c.accumulate_dx ? "_acc" : "", c.no_dx ? "_nodx" : "", c.fd ? "_fd" : "");
      cases.push_back(c);
    }
  return cases;
}

class GatherTokensHarness : public ::testing::TestWithParam<OpCase<GatherTokensParams>> {};
TEST_P(GatherTokensHarness, FusedEqualsSerial) { test::run_case<GatherTokensOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, GatherTokensHarness, ::testing::ValuesIn(gather_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCuda, GatherTokensHarness,
                         ::testing::ValuesIn(test::device_cases<GatherTokensOp>(gather_cases(),
                                                                                Device::kCuda)),
                         test::CaseName());

}  // namespace
}  // namespace hfta
