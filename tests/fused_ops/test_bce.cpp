// Fused binary cross-entropy with logits on the op harness (tests/op_harness.h): each model's
// loss, mean sigmoid and logit gradient equal a single-model reference run, for all-real,
// all-fake and soft targets, moderate and saturating logits; the reference equals finite
// differences and known values (BCEWithLogitsLoss, not BCELoss's clamp); a NaN in one model
// leaves the others untouched; bad targets and shapes raise hfta::Error.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "fused_ops/bce.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_error_containing;
using test::OpCase;
using test::Role;
using test::TensorSpec;

// Unit roundoff: the relative error of one correctly rounded float operation.
constexpr double kUnitRoundoff = 1.0 / (1 << 24);

enum class Targets { kReal, kFake, kSoft };  // all 1, all 0, values in [0, 1] with 0s and 1s

const char* targets_name(Targets t) {
  return t == Targets::kReal ? "real" : t == Targets::kFake ? "fake" : "soft";
}

struct BceP {
  int64_t B = 1;
  int64_t N = 1;
  float range = 4.0f;  // logits uniform in [-range, range]; 30 saturates sigmoid in fp32
  Targets targets = Targets::kSoft;
  bool mean_sigmoid = true;  // ask for the optional output
  BceWithLogitsParams params() const { return {B, N}; }
};

struct BceOp {
  using Params = BceP;
  static std::string describe(const BceP& q) {
    return fmt::format("N={} range={} targets={} mean_sigmoid={}", q.N, q.range,
                       targets_name(q.targets), q.mean_sigmoid);
  }
  // Error budget against the double reference, u = 2^-24, per logit x with |x| <= range:
  // - loss term max(x, 0) - x t + log1p(exp(-|x|)): x t and the two sums round (u each, on
  //   values up to |x| + 1), expf/log1pf are within ~1 ulp on a log1p term <= ln 2: under
  //   u (4 |x| + 3); the double mean keeps that bound, and rounds once more (u relative).
  // - sigmoid from e = exp(-|x|): e, 1 + e and the division, ~3u relative on a value <= 1; so
  //   mean_sigmoid within 4u, and sigmoid - t within 3u absolute (t exact); dlogits multiplies
  //   by scale = dlosses / N (<= 2/N, rounded: u) and rounds (u), plus the += when
  //   accumulating.
  // On the GPU (fused_ops/cuda/bce_math.h) expf and log1pf are CUDA's, documented within 2 and
  // 1 ulp: e within 4u moves log1p(e) by 4u e / (1 + e) <= 2u and log1pf adds 2u log1p(e) <=
  // 1.4u, so 3u more per term; the sigmoid within 4u (1/(1+e)) or 4u s + 2u s + u s <= 3.5u
  // absolute (e/(1+e), s <= 1/2), so mean_sigmoid within 6u and sigmoid - t within 6u.
  static std::vector<TensorSpec> tensors(const BceP& q, const OpCase<BceP>& c) {
    const BceWithLogitsParams p = q.params();
    const bool device = c.device == Device::kCuda;
    const double u = kUnitRoundoff, scale = 2.0 / double(p.N);
    TensorSpec targets{.name = "targets",
                       .shape = p.targets_shape(),
                       .layout = test::Layout::kShared,
                       .lo = 0.0f,
                       .hi = 1.0f};
    const Targets kind = q.targets;
    targets.adjust = [kind](std::vector<float>& v) {
      for (size_t i = 0; i < v.size(); ++i) {
        if (kind != Targets::kSoft)
          v[i] = kind == Targets::kReal ? 1.0f : 0.0f;
        else if (i % 3 == 0)
          v[i] = float(i % 2);  // exact 0s and 1s among the soft labels
      }
    };
    std::vector<TensorSpec> t = {
        {.name = "logits", .shape = p.logits_shape(), .lo = -q.range, .hi = q.range},
        targets,
        {.name = "dlosses", .shape = p.losses_shape(), .lo = 0.5f, .hi = 2.0f},
        {.name = "losses",
         .shape = p.losses_shape(),
         .role = Role::kOutput,
         .atol = u * (4.0 * q.range + (device ? 6.0 : 3.0)),
         .rtol = u},
        {.name = "dlogits",
         .shape = p.logits_shape(),
         .role = Role::kInputGrad,
         .atol = scale * (device ? 6.0 : 4.0) * u,
         .rtol = 3.0 * u},
    };
    if (q.mean_sigmoid)
      t.push_back({.name = "mean_sigmoid",
                   .shape = p.losses_shape(),
                   .role = Role::kOutput,
                   .atol = (device ? 6.0 : 4.0) * u,
                   .rtol = u});
    return t;
  }
  static void run(const BceP& q, const test::Views& v, const test::RunContext& ctx) {
    const BceWithLogitsParams p = q.params();
    const BceWithLogitsForwardArgs f{.logits = v("logits"),
                                     .targets = v("targets"),
                                     .losses = v("losses"),
                                     .mean_sigmoid = v("mean_sigmoid")};
    const BceWithLogitsBackwardArgs b{.logits = v("logits"),
                                      .targets = v("targets"),
                                      .dlosses = v("dlosses"),
                                      .dlogits = v("dlogits"),
                                      .accumulate_dx = ctx.accumulate_dx};
    if (ctx.ref) {
      ref::bce_with_logits_forward(p, f);
      if (!ctx.forward_only) ref::bce_with_logits_backward(p, b);
    } else {
      bce_with_logits_forward(p, f);
      bce_with_logits_backward(p, b);
    }
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() {
    return {{"losses", "dlosses"}};
  }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() {
    return {{"logits", "dlogits"}};
  }
  // eps = 1e-2: truncation eps^2 |softplus'''| / 6 / N <= 2e-6; rounding: the float loss (about
  // u * 3 at |loss| <~ 3), times dlosses <= 2, over 2 eps: ~2e-5; the perturbed logit itself
  // rounds (u |x| <= 1e-6 of a 1e-2 step).
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 1e-4, 1e-3}; }
};

