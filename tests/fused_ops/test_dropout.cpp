// Fused dropout on the op harness (tests/op_harness.h): model b of an array draws exactly the mask
// it draws alone (same per-model stream, over two steps), in both layouts, in place and not; the
// drop rate is p within a binomial bound and the keep scale is 4/3 at p = 0.25 by hand; eval mode
// and p == 0 are the identity; the gradient is mask * dy; bad parameters raise hfta::Error.
#include <cmath>
#include <limits>

#include "fused_ops/dropout.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::OpCase;
using test::Role;
using test::TensorSpec;

std::vector<RngStream> dropout_streams(uint64_t seed, int64_t B, int64_t first_model = 0) {
  std::vector<RngStream> streams;
  for (int64_t b = 0; b < B; ++b)
    streams.push_back(RngStream::for_model(seed, first_model + b, kRngDropout));
  return streams;
}

struct DropoutCase {
  bool conv;
  int64_t N, C, HW;  // linear layout: per-model [N, C*HW]
};

DropoutParams make_params(const DropoutCase& c, int64_t B, float p, bool training) {
  return c.conv ? DropoutParams::conv_channels(B, c.N, c.C, c.HW, p, training)
                : DropoutParams::model_major(B, c.N * c.C * c.HW, p, training);
}

Shape fused_shape(const DropoutCase& c, int64_t B) {
  return c.conv ? Shape{c.N, B * c.C, c.HW, 1} : Shape{B, c.N, c.C * c.HW};
}

struct DropP {
  int64_t B = 1;
  DropoutCase shape;
  float p = 0.5f;
  bool training = true;
  bool in_place = false;  // the fast path's second step runs y over x and dx over dy
  DropoutParams params() const { return make_params(shape, B, p, training); }
};

