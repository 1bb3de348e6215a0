// Flatten ([N, B*C, H, W] -> [B, N, C*H*W]) on the op harness (tests/op_harness.h): fused(B)
// equals B single-model flattens (a single-model flatten is a copy), backward is the exact inverse,
// the reference gradient equals finite differences, and bad shapes raise hfta::Error. A
// permutation moves floats without arithmetic, so every comparison here is exact.
#include <algorithm>
#include <cstring>
#include <string>

#include "fused_ops/flatten.h"
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

struct FlattenOp {
  using Params = FlattenParams;
  static std::string describe(const FlattenParams& p) {
    return fmt::format("N={} C={} H={} W={}", p.N, p.C, p.H, p.W);
  }
  static std::vector<TensorSpec> tensors(const FlattenParams& p, const OpCase<FlattenParams>& c) {
    auto conv = [&](std::string name, Role role) {
      return TensorSpec{.name = std::move(name),
                        .shape = p.x_shape(),
                        .layout = test::Layout::kChannels,
                        .role = role,
                        .atol = 0.0,
                        .rtol = 0.0,
                        .channels = p.C};
    };
    auto linear = [&](std::string name, Role role) {
      return TensorSpec{
          .name = std::move(name), .shape = p.y_shape(), .role = role, .atol = 0.0, .rtol = 0.0};
    };
    return {conv("x", Role::kInput), linear("dy", Role::kInput), linear("y", Role::kOutput),
            conv("dx", Role::kInputGrad)};
  }
  static void run(const FlattenParams& p, const test::Views& v, const test::RunContext& ctx) {
    (ctx.ref ? ref::flatten_forward : flatten_forward)(p, {.x = v("x"), .y = v("y")});
    if (ctx.forward_only) return;
    (ctx.ref ? ref::flatten_backward : flatten_backward)(
        p, {.dy = v("dy"), .dx = v("dx"), .accumulate_dx = ctx.accumulate_dx});
    if (ctx.ref && p.B == 1 && !ctx.accumulate_dx) {
      // Model b alone: its flatten is a copy, both ways.
      EXPECT_EQ(std::memcmp(v("y").data, v("x").data, sizeof(float) * v("x").numel()), 0);
      EXPECT_EQ(std::memcmp(v("dx").data, v("dy").data, sizeof(float) * v("dy").numel()), 0);
    }
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() { return {{"x", "dx"}}; }
  // Each input moves to one output unchanged: the quotient is dy at that output, up to the
  // rounding of x +- eps (u|x| / eps ~ 1e-5 relative for |x| <= 1, eps = 1e-2).
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 1e-4, 1e-4}; }
};

std::vector<OpCase<FlattenParams>> flatten_cases() {
  const FlattenParams sizes[] = {
      {.N = 1, .C = 1, .H = 1, .W = 1},  {.N = 2, .C = 3, .H = 5, .W = 7},
      {.N = 3, .C = 1, .H = 4, .W = 4},  {.N = 5, .C = 6, .H = 1, .W = 1},
      {.N = 4, .C = 16, .H = 5, .W = 5}, {.N = 7, .C = 2, .H = 3, .W = 1},
      {.N = 2, .C = 2, .H = 3, .W = 2},  // finite differences
  };
  std::vector<OpCase<FlattenParams>> cases;
  int k = 0;
  for (const FlattenParams& s : sizes)
    for (int64_t B : test::model_counts()) {
      OpCase<FlattenParams> c;
      c.p = s;
      c.B = B;
      c.threads = 1 + (k++ % 3);
      c.accumulate_dx = (s.N + s.C + B) % 2 == 1;
      c.fd = B == 1 && s.N * s.C * s.H * s.W <= 24;
      c.name = fmt::format("N{}_C{}_H{}_W{}_B{}_t{}{}{}", s.N, s.C, s.H, s.W, B, c.threads,
                           c.accumulate_dx ? "_acc" : "", c.fd ? "_fd" : "");
      cases.push_back(c);
    }
  return cases;
}

class FlattenHarness : public ::testing::TestWithParam<OpCase<FlattenParams>> {};
TEST_P(FlattenHarness, FusedEqualsSerial) { test::run_case<FlattenOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, FlattenHarness, ::testing::ValuesIn(flatten_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCuda, FlattenHarness,
                         ::testing::ValuesIn(test::device_cases<FlattenOp>(flatten_cases(),
                                                                           Device::kCuda)),
                         test::CaseName());

// Round trips: backward(forward(x)) == x and forward(backward(dy)) == dy, bit for bit.
TEST(Flatten, RoundTripsAreExact) {
  const uint64_t seed = test::case_seed("Flatten.RoundTripsAreExact");
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 0);
  const FlattenParams p{3, 4, 16, 5, 5};
  Buffer x = random_buffer(p.x_shape(), rng), dy = random_buffer(p.y_shape(), rng);
  Buffer y(p.y_shape()), dx(p.x_shape()), x_back(p.x_shape()), dy_back(p.y_shape());
  flatten_forward(p, {.x = x.view(), .y = y.view()});
  flatten_backward(p, {.dy = dy.view(), .dx = dx.view()});
  flatten_backward(p, {.dy = y.view(), .dx = x_back.view()});
  flatten_forward(p, {.x = dx.view(), .y = dy_back.view()});
  EXPECT_EQ(std::memcmp(x_back.data(), x.data(), sizeof(float) * x.numel()), 0);
  EXPECT_EQ(std::memcmp(dy_back.data(), dy.data(), sizeof(float) * dy.numel()), 0);
}

// Where one element lands, by hand: x[n=1, b*C + c = 1*2 + 1, h=2, w=0] with B=2, C=2, H=3,
// W=2 goes to y[b=1, n=1, (c*H + h)*W + w = 10].
TEST(Flatten, ElementPlacementByHand) {
  const FlattenParams p{2, 2, 2, 3, 2};
  Buffer x(p.x_shape()), y(p.y_shape());
  x.values[((1 * 4 + 3) * 3 + 2) * 2 + 0] = 42.0f;
  flatten_forward(p, {.x = x.view(), .y = y.view()});
  EXPECT_EQ(y.values[(1 * 2 + 1) * 12 + 10], 42.0f);
  EXPECT_EQ(std::count(y.values.begin(), y.values.end(), 0.0f), y.numel() - 1);
}

TEST(Flatten, BadShapesRaiseClearErrors) {
  const FlattenParams p{2, 3, 4, 5, 6};
  Buffer x(p.x_shape()), y(p.y_shape());
  // The linear layout is model-major; a [N, B, F] buffer is a common mistake.
  Buffer wrong_y(Shape{3, 2, 120});
  expect_error_containing([&] { flatten_forward(p, {.x = x.view(), .y = wrong_y.view()}); },
                          "flatten output has shape [3, 2, 120], expected [2, 3, 120]");
  expect_error_containing([&] { flatten_forward(p, {.x = y.view(), .y = y.view()}); },
                          "flatten input has shape [2, 3, 120], expected [3, 8, 5, 6]");
  expect_error_containing([&] { flatten_backward(p, {.dy = x.view(), .dx = x.view()}); },
                          "flatten output gradient has shape");
  expect_error_containing([&] { flatten_backward(p, {.dy = y.view(), .dx = TensorView()}); },
                          "flatten input gradient is missing");
  FlattenParams bad = p;
  bad.H = 0;
  expect_error_containing([&] { flatten_forward(bad, {.x = x.view(), .y = y.view()}); },
                          "flatten sizes must be positive, got B=2 N=3 C=4 H=0 W=6");
}

}  // namespace
}  // namespace hfta
