// Fused softmax cross-entropy: each model's loss, probabilities, gradient and accuracy equal a
// single-model reference run; reference gradients equal finite differences; a NaN in one model
// leaves the others untouched; bad labels and shapes raise hfta::Error.
#include <limits>

#include "fused_ops/cross_entropy.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;

// Unit roundoff: the relative error of one correctly rounded float operation.
constexpr double kUnitRoundoff = 1.0 / (1 << 24);

std::vector<int32_t> random_labels(int64_t N, int64_t K, RngStream& rng) {
  std::vector<int32_t> labels(N);
  for (auto& l : labels) l = static_cast<int32_t>(rng.below(K));
  return labels;
}

IndexView label_view(std::vector<int32_t>& labels) {
  return IndexView(labels.data(), Shape{static_cast<int64_t>(labels.size())});
}

struct CeCase {
  int64_t N, K;
  float range;  // logits uniform in [-range, range]; 60 makes probabilities underflow
};

struct CeResult {
  Buffer losses, probs, dlogits;
  std::vector<int64_t> correct;
};

// Forward, backward (dlogits written over probs when in_place) and count_correct.
template <typename Forward, typename Backward, typename Count>
CeResult run(const CrossEntropyParams& p, Buffer logits, std::vector<int32_t> labels,
             Buffer dlosses, bool in_place, Forward forward, Backward backward, Count count) {
  CeResult r{Buffer(p.losses_shape()), Buffer(p.logits_shape()), Buffer(p.logits_shape()),
             std::vector<int64_t>(p.B, -1)};
  forward(p, {.logits = logits.view(),
              .labels = label_view(labels),
              .losses = r.losses.view(),
              .saved = CrossEntropySaved{r.probs.view()}});
  Buffer probs = r.probs;
  TensorView d = in_place ? r.probs.view() : r.dlogits.view();
  backward(p, {.saved = CrossEntropySaved{r.probs.view()},
               .labels = label_view(labels),
               .dlosses = dlosses.view(),
               .dlogits = d});
  if (in_place) r.dlogits = r.probs, r.probs = probs;
  count(p, {.logits = logits.view(),
            .labels = label_view(labels),
            .correct = std::span<int64_t>(r.correct)});
  return r;
}

CeResult run_cpu(const CrossEntropyParams& p, const Buffer& logits,
                 const std::vector<int32_t>& labels, const Buffer& dlosses, bool in_place) {
  return run(p, logits, labels, dlosses, in_place, cross_entropy_forward, cross_entropy_backward,
             count_correct);
}

CeResult run_ref(const CrossEntropyParams& p, const Buffer& logits,
                 const std::vector<int32_t>& labels, const Buffer& dlosses) {
  return run(p, logits, labels, dlosses, false, ref::cross_entropy_forward,
             ref::cross_entropy_backward, ref::count_correct);
}

Buffer model_slice(const Buffer& fused, int64_t b, Shape single) {
  Buffer out(single);
  std::copy_n(fused.values.data() + b * single.numel(), single.numel(), out.data());
  return out;
}

void check_fused_equals_serial(int64_t B, const CeCase& c, bool in_place, uint64_t seed) {
  HFTA_SEEDED_TRACE(seed);
  SCOPED_TRACE(fmt::format("B={} N={} K={} range={} in_place={}", B, c.N, c.K, c.range, in_place));
  RngStream rng(seed, 0);
  const CrossEntropyParams p{B, c.N, c.K};
  const Buffer logits = test::random_buffer(p.logits_shape(), rng, -c.range, c.range);
  const std::vector<int32_t> labels = random_labels(c.N, c.K, rng);
  const Buffer dlosses = test::random_buffer(p.losses_shape(), rng, 0.5f, 2.0f);
  const CeResult fused = run_cpu(p, logits, labels, dlosses, in_place);

  const CrossEntropyParams one{1, c.N, c.K};
  for (int64_t b = 0; b < B; ++b) {
    SCOPED_TRACE(fmt::format("model {}", b));
    const Buffer logits_b = model_slice(logits, b, one.logits_shape());
    const Buffer dlosses_b = model_slice(dlosses, b, one.losses_shape());
    const CeResult alone = run_ref(one, logits_b, labels, dlosses_b);
    // Error budget against the double reference, with u = 2^-24 and d_k = max - x_k:
    // - exp_approx is within 1.4u, and its argument x_k - max is rounded (absolute d_k u), so
    //   e_k carries (1.4 + d_k) u relative. The sum s averages those under the softmax:
    //   sum_k p_k d_k = H(p) - log s <= ln K, so s (and log s, absolutely) is within
    //   (1.4 + ln K) u.
    // - probs = e_k * (1/s): (5 + ln K) u relative, plus d_k e^-d_k u <= u/e = 2.2e-8 absolute.
    //   The label slot is exp of the float-rounded log-likelihood l: l e^l u <= u/e as well.
    //   (exp_approx flushes below 1.2e-38, far under that.)
    // - loss: log s as above, each l rounded to float (|l| u), the mean rounded (u/2).
    // - dlogits = scale * (p - onehot): the probs' error times |scale| <= 2/N, two roundings.
    const double u = kUnitRoundoff, ln_k = std::log(double(c.K)), scale = 2.0 / c.N;
    expect_close(model_slice(fused.probs, b, one.logits_shape()), alone.probs, 3e-8, (5 + ln_k) * u,
                 "probs");
    expect_close(model_slice(fused.losses, b, one.losses_shape()), alone.losses, (2 + ln_k) * u,
                 2 * u, "loss");
    expect_close(model_slice(fused.dlogits, b, one.logits_shape()), alone.dlogits, 3e-8 * scale,
                 (7 + ln_k) * u, "logits grad");
    EXPECT_EQ(fused.correct[b], alone.correct[0]) << "correct count";
    // The CPU kernel on model b alone gives the same bits: nothing depends on B.
    const CeResult cpu_alone = run_cpu(one, logits_b, labels, dlosses_b, in_place);
    EXPECT_EQ(cpu_alone.losses.values[0], fused.losses.values[b]) << "CPU loss alone vs fused";
  }
}