// Dropout only copies and multiplies by 0 or 1/(1-p), each exactly rounded once, so the fused
// kernel and the reference agree bit for bit: tolerance 0. Two forward steps (x_prev, then x)
// from the same streams: the second checks that each stream advanced exactly as it does alone.
struct DropoutOp {
  using Params = DropP;
  static std::string describe(const DropP& q) {
    return fmt::format("conv={} N={} C={} HW={} p={} training={} in_place={}", q.shape.conv,
                       q.shape.N, q.shape.C, q.shape.HW, q.p, q.training, q.in_place);
  }
  static std::vector<TensorSpec> tensors(const DropP& q, const OpCase<DropP>& c) {
    auto spec = [&](std::string name, Role role) {
      return TensorSpec{
          .name = std::move(name),
          .shape = fused_shape(q.shape, q.B),
          .layout = q.shape.conv ? test::Layout::kChannels : test::Layout::kModelMajor,
          .role = role,
          .atol = 0.0,
          .rtol = 0.0,
          .channels = q.shape.C};
    };
    std::vector<TensorSpec> t = {spec("x_prev", Role::kInput), spec("x", Role::kInput),
                                 spec("dy", Role::kInput), spec("y", Role::kOutput),
                                 spec("dx", Role::kInputGrad)};
    if (c.accumulate_dx) {
      // start + mask * dy: the CPU kernel may fuse it into one rounding (an FMA), the reference
      // rounds the product first (or the other way round: GCC contracts the scalar reference): half
      // an ulp of |mask * dy| <= keep_scale apart, plus the sum's.
      const double u = std::ldexp(1.0, -24);
      t[4].atol = 2.0 * u * (q.params().keep_scale() + 1.0), t[4].rtol = 2.0 * u;
    }
    if (q.params().active()) t.push_back(spec("mask", Role::kSaved));
    return t;
  }
  static void run(const DropP& q, const test::Views& v, const test::RunContext& ctx) {
    const DropoutParams p = q.params();
    // Fresh streams on every run: finite differences redraw the same mask.
    std::vector<RngStream> streams = dropout_streams(ctx.seed, p.B, ctx.first_model);
    const TensorView x = v("x"), y = v("y"), dy = v("dy"), dx = v("dx"), mask = v("mask");
    auto forward = ctx.ref ? ref::dropout_forward : dropout_forward;
    auto backward = ctx.ref ? ref::dropout_backward : dropout_backward;
    forward(p, {.x = v("x_prev"), .streams = streams, .saved = {mask}, .y = y});
    const bool in_place = q.in_place && !ctx.ref;
    if (in_place) test::copy_values(x, y);
    forward(p, {.x = in_place ? y : x, .streams = streams, .saved = {mask}, .y = y});
    if (ctx.forward_only) return;
    if (in_place && !ctx.accumulate_dx) {
      test::copy_values(dy, dx);
      backward(p, {.saved = {mask}, .dy = dx, .dx = dx});
    } else {
      backward(p, {.saved = {mask}, .dy = dy, .dx = dx, .accumulate_dx = ctx.accumulate_dx});
    }
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() { return {{"x", "dx"}}; }
  // Linear in x: no truncation error; rounding about 2^-24 * |y| / eps.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 1e-4, 1e-4}; }
};

// Both layouts, sizes past the kernel's 16K-element chunks at B = 8, p in {0.1, 0.5, 0.9}, in
// place and not, eval and p = 0 (the identity), B in {1, 2, 3, 8}, 1 to 3 threads.
std::vector<OpCase<DropP>> dropout_cases() {
  const DropoutCase shapes[] = {
      {false, 1, 1, 1}, {false, 5, 7, 3}, {false, 33, 65, 17},  // > one 16K chunk at B=8
      {true, 1, 1, 1},  {true, 3, 5, 7},  {true, 4, 6, 169},   {false, 2, 3, 2},
  };
  struct Mode {
    float p;
    bool training;
  };
  const Mode modes[] = {{0.1f, true}, {0.5f, true}, {0.9f, true}, {0.5f, false}, {0.0f, true}};
  std::vector<OpCase<DropP>> cases;
  int k = 0;
  for (const DropoutCase& s : shapes)
    for (const Mode& m : modes)
      for (int64_t B : test::model_counts())
        for (bool in_place : {false, true}) {
          if (!m.training || m.p == 0.0f) {
            if (in_place || B == 3) continue;  // the identity: fewer cases
          }
          OpCase<DropP> c;
          c.p = DropP{.shape = s, .p = m.p, .training = m.training, .in_place = in_place};
          c.B = B;
          c.threads = 1 + (k++ % 3);
          c.accumulate_dx = (s.N + s.C + B + int(in_place)) % 2 == 1;
          c.fd = s.N * s.C * s.HW <= 12 && B == 1 && !in_place;
          c.name = fmt::format("{}_N{}_C{}_HW{}_p{}{}_B{}_t{}{}{}{}", s.conv ? "conv" : "linear",
                               s.N, s.C, s.HW, int(m.p * 10), m.training ? "" : "_eval", B,
                               c.threads, in_place ? "_inplace" : "", c.accumulate_dx ? "_acc" : "",
                               c.fd ? "_fd" : "");
          cases.push_back(c);
        }
  return cases;
}

class DropoutHarness : public ::testing::TestWithParam<OpCase<DropP>> {};
TEST_P(DropoutHarness, FusedEqualsSerial) { test::run_case<DropoutOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, DropoutHarness, ::testing::ValuesIn(dropout_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCuda, DropoutHarness,
                         ::testing::ValuesIn(test::device_cases<DropoutOp>(dropout_cases(),
                                                                           Device::kCuda)),
                         test::CaseName());

// dx = mask * dy exactly, written and accumulated (start + mask * dy, rounded once as an FMA or
// twice: GCC contracts the reference's scalar loop into an FMA), by the formula: independent of
// the reference, both paths.
TEST(Dropout, GradientIsMaskTimesDy) {
  const uint64_t seed = test::case_seed("Dropout.GradientIsMaskTimesDy");
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 0);
  for (const DropoutCase& dc : {DropoutCase{true, 3, 5, 7}, DropoutCase{false, 5, 7, 3}})
    for (float drop : {0.1f, 0.4f})
      for (bool fast : {true, false}) {
        SCOPED_TRACE(fmt::format("conv={} p={} fast={}", dc.conv, drop, fast));
        const DropoutParams p = make_params(dc, 3, drop, true);
        const Shape shape = fused_shape(dc, 3);
        Buffer x = test::random_buffer(shape, rng), dy = test::random_buffer(shape, rng), y(shape);
        Buffer mask(shape), dx(shape, std::numeric_limits<float>::quiet_NaN());
        Buffer start = test::random_buffer(shape, rng), acc = start;
        std::vector<RngStream> streams = dropout_streams(seed, 3);
        auto forward = fast ? dropout_forward : ref::dropout_forward;
        auto backward = fast ? dropout_backward : ref::dropout_backward;
        forward(p, {.x = x.view(), .streams = streams, .saved = {mask.view()}, .y = y.view()});
        backward(p, {.saved = {mask.view()}, .dy = dy.view(), .dx = dx.view()});
        backward(
            p, {.saved = {mask.view()}, .dy = dy.view(), .dx = acc.view(), .accumulate_dx = true});
        int64_t misses = 0;
        for (int64_t i = 0; i < dx.numel(); ++i) {
          ASSERT_EQ(dx.values[i], mask.values[i] * dy.values[i]) << "dx != mask * dy at " << i;
          const volatile float product = mask.values[i] * dy.values[i];  // rounded on its own
          const float two_roundings = start.values[i] + product;
          const float fused = std::fma(mask.values[i], dy.values[i], start.values[i]);
          misses += acc.values[i] != two_roundings && acc.values[i] != fused;
        }
        EXPECT_EQ(misses, 0) << "accumulated dx != start + mask * dy";
      }
}

TEST(Dropout, DropsAboutPOfElementsPerModel) {
  uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  const int64_t B = 3, n = 200000;
  for (float p : {0.1f, 0.5f, 0.9f}) {
    SCOPED_TRACE(fmt::format("p={}", p));
    const DropoutParams params = DropoutParams::model_major(B, n, p, true);
    Buffer x(Shape{B, n}, 1.0f), y(x.shape), mask(x.shape);
    std::vector<RngStream> streams = dropout_streams(seed, B);
    dropout_forward(params,
                    {.x = x.view(), .streams = streams, .saved = {mask.view()}, .y = y.view()});
    // The dropped count of one model is Binomial(n, p) (24-bit uniforms make the per-element
    // probability p within 2^-24). 6 standard deviations: a correct kernel fails with
    // probability about 2e-9 per check.
    const double sd = std::sqrt(n * p * (1.0 - p));
    for (int64_t b = 0; b < B; ++b) {
      int64_t dropped = 0;
      for (int64_t i = 0; i < n; ++i) {
        const float m = mask.values[b * n + i];
        ASSERT_TRUE(m == 0.0f || m == params.keep_scale()) << "mask value " << m;
        ASSERT_EQ(y.values[b * n + i], m) << "y = x * mask with x = 1";
        dropped += m == 0.0f;
      }
      EXPECT_LE(std::fabs(dropped - n * p), 6.0 * sd) << "model " << b << " dropped " << dropped;
    }
    // Models draw from different streams: their masks differ.
    EXPECT_FALSE(std::equal(mask.values.begin(), mask.values.begin() + n, mask.values.begin() + n));
  }
}

TEST(Dropout, EvalAndZeroProbabilityAreIdentity) {
  uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 3);
  const DropoutCase c{true, 3, 4, 5};
  const int64_t B = 3;
  for (auto [p, training] : {std::pair{0.5f, false}, std::pair{0.0f, true}}) {
    SCOPED_TRACE(fmt::format("p={} training={}", p, training));
    const DropoutParams params = make_params(c, B, p, training);
    Buffer x = test::random_buffer(fused_shape(c, B), rng), y(x.shape, 7.0f), dx(x.shape);
    std::vector<RngStream> streams = dropout_streams(seed, B);
    // No mask and no streams are needed.
    dropout_forward(params, {.x = x.view(), .streams = {}, .saved = {}, .y = y.view()});
    dropout_backward(params, {.saved = {}, .dy = x.view(), .dx = dx.view()});
    expect_close(y, x, 0.0, 0.0, "forward is the identity");
    expect_close(dx, x, 0.0, 0.0, "backward is the identity");
    // With streams given, none is advanced.
    dropout_forward(params, {.x = x.view(), .streams = streams, .saved = {}, .y = y.view()});
    EXPECT_EQ(streams[1].next_u64(), RngStream::for_model(seed, 1, kRngDropout).next_u64());
    for (auto fn : {&dropout_forward, &ref::dropout_forward}) {
      Buffer inplace = x;
      fn(params, {.x = inplace.view(), .streams = {}, .saved = {}, .y = inplace.view()});
      expect_close(inplace, x, 0.0, 0.0, "in-place identity");
    }
  }
}

