// Channel scaling (squeeze-and-excitation's `scale * x`) on the op harness (tests/op_harness.h):
// the CPU kernel on B models equals the reference on each model alone (y and dx bit for bit, ds
// within the rounding of its double sum), outputs start as garbage, dx and ds written or
// accumulated; HW on both sides of the 8 and 16-float vector widths; the reference's gradients
// equal finite differences. Then dx in place over dy, fused equal to alone bit for bit (ds too:
// every row is summed in the same order), and bad shapes raising hfta::Error.
#include <cstring>

#include "fused_ops/scale_channels.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::OpCase;
using test::Role;
using test::TensorSpec;

struct ScaleChannelsOp {
  using Params = ScaleChannelsParams;
  static std::string describe(const ScaleChannelsParams& p) {
    return fmt::format("N={} C={} HW={}", p.N, p.C, p.HW);
  }
  static std::vector<TensorSpec> tensors(const ScaleChannelsParams& p,
                                         const OpCase<ScaleChannelsParams>&) {
    // The kernel multiplies as the reference does (y, dx: 0 tolerance); ds sums HW products in
    // double in another order and rounds once: at most 1 ulp apart.
    TensorSpec x{.name = "x",
                 .shape = p.x_shape(),
                 .layout = test::Layout::kChannels,
                 .atol = 0.0,
                 .rtol = 0.0,
                 .lo = -2.0f,
                 .hi = 2.0f,
                 .channels = p.C};
    TensorSpec s = x;
    s.name = "s", s.shape = p.s_shape(), s.lo = 0.0f, s.hi = 1.0f;  // a Hardsigmoid's range
    TensorSpec dy = x, y = x, dx = x, ds = s;
    dy.name = "dy", dy.lo = -1.0f, dy.hi = 1.0f;
    y.name = "y", y.role = Role::kOutput;
    dx.name = "dx", dx.role = Role::kInputGrad;
    ds.name = "ds", ds.role = Role::kInputGrad, ds.atol = 1e-12, ds.rtol = std::ldexp(1.0, -23);
    return {x, s, dy, y, dx, ds};
  }
  static void run(const ScaleChannelsParams& p, const test::Views& v, const test::RunContext& ctx) {
    const ScaleChannelsForwardArgs fwd{.x = v("x"), .s = v("s"), .y = v("y")};
    const ScaleChannelsBackwardArgs bwd{.x = v("x"),
                                        .s = v("s"),
                                        .dy = v("dy"),
                                        .dx = v("dx"),
                                        .ds = v("ds"),
                                        .accumulate_dx = ctx.accumulate_dx,
                                        .accumulate_ds = ctx.accumulate_dx};
    if (ctx.ref) {
      ref::scale_channels_forward(p, fwd);
      if (!ctx.forward_only) ref::scale_channels_backward(p, bwd);
      return;
    }
    scale_channels_forward(p, fwd);
    scale_channels_backward(p, bwd);
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() {
    return {{"x", "dx"}, {"s", "ds"}};
  }
  // Bilinear: central differences are exact up to rounding, about 2^-24 * |L| / eps.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 1e-4, 1e-4}; }
};

std::vector<OpCase<ScaleChannelsParams>> scale_channels_cases() {
  struct Size {
    int64_t N, C, HW;
    bool fd = false;
  };
  // C*H*W of one sample: 1, 7, 8, 15, 16, 17, 33 and larger (blocks of rows over the threads);
  // HW on both sides of 8 and 16 (the ds lanes, the vector width).
  const Size sizes[] = {{1, 1, 1},  {2, 7, 1},   {3, 1, 7},    {1, 2, 4},      {2, 3, 5},
                        {1, 1, 16}, {4, 17, 1},  {2, 3, 11},   {5, 1, 33},     {3, 16, 49},
                        {2, 9, 17}, {7, 40, 64}, {2, 5, 1031}, {2, 3, 5, true}};
  std::vector<OpCase<ScaleChannelsParams>> cases;
  int k = 0;
  for (const Size& s : sizes)
    for (int64_t B : test::model_counts()) {
      if (s.fd && B > 1) continue;
      OpCase<ScaleChannelsParams> c;
      c.p = ScaleChannelsParams{.N = s.N, .C = s.C, .HW = s.HW};
      c.B = B;
      c.threads = 1 + (k++ % 3);
      c.accumulate_dx = (s.N + s.C + B) % 2 == 1;
      c.fd = s.fd;
      c.name = fmt::format("N{}_C{}_HW{}_B{}_t{}{}{}", s.N, s.C, s.HW, B, c.threads,
                           c.accumulate_dx ? "_acc" : "", c.fd ? "_fd" : "");
      cases.push_back(c);
    }
  return cases;
}

class ScaleChannelsHarness : public ::testing::TestWithParam<OpCase<ScaleChannelsParams>> {};
TEST_P(ScaleChannelsHarness, FusedEqualsSerial) { test::run_case<ScaleChannelsOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, ScaleChannelsHarness, ::testing::ValuesIn(scale_channels_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(
    OnCuda, ScaleChannelsHarness,
    ::testing::ValuesIn(test::device_cases<ScaleChannelsOp>(scale_channels_cases(), Device::kCuda)),
    test::CaseName());

// The array's model b gives, bit for bit, what model b alone gives, ds included, also with dx
// written in place over dy and with only one of the two gradients wanted.
TEST(ScaleChannels, FusedEqualsAloneBitForBitInPlace) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 3);
  const ScaleChannelsParams fused{.B = 3, .N = 2, .C = 5, .HW = 37};
  Buffer x = test::random_buffer(fused.x_shape(), rng),
         s = test::random_buffer(fused.s_shape(), rng);
  Buffer dy = test::random_buffer(fused.x_shape(), rng), y(fused.x_shape());
  Buffer dx = dy, ds(fused.s_shape());
  scale_channels_forward(fused, {.x = x.view(), .s = s.view(), .y = y.view()});
  scale_channels_backward(
      fused, {.x = x.view(), .s = s.view(), .dy = dx.view(), .dx = dx.view(), .ds = ds.view()});
  ScaleChannelsParams one = fused;
  one.B = 1;
  for (int64_t b = 0; b < fused.B; ++b) {
    Buffer xb(one.x_shape()), sb(one.s_shape()), dyb(one.x_shape());
    for (int64_t n = 0; n < fused.N; ++n)
      for (int64_t c = 0; c < fused.C; ++c) {
        const int64_t row = (n * fused.B + b) * fused.C + c, rb = n * fused.C + c;
        sb.values[rb] = s.values[row];
        for (int64_t i = 0; i < fused.HW; ++i) {
          xb.values[rb * fused.HW + i] = x.values[row * fused.HW + i];
          dyb.values[rb * fused.HW + i] = dy.values[row * fused.HW + i];
        }
      }
    Buffer yb(one.x_shape()), dxb(one.x_shape()), dsb(one.s_shape());
    scale_channels_forward(one, {.x = xb.view(), .s = sb.view(), .y = yb.view()});
    scale_channels_backward(one,
                            {.x = xb.view(), .s = sb.view(), .dy = dyb.view(), .ds = dsb.view()});
    scale_channels_backward(one, {.s = sb.view(), .dy = dyb.view(), .dx = dxb.view()});
    for (int64_t n = 0; n < fused.N; ++n)
      for (int64_t c = 0; c < fused.C; ++c) {
        const int64_t row = (n * fused.B + b) * fused.C + c, rb = n * fused.C + c;
        ASSERT_EQ(ds.values[row], dsb.values[rb]) << "model " << b;
        for (int64_t i = 0; i < fused.HW; ++i) {
          ASSERT_EQ(y.values[row * fused.HW + i], yb.values[rb * fused.HW + i]) << "model " << b;
          ASSERT_EQ(dx.values[row * fused.HW + i], dxb.values[rb * fused.HW + i]) << "model " << b;
        }
      }
  }
}

TEST(ScaleChannels, BadShapesRaiseClearErrors) {
  const ScaleChannelsParams p{.B = 2, .N = 3, .C = 4, .HW = 5};
  Buffer x(p.x_shape()), s(p.s_shape()), y(p.x_shape()), wrong(Shape{3, 4});
  try {
    scale_channels_forward(p, {.x = x.view(), .s = wrong.view(), .y = y.view()});
    FAIL() << "expected hfta::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("scale_channels scale has shape [3, 4], expected [3, 8]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(scale_channels_forward(p, {.x = x.view(), .s = s.view()}), Error);
  // dx wanted needs s; ds wanted needs x; accumulating in place is refused.
  EXPECT_THROW(scale_channels_backward(p, {.dy = y.view(), .dx = x.view()}), Error);
  EXPECT_THROW(scale_channels_backward(p, {.dy = y.view(), .ds = s.view()}), Error);
  EXPECT_THROW(scale_channels_backward(
                   p, {.s = s.view(), .dy = y.view(), .dx = y.view(), .accumulate_dx = true}),
               Error);
}

}  // namespace
}  // namespace hfta
