// Fused dropout: model b of an array draws exactly the mask it draws alone (same per-model
// stream), in both layouts; the drop rate is p within a binomial bound; eval mode and p == 0 are
// the identity; the gradient is mask * dy; bad parameters raise hfta::Error.
#include <limits>

#include "fused_ops/dropout.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;

std::vector<RngStream> dropout_streams(uint64_t seed, int64_t B) {
  std::vector<RngStream> streams;
  for (int64_t b = 0; b < B; ++b) streams.push_back(RngStream::for_model(seed, b, kRngDropout));
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

// Model b's single-model tensor ([N, C, HW, 1] or [1, N, C*HW]) cut out of the fused one.
Buffer gather(const DropoutCase& c, const Buffer& fused, int64_t B, int64_t b) {
  Buffer out(fused_shape(c, 1));
  const int64_t run = c.C * c.HW;
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t i = 0; i < run; ++i)
      out.values[n * run + i] =
          fused.values[c.conv ? (n * B + b) * run + i : (b * c.N + n) * run + i];
  return out;
}

// Dropout only copies and multiplies by 0 or 1/(1-p), each exactly rounded once, so the fused
// kernel and the reference agree bit for bit: tolerance 0.
void check_fused_equals_serial(const DropoutCase& c, int64_t B, float p, bool in_place,
                               uint64_t seed) {
  HFTA_SEEDED_TRACE(seed);
  SCOPED_TRACE(fmt::format("B={} conv={} N={} C={} HW={} p={} in_place={}", B, c.conv, c.N, c.C,
                           c.HW, p, in_place));
  RngStream rng(seed, 0);
  const DropoutParams params = make_params(c, B, p, true);
  const Shape shape = fused_shape(c, B);
  std::vector<RngStream> streams = dropout_streams(seed, B);
  std::vector<RngStream> alone = streams;  // model b alone starts from the same stream
  // Two steps: the second checks that each stream advanced exactly as it does alone.
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE(fmt::format("step {}", step));
    Buffer x = test::random_buffer(shape, rng), dy = test::random_buffer(shape, rng);
    const Buffer x0 = x, dy0 = dy;
    Buffer y(shape), dx(shape), mask(shape, -1.0f);
    if (in_place) {
      dropout_forward(params,
                      {.x = x.view(), .streams = streams, .saved = {mask.view()}, .y = x.view()});
      dropout_backward(params, {.saved = {mask.view()}, .dy = dy.view(), .dx = dy.view()});
      y = x, dx = dy;
    } else {
      dropout_forward(params,
                      {.x = x.view(), .streams = streams, .saved = {mask.view()}, .y = y.view()});
      dropout_backward(params, {.saved = {mask.view()}, .dy = dy.view(), .dx = dx.view()});
    }
    for (int64_t i = 0; i < dx.numel(); ++i)
      ASSERT_EQ(dx.values[i], mask.values[i] * dy0.values[i]) << "dx != mask * dy at " << i;

    for (int64_t b = 0; b < B; ++b) {
      SCOPED_TRACE(fmt::format("model {}", b));
      const DropoutParams one = make_params(c, 1, p, true);
      Buffer xb = gather(c, x0, B, b), dyb = gather(c, dy0, B, b);
      Buffer yb(xb.shape), dxb(xb.shape), maskb(xb.shape);
      ref::dropout_forward(one, {.x = xb.view(),
                                 .streams = std::span(&alone[b], 1),
                                 .saved = {maskb.view()},
                                 .y = yb.view()});
      ref::dropout_backward(one, {.saved = {maskb.view()}, .dy = dyb.view(), .dx = dxb.view()});
      expect_close(gather(c, mask, B, b), maskb, 0.0, 0.0, "mask");
      expect_close(gather(c, y, B, b), yb, 0.0, 0.0, "forward");
      expect_close(gather(c, dx, B, b), dxb, 0.0, 0.0, "input grad");
    }
  }
}

TEST(Dropout, FusedEqualsSerial) {
  const DropoutCase cases[] = {
      {false, 1, 1, 1}, {false, 5, 7, 3}, {false, 33, 65, 17},  // > one 16K chunk at B=8
      {true, 1, 1, 1},  {true, 3, 5, 7},  {true, 4, 6, 169},
  };
  uint64_t seed = test::seed_for_test();
  for (int64_t B : test::model_counts())
    for (const auto& c : cases)
      for (float p : {0.1f, 0.5f, 0.9f})
        for (bool in_place : {false, true}) check_fused_equals_serial(c, B, p, in_place, seed++);
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

TEST(Dropout, ReferenceGradientMatchesFiniteDifferences) {
  uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 1);
  for (bool conv : {false, true}) {
    const DropoutCase c{conv, 2, 3, 2};
    const DropoutParams params = make_params(c, 2, 0.4f, true);
    Buffer x = test::random_buffer(fused_shape(c, 2), rng), g = test::random_buffer(x.shape, rng);
    Buffer y(x.shape), mask(x.shape), dx(x.shape);
    // Fresh streams each call, so every forward draws the same mask.
    auto forward = [&] {
      std::vector<RngStream> streams = dropout_streams(seed, 2);
      ref::dropout_forward(
          params, {.x = x.view(), .streams = streams, .saved = {mask.view()}, .y = y.view()});
    };
    forward();
    ref::dropout_backward(params, {.saved = {mask.view()}, .dy = g.view(), .dx = dx.view()});
    // Linear in x: no truncation error; rounding about 2^-24 * |y| / eps.
    const double eps = 1e-2, tol = 1e-4;
    test::expect_gradient_matches_finite_differences(forward, x, y, g, dx, eps, tol, tol, "dx");
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

TEST(Dropout, AccumulateDxAddsToDx) {
  const uint64_t seed = test::case_seed("Dropout.AccumulateDxAddsToDx");
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 0);
  for (bool training : {true, false})
    for (bool fast : {true, false}) {
      const DropoutParams p = DropoutParams::model_major(3, 1000, 0.25f, training);
      const Shape shape{3, 1000};
      Buffer x = test::random_buffer(shape, rng), y(shape), mask(shape),
             dy = test::random_buffer(shape, rng);
      std::vector<RngStream> streams;
      for (int64_t b = 0; b < 3; ++b) streams.push_back(RngStream::for_model(seed, b, kRngDropout));
      dropout_forward(
          p, {.x = x.view(), .streams = streams, .saved = {.mask = mask.view()}, .y = y.view()});
      test::expect_dx_accumulates(
          [&](TensorView dx, bool acc) {
            const DropoutBackwardArgs a{
                .saved = {.mask = mask.view()}, .dy = dy.view(), .dx = dx, .accumulate_dx = acc};
            fast ? dropout_backward(p, a) : ref::dropout_backward(p, a);
          },
          shape, seed, fmt::format("training={} fast={}", training, fast));
    }
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