TEST(Dropout, BadParametersRaiseClearErrors) {
  const int64_t B = 2;
  DropoutParams params = DropoutParams::conv_channels(B, 3, 4, 5, 0.5f, true);
  Buffer x(Shape{3, B * 4, 5}), y(x.shape), mask(x.shape);
  std::vector<RngStream> streams = dropout_streams(1, B);
  dropout_forward(
      params, {.x = x.view(), .streams = streams, .saved = {mask.view()}, .y = y.view()});  // valid
  try {
    dropout_forward(params, {.x = x.view(),
                             .streams = std::span(streams.data(), 1),
                             .saved = {mask.view()},
                             .y = y.view()});
    FAIL() << "expected hfta::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dropout got 1 random streams for B=2 models"),
              std::string::npos)
        << e.what();
  }
  Buffer model_major(Shape{B, 60});
  try {
    dropout_forward(params, {.x = model_major.view(),
                             .streams = streams,
                             .saved = {model_major.view()},
                             .y = model_major.view()});
    FAIL() << "expected hfta::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dropout input has shape [2, 60], expected [N=3, B*C=8"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(
      dropout_forward(params, {.x = x.view(), .streams = streams, .saved = {}, .y = y.view()}),
      Error);
  EXPECT_THROW(dropout_backward(params, {.saved = {}, .dy = x.view(), .dx = y.view()}), Error);
  for (float bad_p : {1.0f, -0.1f, std::numeric_limits<float>::quiet_NaN()}) {
    DropoutParams bad = params;
    bad.p = bad_p;
    EXPECT_THROW(
        dropout_forward(bad,
                        {.x = x.view(), .streams = streams, .saved = {mask.view()}, .y = y.view()}),
        Error)
        << bad_p;
  }
  DropoutParams inconsistent = params;
  inconsistent.per_model_numel = 61;
  EXPECT_THROW(
      dropout_forward(inconsistent,
                      {.x = x.view(), .streams = streams, .saved = {mask.view()}, .y = y.view()}),
      Error);
  const DropoutParams linear = DropoutParams::model_major(B, 60, 0.5f, true);
  Buffer wrong(Shape{B, 59});
  EXPECT_THROW(dropout_backward(
                   linear, {.saved = {mask.view()}, .dy = model_major.view(), .dx = wrong.view()}),
               Error);
  EXPECT_THROW(
      dropout_backward(
          linear, {.saved = {wrong.view()}, .dy = model_major.view(), .dx = model_major.view()}),
      Error);
}

