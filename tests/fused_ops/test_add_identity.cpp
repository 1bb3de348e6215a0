// "Plus the identity" (the T-Net's last step, and BatchNorm's step counters at k = 1): the CPU
// kernel equals the hand-computed result in place and out of place; fused(B) equals B
// single-model runs on the op harness (k = 1, 3, 64 and odd sizes, accumulate_dx, finite
// differences), on the CPU and on the GPU; bad shapes raise hfta::Error. One add per element on
// every path, so every comparison is exact.
#include <cmath>
#include <limits>

#include "fused_ops/add_identity.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_error_containing;
using test::random_buffer;

constexpr float kGarbage = std::numeric_limits<float>::quiet_NaN();

TEST(AddIdentity, AddsOneOnEachDiagonalExactly) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 0);
  const AddIdentityParams p{.B = 2, .N = 3, .k = 4};
  Buffer x = random_buffer(p.x_shape(), rng), y(p.y_shape(), kGarbage);
  add_identity_forward(p, {.x = x.view(), .y = y.view()});
  Buffer in_place = x;
  add_identity_forward(p, {.x = in_place.view(), .y = in_place.view()});
  for (int64_t m = 0; m < p.B * p.N; ++m)
    for (int64_t i = 0; i < p.k; ++i)
      for (int64_t j = 0; j < p.k; ++j) {
        const int64_t e = (m * p.k + i) * p.k + j;
        const float want = x.values[e] + (i == j ? 1.0f : 0.0f);
        ASSERT_EQ(y.values[e], want) << "matrix " << m << " (" << i << ", " << j << ")";
        ASSERT_EQ(in_place.values[e], want) << "in place, matrix " << m;
      }
}

// BatchNorm's num_batches_tracked: one counter per model, each +1 per training step.
TEST(AddIdentity, CountsAStepForEveryModelAtKOne) {
  Buffer count(Shape{3}, 0.0f);
  count.values = {0.0f, 5.0f, 41.0f};
  const AddIdentityParams one{.B = 3, .N = 1, .k = 1};
  const TensorView c = count.view().reshaped(one.x_shape());
  add_identity_forward(one, {.x = c, .y = c});
  add_identity_forward(one, {.x = c, .y = c});
  EXPECT_EQ(count.values, (std::vector<float>{2.0f, 7.0f, 43.0f}));
}

TEST(AddIdentity, BadShapesAreErrors) {
  const AddIdentityParams p{.B = 2, .N = 1, .k = 3};
  Buffer x(p.x_shape()), wrong(Shape{2, 1, 3, 2});
  expect_error_containing([&] { add_identity_forward(p, {.x = x.view(), .y = wrong.view()}); },
                          "add_identity output");
  expect_error_containing([&] { add_identity_forward(p, {.x = wrong.view(), .y = x.view()}); },
                          "add_identity input");
  expect_error_containing([&] { add_identity_backward(p, {.dy = x.view(), .dx = wrong.view()}); },
                          "add_identity input gradient");
  expect_error_containing(
      [&] { add_identity_forward({.B = 2, .N = 1, .k = 0}, {.x = x.view(), .y = x.view()}); },
      "sizes must be positive");
}

// ---- the op harness (tests/op_harness.h): fused(B) equals B single-model runs, exactly ----

struct AddIdentityOp {
  using Params = AddIdentityParams;
  static std::string describe(const AddIdentityParams& p) {
    return fmt::format("N={} k={}", p.N, p.k);
  }
  static std::vector<test::TensorSpec> tensors(const AddIdentityParams& p,
                                               const test::OpCase<AddIdentityParams>& c) {
    using test::Role;
    std::vector<test::TensorSpec> t = {
        {.name = "x", .shape = p.x_shape()},
        {.name = "dy", .shape = p.y_shape()},
        {.name = "y", .shape = p.y_shape(), .role = Role::kOutput, .atol = 0.0, .rtol = 0.0}};
    if (!c.no_dx)
      t.push_back(
          {.name = "dx", .shape = p.x_shape(), .role = Role::kInputGrad, .atol = 0.0, .rtol = 0.0});
    return t;
  }
  static void run(const AddIdentityParams& p, const test::Views& v, const test::RunContext& ctx) {
    (ctx.ref ? ref::add_identity_forward : add_identity_forward)(p, {.x = v("x"), .y = v("y")});
    if (ctx.forward_only) return;
    (ctx.ref ? ref::add_identity_backward : add_identity_backward)(
        p, {.dy = v("dy"), .dx = v("dx"), .accumulate_dx = ctx.accumulate_dx});
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() { return {{"x", "dx"}}; }
  // Linear: no truncation error; rounding about 2^-24 * |y| / eps.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 1e-4, 1e-4}; }
};

// k: BatchNorm's counters (1), the input and feature T-Nets (3, 64), odd sizes and the 16-float
// vector width; N samples from 1 to 9; B in {1, 2, 3, 8}.
std::vector<test::OpCase<AddIdentityParams>> add_identity_cases() {
  const struct {
    int64_t N, k;
    bool fd = false;
  } sizes[] = {{1, 1}, {4, 1}, {2, 3}, {9, 3}, {3, 5}, {1, 16}, {2, 17}, {2, 64}, {2, 2, true}};
  std::vector<test::OpCase<AddIdentityParams>> cases;
  int i = 0;
  for (const auto& s : sizes)
    for (int64_t B : test::model_counts()) {
      test::OpCase<AddIdentityParams> c;
      c.p = AddIdentityParams{.N = s.N, .k = s.k};
      c.B = B;
      c.threads = 1 + (i % 3);
      c.accumulate_dx = (s.N + s.k + B) % 2 == 1;
      c.no_dx = s.k == 3 && B == 2;
      c.fd = s.fd && B == 1;
      ++i;
      c.name =
          fmt::format("N{}_k{}_B{}_t{}{}{}{}", s.N, s.k, B, c.threads,
                      c.accumulate_dx ? "_acc" : "", c.no_dx ? "_nodx" : "", c.fd ? "_fd" : "");
      cases.push_back(c);
    }
  return cases;
}

class AddIdentityHarness : public ::testing::TestWithParam<test::OpCase<AddIdentityParams>> {};
TEST_P(AddIdentityHarness, FusedEqualsSerial) { test::run_case<AddIdentityOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, AddIdentityHarness, ::testing::ValuesIn(add_identity_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCuda, AddIdentityHarness,
                         ::testing::ValuesIn(test::device_cases<AddIdentityOp>(add_identity_cases(),
                                                                               Device::kCuda)),
                         test::CaseName());

}  // namespace
}  // namespace hfta