// N on both sides of 16-float vectors and of the threads' threshold (16K logits at B = 8),
// B in {1, 2, 3, 8}, every target kind, moderate and saturating logits, 1 and 2 threads, half
// accumulating, mean_sigmoid asked and skipped; finite differences on small single models.
std::vector<OpCase<BceP>> bce_cases() {
  std::vector<OpCase<BceP>> out;
  int k = 0;
  for (int64_t N : {1, 5, 16, 17, 64, 128, 2049})
    for (Targets targets : {Targets::kReal, Targets::kFake, Targets::kSoft})
      for (float range : {4.0f, 30.0f})
        for (int64_t B : test::model_counts()) {
          OpCase<BceP> c;
          c.p = BceP{.N = N, .range = range, .targets = targets, .mean_sigmoid = k % 4 != 3};
          c.B = B;
          c.threads = 1 + k % 2;
          c.accumulate_dx = k % 3 == 1;
          c.fd = B == 1 && range < 10.0f && N <= 17;
          ++k;
          c.name = fmt::format("N{}_{}_range{}_B{}_t{}{}{}", N, targets_name(targets), int(range),
                               B, c.threads, c.accumulate_dx ? "_acc" : "",
                               c.p.mean_sigmoid ? "" : "_nosig");
          out.push_back(c);
        }
  return out;
}

class BceHarness : public ::testing::TestWithParam<OpCase<BceP>> {};
TEST_P(BceHarness, FusedEqualsSerial) { test::run_case<BceOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, BceHarness, ::testing::ValuesIn(bce_cases()), test::CaseName());
// The same cases on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCuda, BceHarness,
                         ::testing::ValuesIn(test::device_cases<BceOp>(bce_cases(), Device::kCuda)),
                         test::CaseName());

// Values worked out by hand, on the fast path and the reference: x = 0 costs ln 2 whatever the
// target; saturated logits cost about |x| and keep the gradient +-1/N (BCEWithLogitsLoss;
// Sigmoid + BCELoss would give 100 and 0 there).
TEST(BceWithLogits, KnownValues) {
  const BceWithLogitsParams p{2, 4};
  Buffer logits(p.logits_shape()), targets(p.targets_shape()), losses(p.losses_shape()),
      sig(p.losses_shape()), dlosses(p.losses_shape(), 1.0f), dlogits(p.logits_shape());
  logits.values = {0.0f, 0.0f, 0.0f, 0.0f, 50.0f, -50.0f, -50.0f, 50.0f};
  targets.values = {0.0f, 1.0f, 0.0f, 1.0f};
  for (bool use_ref : {false, true}) {
    SCOPED_TRACE(use_ref ? "reference" : "fast");
    const BceWithLogitsForwardArgs f{.logits = logits.view(),
                                     .targets = targets.view(),
                                     .losses = losses.view(),
                                     .mean_sigmoid = sig.view()};
    const BceWithLogitsBackwardArgs b{.logits = logits.view(),
                                      .targets = targets.view(),
                                      .dlosses = dlosses.view(),
                                      .dlogits = dlogits.view()};
    if (use_ref) {
      ref::bce_with_logits_forward(p, f);
      ref::bce_with_logits_backward(p, b);
    } else {
      bce_with_logits_forward(p, f);
      bce_with_logits_backward(p, b);
    }
    EXPECT_FLOAT_EQ(losses.values[0], std::log(2.0f));
    EXPECT_FLOAT_EQ(sig.values[0], 0.5f);
    EXPECT_FLOAT_EQ(dlogits.values[0], 0.5f / 4);
    EXPECT_FLOAT_EQ(dlogits.values[1], -0.5f / 4);
    // Model 1: 50 against 0 and -50 against 1 each cost 50 (+ log1p(e^-50)), the right ones ~0.
    EXPECT_FLOAT_EQ(losses.values[1], 50.0f / 2);
    EXPECT_FLOAT_EQ(sig.values[1], 0.5f);
    EXPECT_FLOAT_EQ(dlogits.values[4], 1.0f / 4);
    EXPECT_FLOAT_EQ(dlogits.values[5], -1.0f / 4);
    EXPECT_NEAR(dlogits.values[6], 0.0f, 1e-20);
    EXPECT_NEAR(dlogits.values[7], 0.0f, 1e-20);
  }
}

