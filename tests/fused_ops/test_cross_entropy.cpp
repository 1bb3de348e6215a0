// Fused softmax cross-entropy on the op harness (tests/op_harness.h): each model's loss,
// probabilities, gradient and accuracy (count_correct) equal a single-model reference run;
// reference gradients equal finite differences; a NaN in one model leaves the others untouched;
// bad labels and shapes raise hfta::Error.
#include <algorithm>
#include <limits>
#include <optional>

#include "fused_ops/cross_entropy.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::OpCase;
using test::Role;
using test::TensorSpec;

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

struct CeP {
  int64_t B = 1;
  int64_t N = 1, K = 2;
  float range = 4.0f;     // logits uniform in [-range, range]; 60 makes probabilities underflow
  bool in_place = false;  // the fast path writes dlogits over probs
  // Labels drawn in [label_lo, K); ignore_index (if any) is one of those values.
  int32_t label_lo = 0;
  std::optional<int32_t> ignore_index{};
  CrossEntropyParams params() const { return {B, N, K, ignore_index}; }
};

struct CrossEntropyOp {
  using Params = CeP;
  static std::string describe(const CeP& q) {
    return fmt::format("N={} K={} range={} in_place={} ignore_index={}", q.N, q.K, q.range,
                       q.in_place, q.ignore_index ? std::to_string(*q.ignore_index) : "none");
  }
  // Error budget against the double reference, with u = 2^-24 and d_k = max - x_k:
  // - exp_approx is within 1.4u, and its argument x_k - max is rounded (absolute d_k u), so e_k
  //   carries (1.4 + d_k) u relative. The sum s averages those under the softmax:
  //   sum_k p_k d_k = H(p) - log s <= ln K, so s (and log s, absolutely) is within (1.4 + ln K) u.
  // - probs = e_k * (1/s): (5 + ln K) u relative, plus d_k e^-d_k u <= u/e = 2.2e-8 absolute.
  //   The label slot is exp of the float-rounded log-likelihood l: l e^l u <= u/e as well.
  //   (exp_approx flushes below 1.2e-38, far under that.)
  // - loss: log s as above, each l rounded to float (|l| u), the mean rounded (u/2).
  // - dlogits = scale * (p - onehot): the probs' error times |scale| <= 2/M (M target rows,
  //   tolerance() below), two roundings; ignored rows exactly 0.
  // - correct counts: exact.
  static std::vector<TensorSpec> tensors(const CeP& q, const OpCase<CeP>& c) {
    const CrossEntropyParams p = q.params();
    const double u = kUnitRoundoff, ln_k = std::log(double(p.K)), scale = 2.0 / double(p.N);
    return {
        {.name = "logits",
         .shape = p.logits_shape(),
         .lo = -q.range,
         .hi = q.range,
         .fill = test::Fill::kTies},  // ties: count_correct takes the first maximum
        {.name = "labels",
         .shape = p.labels_shape(),
         .layout = test::Layout::kShared,
         .lo = float(q.label_lo),
         .hi = float(p.K),
         .is_index = true},
        {.name = "dlosses", .shape = p.losses_shape(), .lo = 0.5f, .hi = 2.0f},
        {.name = "losses",
         .shape = p.losses_shape(),
         .role = Role::kOutput,
         .atol = (2 + ln_k) * u,
         .rtol = 2 * u},
        {.name = "probs",
         .shape = p.logits_shape(),
         .role = Role::kSaved,
         .atol = 3e-8,
         .rtol = (5 + ln_k) * u},
        {.name = "dlogits",
         .shape = p.logits_shape(),
         .role = Role::kInputGrad,
         .atol = 3e-8 * scale,
         .rtol = (7 + ln_k) * u},
        {.name = "correct", .shape = Shape{p.B}, .role = Role::kOutput, .atol = 0.0, .rtol = 0.0},
    };
  }
  // dlogits' absolute part scales with 1/M, which depends on the drawn labels.
  static std::pair<double, double> tolerance(const CeP& q, const test::Views& v,
                                             const TensorSpec& s) {
    if (s.name != "dlogits") return {s.atol, s.rtol};
    const int64_t M = cross_entropy_target_rows(q.params(), v.index("labels"));
    return {3e-8 * 2.0 / double(std::max<int64_t>(1, M)), s.rtol};
  }
  static void run(const CeP& q, const test::Views& v, const test::RunContext& ctx) {
    const CrossEntropyParams p = q.params();
    const TensorView probs = v("probs"), dlogits = v("dlogits");
    (ctx.ref ? ref::cross_entropy_forward : cross_entropy_forward)(p, {.logits = v("logits"),
                                                                       .labels = v.index("labels"),
                                                                       .losses = v("losses"),
                                                                       .saved = {probs}});
    if (ctx.forward_only) return;
    std::vector<int64_t> correct(static_cast<size_t>(p.B), -1);
    (ctx.ref ? ref::count_correct : count_correct)(
        p, {.logits = v("logits"), .labels = v.index("labels"), .correct = correct});
    std::vector<float> correct_values(correct.begin(), correct.end());
    test::copy_values(TensorView(correct_values.data(), v("correct").shape), v("correct"));
    const bool in_place = q.in_place && !ctx.ref;
    if (in_place) test::copy_values(probs, dlogits);
    (ctx.ref ? ref::cross_entropy_backward : cross_entropy_backward)(
        p, {.saved = {in_place ? dlogits : probs},
            .labels = v.index("labels"),
            .dlosses = v("dlosses"),
            .dlogits = dlogits});
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() {
    return {{"losses", "dlosses"}};
  }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() {
    return {{"logits", "dlogits"}};
  }
  // eps = 1e-2: truncation eps^2 |L'''| / 6 with |L'''| <= 1 for log-softmax: <= 2e-5; rounding:
  // the float losses (|L| <= 10) carry 2^-24 |L| / eps <= 6e-6.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 1e-4, 1e-4}; }
};

// K below, at and above the kernel's 16-wide vectors, with and without a remainder; logits that
// underflow; B in {1, 2, 3, 8}, 1 to 3 threads; dlogits over probs on the fast path. dlogits has
// no accumulate flag (the logits are read only by the loss).
std::vector<OpCase<CeP>> cross_entropy_cases() {
  struct Size {
    int64_t N, K;
    float range;
  };
  const Size sizes[] = {
      {1, 1, 4.0f},   {1, 2, 4.0f},   {5, 3, 4.0f},    {7, 10, 8.0f},
      {13, 17, 8.0f}, {9, 10, 60.0f}, {33, 129, 8.0f}, {6, 1000, 60.0f},
      {64, 10, 3.0f}, {5, 16, 8.0f},  {3, 32, 60.0f},  {3, 5, 2.0f},  // the last: differences
  };
  std::vector<OpCase<CeP>> cases;
  int k = 0;
  for (const Size& s : sizes)
    for (int64_t B : test::model_counts())
      for (bool in_place : {false, true}) {
        OpCase<CeP> c;
        c.p = CeP{.N = s.N, .K = s.K, .range = s.range, .in_place = in_place};
        c.B = B;
        c.threads = 1 + (k++ % 3);
        c.fd = B == 1 && !in_place && s.N * s.K <= 15 && s.range <= 2.0f;
        c.name = fmt::format("N{}_K{}_range{}_B{}_t{}{}{}", s.N, s.K, int(s.range), B, c.threads,
                             in_place ? "_inplace" : "", c.fd ? "_fd" : "");
        cases.push_back(c);
      }
  // ignore_index: a language model's padding label outside the classes (-1, drawn with
  // probability 1/(K+1)) or a class (0); K = 1 with ignore_index 0 ignores every row (loss 0,
  // dlogits 0); N = n*T token rows, and vocabulary-sized K at small N (WikiText-2: 33278).
  struct Ignore {
    int64_t N, K;
    float range;
    int32_t label_lo, ignore_index;
  };
  const Ignore ignores[] = {
      {9, 3, 4.0f, -1, -1},     {40, 17, 8.0f, -1, -1},  {33, 5, 8.0f, 0, 0},
      {6, 1, 4.0f, 0, 0},       {4, 2, 2.0f, -1, -1},  // the last: differences
      {3, 33278, 8.0f, -1, -1}, {2, 10000, 60.0f, 0, 0},
  };
  for (const Ignore& s : ignores)
    for (int64_t B : test::model_counts())
      for (bool in_place : {false, true}) {
        OpCase<CeP> c;
        c.p = CeP{.N = s.N,
                  .K = s.K,
                  .range = s.range,
                  .in_place = in_place,
                  .label_lo = s.label_lo,
                  .ignore_index = s.ignore_index};
        c.B = B;
        c.threads = 1 + (k++ % 3);
        c.fd = B == 1 && !in_place && s.N * s.K <= 15 && s.range <= 2.0f;
        c.name = fmt::format("N{}_K{}_range{}_ignore{}_B{}_t{}{}{}", s.N, s.K, int(s.range),
                             s.ignore_index < 0 ? "m1" : "0", B, c.threads,
                             in_place ? "_inplace" : "", c.fd ? "_fd" : "");
        cases.push_back(c);
      }
  {  // no ignore_index: vocabulary-sized K at small N, token rows at K = 10000
    const Size big[] = {{3, 33278, 8.0f}, {64, 10000, 8.0f}};
    for (const Size& s : big)
      for (int64_t B : {int64_t{1}, int64_t{3}}) {
        OpCase<CeP> c;
        c.p = CeP{.N = s.N, .K = s.K, .range = s.range};
        c.B = B;
        c.threads = 1 + (k++ % 2);
        c.name = fmt::format("N{}_K{}_range{}_B{}_t{}", s.N, s.K, int(s.range), B, c.threads);
        cases.push_back(c);
      }
  }
  return cases;
}

class CrossEntropyHarness : public ::testing::TestWithParam<OpCase<CeP>> {};
TEST_P(CrossEntropyHarness, FusedEqualsSerial) { test::run_case<CrossEntropyOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, CrossEntropyHarness, ::testing::ValuesIn(cross_entropy_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(
    OnCuda, CrossEntropyHarness,
    ::testing::ValuesIn(test::device_cases<CrossEntropyOp>(cross_entropy_cases(), Device::kCuda)),
    test::CaseName());

// Forward, backward and count_correct on whole buffers (the NaN test below).
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

// torch's F.cross_entropy(ignore_index=...): the loss, gradient and count over the labelled rows
// equal those of the same rows alone without ignore_index; ignored rows get a zero gradient; an
// all-ignored batch gives loss 0 and a zero gradient (not PyTorch's NaN).
TEST(CrossEntropy, IgnoreIndexEqualsTheKeptRowsAlone) {
  const uint64_t seed = test::case_seed("CrossEntropy.IgnoreIndexEqualsTheKeptRowsAlone");
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 0);
  const int64_t B = 3, N = 7, K = 11;
  const CrossEntropyParams p{B, N, K, -100};
  Buffer logits = test::random_buffer(p.logits_shape(), rng, -4.0f, 4.0f);
  Buffer dlosses = test::random_buffer(p.losses_shape(), rng, 0.5f, 2.0f);
  std::vector<int32_t> labels = random_labels(N, K, rng);
  const std::vector<int64_t> kept_rows = {0, 2, 3, 6};
  for (int64_t n : {1, 4, 5}) labels[n] = -100;
  // The kept rows alone, without ignore_index.
  const CrossEntropyParams kept{B, int64_t(kept_rows.size()), K};
  Buffer kept_logits(kept.logits_shape());
  std::vector<int32_t> kept_labels;
  for (int64_t b = 0; b < B; ++b)
    for (size_t r = 0; r < kept_rows.size(); ++r)
      std::copy_n(logits.values.begin() + (b * N + kept_rows[r]) * K, K,
                  kept_logits.values.begin() + (b * kept.N + int64_t(r)) * K);
  kept_labels.reserve(kept_rows.size());
  for (int64_t n : kept_rows) kept_labels.push_back(labels[n]);
  EXPECT_EQ(cross_entropy_target_rows(p, label_view(labels)), 4);
  for (bool fast : {true, false}) {
    SCOPED_TRACE(fast ? "fast" : "reference");
    const CeResult r =
        fast ? run_cpu(p, logits, labels, dlosses, false) : run_ref(p, logits, labels, dlosses);
    const CeResult want = fast ? run_cpu(kept, kept_logits, kept_labels, dlosses, false)
                               : run_ref(kept, kept_logits, kept_labels, dlosses);
    expect_close(r.losses, want.losses, 1e-6, 1e-6, "losses");
    EXPECT_EQ(r.correct, want.correct);
    for (int64_t b = 0; b < B; ++b) {
      for (size_t k = 0; k < kept_rows.size(); ++k)
        expect_close(r.dlogits.values.data() + (b * N + kept_rows[k]) * K,
                     want.dlogits.values.data() + (b * kept.N + int64_t(k)) * K, K, 1e-7, 1e-6,
                     "dlogits of a kept row");
      for (int64_t n : {1, 4, 5})
        for (int64_t k = 0; k < K; ++k)
          EXPECT_EQ(r.dlogits.values[(b * N + n) * K + k], 0.0f) << "ignored row " << n;
    }
    // All ignored: loss 0, gradient 0, nothing correct; probs still the softmax.
    std::vector<int32_t> none(N, -100);
    const CeResult z =
        fast ? run_cpu(p, logits, none, dlosses, true) : run_ref(p, logits, none, dlosses);
    for (int64_t b = 0; b < B; ++b) {
      EXPECT_EQ(z.losses.values[b], 0.0f);
      EXPECT_EQ(z.correct[b], 0);
    }
    for (float d : z.dlogits.values) ASSERT_EQ(d, 0.0f);
    expect_close(z.probs, r.probs, 1e-7, 1e-6, "probs of ignored rows");
  }
  // A label that is neither a class nor ignore_index names both.
  labels[2] = -7;
  Buffer probs(p.logits_shape()), losses(p.losses_shape());
  try {
    cross_entropy_forward(p, {.logits = logits.view(),
                              .labels = label_view(labels),
                              .losses = losses.view(),
                              .saved = {probs.view()}});
    FAIL() << "expected hfta::Error";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find(
            "cross-entropy label -7 at row 2 is outside [0, K=11) and is not ignore_index=-100"),
        std::string::npos)
        << e.what();
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