TEST(CrossEntropy, FusedEqualsSerial) {
  // K below, at and above the kernel's 16-wide vectors, with and without a remainder.
  const CeCase cases[] = {
      {1, 1, 4.0f},   {1, 2, 4.0f},   {5, 3, 4.0f},    {7, 10, 8.0f},
      {13, 17, 8.0f}, {9, 10, 60.0f}, {33, 129, 8.0f}, {6, 1000, 60.0f},
      {64, 10, 3.0f}, {5, 16, 8.0f},  {3, 32, 60.0f},
  };
  uint64_t seed = test::seed_for_test();
  for (int64_t B : test::model_counts())
    for (const auto& c : cases)
      for (bool in_place : {false, true}) check_fused_equals_serial(B, c, in_place, seed++);
}

TEST(CrossEntropy, ReferenceGradientsMatchFiniteDifferences) {
  uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 1);
  const CrossEntropyParams p{2, 3, 5};
  Buffer logits = test::random_buffer(p.logits_shape(), rng, -2.0f, 2.0f);
  std::vector<int32_t> labels = random_labels(p.N, p.K, rng);
  Buffer g = test::random_buffer(p.losses_shape(), rng, 0.5f, 2.0f);
  Buffer losses(p.losses_shape()), probs(p.logits_shape()), dlogits(p.logits_shape());
  auto forward = [&] {
    ref::cross_entropy_forward(p, {.logits = logits.view(),
                                   .labels = label_view(labels),
                                   .losses = losses.view(),
                                   .saved = {probs.view()}});
  };
  forward();
  ref::cross_entropy_backward(p, {.saved = {probs.view()},
                                  .labels = label_view(labels),
                                  .dlosses = g.view(),
                                  .dlogits = dlogits.view()});
  // eps = 1e-2: truncation eps^2 |L'''| / 6 with |L'''| <= 1 for log-softmax: <= 2e-5; rounding:
  // the float losses (|L| <= 10) carry 2^-24 |L| / eps <= 6e-6.
  const double eps = 1e-2, tol = 1e-4;
  test::expect_gradient_matches_finite_differences(forward, logits, losses, g, dlogits, eps, tol,
                                                   tol, "dlogits");
}

TEST(CrossEntropy, NanInOneModelLeavesOthersUntouched) {
  uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 2);
  const CrossEntropyParams p{3, 4, 21};
  const Buffer clean = test::random_buffer(p.logits_shape(), rng, -4.0f, 4.0f);
  const std::vector<int32_t> labels = random_labels(p.N, p.K, rng);
  const Buffer dlosses(p.losses_shape(), 1.0f);
  const CeResult base = run_cpu(p, clean, labels, dlosses, false);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), INFINITY}) {
    SCOPED_TRACE(fmt::format("bad logit {}", bad));
    Buffer logits = clean;
    const int64_t bad_row = 1 * p.N + 2;  // model 1, row 2
    logits.values[bad_row * p.K + 17] = bad;
    const CeResult r = run_cpu(p, logits, labels, dlosses, false);
    const CeResult expected = run_ref(p, logits, labels, dlosses);
    EXPECT_TRUE(std::isnan(r.losses.values[1]));
    EXPECT_TRUE(std::isnan(expected.losses.values[1]));
    for (int64_t k = 0; k < p.K; ++k) {
      EXPECT_TRUE(std::isnan(r.probs.values[bad_row * p.K + k])) << k;
      EXPECT_TRUE(std::isnan(r.dlogits.values[bad_row * p.K + k])) << k;
    }
    for (int64_t b : {0, 2}) {
      EXPECT_EQ(r.losses.values[b], base.losses.values[b]) << "model " << b;
      EXPECT_EQ(r.correct[b], base.correct[b]) << "model " << b;
      const int64_t n = p.N * p.K;
      EXPECT_TRUE(std::equal(r.dlogits.values.begin() + b * n,
                             r.dlogits.values.begin() + (b + 1) * n,
                             base.dlogits.values.begin() + b * n))
          << "model " << b;
    }
    // The other rows of model 1 are unaffected too.
    const int64_t good_row = 1 * p.N + 0;
    EXPECT_TRUE(std::equal(r.probs.values.begin() + good_row * p.K,
                           r.probs.values.begin() + (good_row + 1) * p.K,
                           base.probs.values.begin() + good_row * p.K));
  }
}