TEST(BceWithLogits, NanLogitPoisonsOnlyItsModel) {
  const BceWithLogitsParams p{3, 20};
  RngStream rng(test::seed_for_test(), 3);
  Buffer logits = test::random_buffer(p.logits_shape(), rng, -3.0f, 3.0f);
  Buffer targets(p.targets_shape(), 1.0f), dlosses(p.losses_shape(), 1.0f);
  auto run = [&](const Buffer& x) {
    Buffer in = x, losses(p.losses_shape()), sig(p.losses_shape()), d(p.logits_shape());
    bce_with_logits_forward(p, {.logits = in.view(),
                                .targets = targets.view(),
                                .losses = losses.view(),
                                .mean_sigmoid = sig.view()});
    bce_with_logits_backward(p, {.logits = in.view(),
                                 .targets = targets.view(),
                                 .dlosses = dlosses.view(),
                                 .dlogits = d.view()});
    return std::tuple{losses, sig, d};
  };
  Buffer poisoned = logits;
  poisoned.values[1 * p.N + 7] = std::numeric_limits<float>::quiet_NaN();
  const auto [l0, s0, d0] = run(logits);
  const auto [l1, s1, d1] = run(poisoned);
  for (int64_t b = 0; b < p.B; ++b) {
    EXPECT_EQ(std::isnan(l1.values[b]), b == 1) << "loss of model " << b;
    EXPECT_EQ(std::isnan(s1.values[b]), b == 1) << "mean_sigmoid of model " << b;
    if (b != 1) {
      EXPECT_EQ(l1.values[b], l0.values[b]);
      EXPECT_EQ(s1.values[b], s0.values[b]);
    }
  }
  for (int64_t i = 0; i < p.B * p.N; ++i)
    if (i == 1 * p.N + 7)
      EXPECT_TRUE(std::isnan(d1.values[i]));
    else
      EXPECT_EQ(d1.values[i], d0.values[i]) << "gradient " << i;
}

TEST(BceWithLogits, BadTargetsAndShapesRaiseClearErrors) {
  const BceWithLogitsParams p{2, 3};
  Buffer logits(p.logits_shape()), targets(p.targets_shape(), 1.0f), losses(p.losses_shape()),
      dlosses(p.losses_shape(), 1.0f), dlogits(p.logits_shape()), wrong(Shape{3, 2});
  auto forward = [&](TensorView x, TensorView t, TensorView l, TensorView s) {
    return [=] {
      bce_with_logits_forward(p, {.logits = x, .targets = t, .losses = l, .mean_sigmoid = s});
    };
  };
  targets.values[2] = 1.5f;
  expect_error_containing(forward(logits.view(), targets.view(), losses.view(), {}),
                          "bce_with_logits target 1.5 at sample 2 is outside [0, 1]");
  targets.values[2] = std::numeric_limits<float>::quiet_NaN();
  expect_error_containing(forward(logits.view(), targets.view(), losses.view(), {}),
                          "target nan at sample 2");
  targets.values[2] = 0.0f;
  expect_error_containing(forward(wrong.view(), targets.view(), losses.view(), {}),
                          "bce_with_logits logits has shape [3, 2], expected [2, 3]");
  expect_error_containing(forward(logits.view(), targets.view(), {}, {}),
                          "bce_with_logits losses is missing");
  expect_error_containing(forward(logits.view(), targets.view(), losses.view(), logits.view()),
                          "bce_with_logits mean_sigmoid has shape [2, 3], expected [2]");
  expect_error_containing(forward(logits.view(), losses.view(), losses.view(), {}),
                          "bce_with_logits targets has shape [2], expected [3]");
  expect_error_containing(
      [&] {
        bce_with_logits_backward(p, {.logits = logits.view(),
                                     .targets = targets.view(),
                                     .dlosses = dlosses.view(),
                                     .dlogits = wrong.view()});
      },
      "bce_with_logits logits gradient has shape [3, 2]");
  expect_error_containing(
      [&] {
        bce_with_logits_forward(
            BceWithLogitsParams{2, 0},
            {.logits = logits.view(), .targets = targets.view(), .losses = losses.view()});
      },
      "bce_with_logits sizes must be positive");
}

}  // namespace
}  // namespace hfta