// The keep scale and kept fraction written out by hand at p = 0.25, where the plausible mistakes
// differ: kept elements are exactly x * 4/3 (not x * 0.75, x / 0.25 or x), dropped ones exactly
// 0. Over M = 3 * 40000 draws the kept count is Binomial(M, 0.75): mean 90000, standard deviation
// sqrt(M * 0.75 * 0.25) = 150; 6 standard deviations (+-900) fail once in 10^9 runs, while
// keeping with probability p (a flipped comparison: 30000) or 0.5 is far outside.
TEST(Dropout, KeepScaleAndFractionByHand) {
  const uint64_t seed = test::case_seed("Dropout.KeepScaleAndFractionByHand");
  HFTA_SEEDED_TRACE(seed);
  for (bool fast : {true, false})
    for (auto layout : {DropoutLayout::kModelMajor, DropoutLayout::kConvChannels}) {
      SCOPED_TRACE(
          fmt::format("fast={} conv_layout={}", fast, layout == DropoutLayout::kConvChannels));
      const int64_t B = 3, N = 8, C = 5, HW = 1000;  // 40000 elements per model
      const DropoutParams p = layout == DropoutLayout::kModelMajor
                                  ? DropoutParams::model_major(B, N * C * HW, 0.25f, true)
                                  : DropoutParams::conv_channels(B, N, C, HW, 0.25f, true);
      const Shape shape =
          layout == DropoutLayout::kModelMajor ? Shape{B, N * C * HW} : Shape{N, B * C, HW};
      RngStream rng(seed, 0);
      Buffer x = test::random_buffer(shape, rng, 0.5f, 2.0f), y(shape, 1e30f), mask(shape, 1e30f);
      std::vector<RngStream> streams;
      for (int64_t b = 0; b < B; ++b) streams.push_back(RngStream::for_model(seed, b, kRngDropout));
      const DropoutForwardArgs a{
          .x = x.view(), .streams = streams, .saved = {.mask = mask.view()}, .y = y.view()};
      fast ? dropout_forward(p, a) : ref::dropout_forward(p, a);
      const float four_thirds = 4.0f / 3.0f;  // 1 / (1 - 0.25), rounded once to float
      int64_t kept = 0, wrong = 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        if (mask.values[i] == 0.0f) {
          wrong += y.values[i] != 0.0f;
        } else {
          ++kept;
          wrong += mask.values[i] != four_thirds || y.values[i] != x.values[i] * four_thirds;
        }
      }
      EXPECT_EQ(wrong, 0) << "kept elements must be exactly x * 4/3 and dropped ones 0";
      EXPECT_NEAR(static_cast<double>(kept), 90000.0, 900.0) << "kept count";
    }
}

}  // namespace
}  // namespace hfta
