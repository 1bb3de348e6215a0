// Residual add: the CPU kernel equals the reference and the hand-computed sum, backward writes or
// accumulates dy exactly, fused(B) equals B single-model adds on the op harness (both layouts,
// accumulate_dx, finite differences), and bad shapes raise hfta::Error. Additions of two floats
// round identically everywhere, so every comparison is exact.
#include <cmath>
#include <limits>

#include "fused_ops/add.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::random_buffer;

constexpr float kGarbage = std::numeric_limits<float>::quiet_NaN();

// Element counts on both sides of the chunk size (16K floats) and the vector width (16).
const int64_t kSizes[] = {1, 15, 16, 17, 255, 16383, 16384, 16385, 40000};

TEST(Add, ForwardAndBackwardAreExact) {
  const uint64_t seed = test::seed_for_test();
  for (int64_t size : kSizes) {
    HFTA_SEEDED_TRACE(seed);
    SCOPED_TRACE(fmt::format("size {}", size));
    RngStream rng(seed, static_cast<uint64_t>(size));
    Buffer a = random_buffer(Shape{size}, rng), b = random_buffer(Shape{size}, rng);
    Buffer y(Shape{size}, kGarbage);
    add_forward({.a = a.view(), .b = b.view(), .y = y.view()});
    for (int64_t i = 0; i < size; ++i) ASSERT_EQ(y.values[i], a.values[i] + b.values[i]) << i;

    Buffer dy = random_buffer(Shape{size}, rng);
    Buffer dx(Shape{size}, kGarbage);
    add_backward({.dy = dy.view(), .dx = dx.view()});
    for (int64_t i = 0; i < size; ++i) ASSERT_EQ(dx.values[i], dy.values[i]) << i;

    Buffer start = random_buffer(Shape{size}, rng), acc = start, acc_ref = start;
    add_backward({.dy = dy.view(), .dx = acc.view(), .accumulate_dx = true});
    ref::add_backward({.dy = dy.view(), .dx = acc_ref.view(), .accumulate_dx = true});
    for (int64_t i = 0; i < size; ++i) {
      ASSERT_EQ(acc.values[i], start.values[i] + dy.values[i]) << i;
      ASSERT_EQ(acc.values[i], acc_ref.values[i]) << i;
    }
  }
}

// ---- the op harness (tests/op_harness.h): fused(B) equals B single-model adds, exactly ----

struct AddP {
  int64_t B = 1;
  bool conv = false;  // [N, B*C, HW, 1] (a residual block's channels) or [B, N, C*HW]
  int64_t N = 1, C = 1, HW = 1;
  Shape shape() const { return conv ? Shape{N, B * C, HW, 1} : Shape{B, N, C * HW}; }
};

// y = a + b; backward passes dy to both inputs (da, db), written or accumulated. One rounding
// per element on every path: tolerance 0.
struct AddOp {
  using Params = AddP;
  static std::string describe(const AddP& q) {
    return fmt::format("conv={} N={} C={} HW={}", q.conv, q.N, q.C, q.HW);
  }
  static std::vector<test::TensorSpec> tensors(const AddP& q, const test::OpCase<AddP>& c) {
    auto spec = [&](std::string name, test::Role role) {
      return test::TensorSpec{
          .name = std::move(name),
          .shape = q.shape(),
          .layout = q.conv ? test::Layout::kChannels : test::Layout::kModelMajor,
          .role = role,
          .atol = 0.0,
          .rtol = 0.0,
          .channels = q.C};
    };
    using test::Role;
    return {spec("a", Role::kInput),  spec("b", Role::kInput),      spec("dy", Role::kInput),
            spec("y", Role::kOutput), spec("da", Role::kInputGrad), spec("db", Role::kInputGrad)};
  }
  static void run(const AddP&, const test::Views& v, const test::RunContext& ctx) {
    (ctx.ref ? ref::add_forward : add_forward)({.a = v("a"), .b = v("b"), .y = v("y")});
    if (ctx.forward_only) return;
    for (const char* d : {"da", "db"})
      (ctx.ref ? ref::add_backward
               : add_backward)({.dy = v("dy"), .dx = v(d), .accumulate_dx = ctx.accumulate_dx});
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() {
    return {{"a", "da"}, {"b", "db"}};
  }
  // Linear: no truncation error; rounding about 2^-24 * |y| / eps.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 1e-4, 1e-4}; }
};

// Per-model sizes on both sides of the vector width (16) and, at B = 1 and B = 8, the 16K chunk.
std::vector<test::OpCase<AddP>> add_cases() {
  struct Size {
    bool conv;
    int64_t N, C, HW;
  };
  const Size sizes[] = {{false, 1, 1, 1},     {false, 1, 15, 1},   {false, 1, 17, 1},
                        {false, 1, 16385, 1}, {false, 5, 40, 200}, {true, 3, 5, 7},
                        {true, 2, 16, 64},    {true, 1, 2, 3}};
  std::vector<test::OpCase<AddP>> cases;
  int k = 0;
  for (const Size& s : sizes)
    for (int64_t B : test::model_counts()) {
      test::OpCase<AddP> c;
      c.p = AddP{.conv = s.conv, .N = s.N, .C = s.C, .HW = s.HW};
      c.B = B;
      c.threads = 1 + (k++ % 3);
      c.accumulate_dx = (s.N + s.C + B) % 2 == 1;
      c.fd = B == 1 && s.N * s.C * s.HW <= 15;
      c.name = fmt::format("{}_N{}_C{}_HW{}_B{}_t{}{}{}", s.conv ? "conv" : "linear", s.N, s.C,
                           s.HW, B, c.threads, c.accumulate_dx ? "_acc" : "", c.fd ? "_fd" : "");
      cases.push_back(c);
    }
  return cases;
}

class AddHarness : public ::testing::TestWithParam<test::OpCase<AddP>> {};
TEST_P(AddHarness, FusedEqualsSerial) { test::run_case<AddOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, AddHarness, ::testing::ValuesIn(add_cases()), test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCuda, AddHarness,
                         ::testing::ValuesIn(test::device_cases<AddOp>(add_cases(), Device::kCuda)),
                         test::CaseName());

TEST(Add, BadShapesAreErrors) {
  Buffer a(Shape{2, 3}), b(Shape{3, 2}), y(Shape{2, 3});
  EXPECT_THROW(add_forward({.a = a.view(), .b = b.view(), .y = y.view()}), Error);
  EXPECT_THROW(add_forward({.a = a.view(), .b = a.view(), .y = b.view()}), Error);
  EXPECT_THROW(add_forward({.a = a.view(), .b = TensorView(), .y = y.view()}), Error);
  EXPECT_THROW(add_backward({.dy = a.view(), .dx = b.view()}), Error);
  EXPECT_THROW(add_backward({.dy = TensorView(), .dx = b.view()}), Error);
}

}  // namespace
}  // namespace hfta