TEST(CrossEntropy, CountCorrectTakesFirstMaximumAndSkipsNan) {
  const CrossEntropyParams p{2, 4, 3};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Buffer logits(p.logits_shape());
  logits.values = {1, 5, 5, 2, 2, 2, 0, 0, 1, 0, 9, nan,  // model 0
                   7, 1, 1, 0, 3, 3, 4, 4, 4, 1, 2, 3};   // model 1
  std::vector<int32_t> labels = {1, 0, 2, 1};
  for (auto fn : {&count_correct, &ref::count_correct}) {
    std::vector<int64_t> correct(2, -1);
    fn(p, {.logits = logits.view(), .labels = label_view(labels), .correct = correct});
    // model 0: tie -> 1 (yes), tie -> 0 (yes), 2 (yes), NaN row (argmax 1 = label, but no)
    // model 1: 0 (no), tie -> 1 (no), tie -> 0 (no), 2 (no)
    EXPECT_EQ(correct, (std::vector<int64_t>{3, 0}));
  }
}

TEST(CrossEntropy, BadLabelsAndShapesRaiseClearErrors) {
  const CrossEntropyParams p{2, 3, 5};
  Buffer logits(p.logits_shape()), probs(p.logits_shape()), losses(p.losses_shape());
  std::vector<int32_t> labels = {0, 4, 5};
  std::vector<int64_t> correct(2);
  try {
    cross_entropy_forward(p, {.logits = logits.view(),
                              .labels = label_view(labels),
                              .losses = losses.view(),
                              .saved = {probs.view()}});
    FAIL() << "expected hfta::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cross-entropy label 5 at row 2 is outside [0, K=5)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(
      count_correct(p, {.logits = logits.view(), .labels = label_view(labels), .correct = correct}),
      Error);
  EXPECT_THROW(cross_entropy_backward(p, {.saved = {probs.view()},
                                          .labels = label_view(labels),
                                          .dlosses = losses.view(),
                                          .dlogits = logits.view()}),
               Error);
  labels = {0, -1, 1};
  EXPECT_THROW(ref::cross_entropy_forward(p, {.logits = logits.view(),
                                              .labels = label_view(labels),
                                              .losses = losses.view(),
                                              .saved = {probs.view()}}),
               Error);
  labels = {0, 1, 2};
  cross_entropy_forward(p, {.logits = logits.view(),
                            .labels = label_view(labels),
                            .losses = losses.view(),
                            .saved = {probs.view()}});
  std::vector<int32_t> short_labels = {0, 1};
  EXPECT_THROW(cross_entropy_forward(p, {.logits = logits.view(),
                                         .labels = label_view(short_labels),
                                         .losses = losses.view(),
                                         .saved = {probs.view()}}),
               Error);
  try {
    cross_entropy_forward(p, {.logits = logits.view(),
                              .labels = label_view(labels),
                              .losses = probs.view(),
                              .saved = {probs.view()}});
    FAIL() << "expected hfta::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cross-entropy losses has shape [2, 3, 5], expected [2]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(cross_entropy_forward(p, {.logits = logits.view(),
                                         .labels = label_view(labels),
                                         .losses = losses.view(),
                                         .saved = {TensorView()}}),
               Error);
  std::vector<int64_t> wrong_correct(3);
  EXPECT_THROW(
      count_correct(
          p, {.logits = logits.view(), .labels = label_view(labels), .correct = wrong_correct}),
      Error);
  CrossEntropyParams bad = p;
  bad.K = 0;
  EXPECT_THROW(cross_entropy_forward(bad, {.logits = logits.view(),
                                           .labels = label_view(labels),
                                           .losses = losses.view(),
                                           .saved = {probs.view()}}),
               Error);
}

}  // namespace
}  // namespace hfta
