// Per-parameter weight decay exemption (norm parameters and biases under --no-decay-norm-bias):
// for every optimizer, B models with nonzero weight decay over a table of decayed and exempt
// segments equal, per model, the single-model reference stepped with the model's weight decay on
// the decayed tensors and 0 on the exempt ones; with a zero gradient an exempt tensor stays exactly
// as it is while a decayed one shrinks; decay flags reach the table or raise a clear error.
#include <cmath>
#include <functional>

#include "optim_harness.h"

namespace hfta {
namespace {

using namespace test;  // NOLINT: the harness

// Decayed, exempt (spanning two chunks), decayed.
const std::vector<int64_t> kExemptSizes = {1000, Optimizer::kChunkFloats + 3, 7};
const std::vector<uint8_t> kExemptFlags = {1, 0, 1};

float random_weight_decay(RngStream& rng) { return uniform(rng, 0.05f, 0.1f); }

// One reference step of model b on one tensor of n floats, with weight decay `wd`.
template <typename State>
using RefStep = std::function<void(State&, float*, const float*, int64_t n, int64_t b, double wd)>;

// k fused steps of `opt` over `a` (segments kExemptSizes, flags kExemptFlags) against the reference
// per model and tensor, with weight_decay[b] on decayed tensors and 0 on exempt ones. Also checks
// the test has teeth: decaying the exempt tensor too would move it far outside the tolerance.
template <typename State>
void check_exempt_matches_reference(Array& a, Optimizer& opt,
                                    const std::vector<float>& weight_decay,
                                    const RefStep<State>& ref_step, RngStream& rng) {
  const int64_t B = a.B, k = 5, n = a.per_model();
  const auto& segs = a.table.segments;
  ASSERT_EQ(segs.size(), kExemptFlags.size());
  for (size_t s = 0; s < segs.size(); ++s) ASSERT_EQ(segs[s].decay, kExemptFlags[s] != 0);
  std::vector<std::vector<float>> ref_p(B), all_decay_p(B);
  std::vector<std::vector<State>> ref_state(B, std::vector<State>(segs.size()));
  std::vector<std::vector<State>> all_decay_state = ref_state;
  std::vector<double> max_update(B, 0.0);
  for (int64_t b = 0; b < B; ++b) {
    ref_p[b] = all_decay_p[b] = random_vector(n, rng);
    a.set_model(a.p(), b, ref_p[b]);
  }
  const GradSteps grads = random_grads(k, B, n, rng);
  for (int64_t t = 0; t < k; ++t) {
    for (int64_t b = 0; b < B; ++b) a.set_model(a.g(), b, grads[t][b]);
    EXPECT_FALSE(opt.step(a.p(), a.g()).any_skipped());
    for (int64_t b = 0; b < B; ++b) {
      const std::vector<float> before = ref_p[b];
      int64_t at = 0;
      for (size_t s = 0; s < segs.size(); ++s) {
        const int64_t m = segs[s].per_model_numel;
        const double wd = segs[s].decay ? weight_decay[b] : 0.0;
        ref_step(ref_state[b][s], ref_p[b].data() + at, grads[t][b].data() + at, m, b, wd);
        ref_step(all_decay_state[b][s], all_decay_p[b].data() + at, grads[t][b].data() + at, m, b,
                 weight_decay[b]);
        at += m;
      }
      max_update[b] = std::max(max_update[b], max_abs_diff(before, ref_p[b]));
    }
  }
  const int64_t exempt_begin = kExemptSizes[0], exempt_size = kExemptSizes[1];
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<float> fused = a.model(a.p(), b);
    expect_matches_reference(fused, ref_p[b], k, max_update[b],
                             fmt::format("model {} parameters", b));
    const std::vector<float> exempt(fused.begin() + exempt_begin,
                                    fused.begin() + exempt_begin + exempt_size);
    const std::vector<float> decayed(all_decay_p[b].begin() + exempt_begin,
                                     all_decay_p[b].begin() + exempt_begin + exempt_size);
    EXPECT_GT(max_abs_diff(exempt, decayed), 1e-5)
        << "model " << b << ": the exempt tensor barely differs from a decayed one";
  }
}

TEST(OptimDecayExempt, AdamMatchesReferenceWithExemptSegment) {
  uint64_t seed = test::seed_for_test();
  for (WeightDecay mode : {WeightDecay::kL2, WeightDecay::kDecoupled}) {
    for (int64_t B : test::model_counts()) {
      HFTA_SEEDED_TRACE(seed);
      SCOPED_TRACE(fmt::format("B={} {}", B, mode == WeightDecay::kL2 ? "Adam" : "AdamW"));
      RngStream rng(seed++, 0);
      Array a(B, kExemptSizes, kExemptFlags);
      AdamHyper h;
      h.lr = h.beta1 = h.beta2 = h.eps = h.weight_decay = {};
      for (int64_t b = 0; b < B; ++b) {
        h.lr.push_back(std::pow(10.0f, uniform(rng, -3.0f, -1.0f)));
        h.beta1.push_back(uniform(rng, 0.0f, 0.95f));
        h.beta2.push_back(uniform(rng, 0.9f, 0.9999f));
        h.eps.push_back(std::pow(10.0f, uniform(rng, -8.0f, -3.0f)));
        h.weight_decay.push_back(random_weight_decay(rng));
      }
      FusedAdam opt(a.table, h, mode);
      check_exempt_matches_reference<ref::AdamState>(
          a, opt, h.weight_decay,
          [&](ref::AdamState& s, float* p, const float* g, int64_t n, int64_t b, double wd) {
            ref::adam_step(s, p, g, n, h.lr[b], h.beta1[b], h.beta2[b], h.eps[b], wd, mode);
          },
          rng);
    }
  }
}

TEST(OptimDecayExempt, SgdMatchesReferenceWithExemptSegment) {
  uint64_t seed = test::seed_for_test();
  // kind: 0 plain, 1 momentum, 2 Nesterov, 3 momentum with dampening, per model in turn.
  for (int64_t B : test::model_counts()) {
    HFTA_SEEDED_TRACE(seed);
    SCOPED_TRACE(fmt::format("B={}", B));
    RngStream rng(seed++, 0);
    Array a(B, kExemptSizes, kExemptFlags);
    SgdHyper h{{}, {}, {}, {}, {}};
    for (int64_t b = 0; b < B; ++b) {
      const int kind = static_cast<int>((b + B) % 4);  // B = 1 still has momentum
      h.lr.push_back(std::pow(10.0f, uniform(rng, -2.0f, -1.0f)));
      h.momentum.push_back(kind == 0 ? 0.0f : uniform(rng, 0.5f, 0.95f));
      h.dampening.push_back(kind == 3 ? uniform(rng, 0.1f, 0.9f) : 0.0f);
      h.weight_decay.push_back(random_weight_decay(rng));
      h.nesterov.push_back(kind == 2);
    }
    FusedSgd opt(a.table, h);
    check_exempt_matches_reference<ref::SgdState>(
        a, opt, h.weight_decay,
        [&](ref::SgdState& s, float* p, const float* g, int64_t n, int64_t b, double wd) {
          ref::sgd_step(s, p, g, n, h.lr[b], h.momentum[b], h.dampening[b], wd, h.nesterov[b]);
        },
        rng);
  }
}

TEST(OptimDecayExempt, AdadeltaMatchesReferenceWithExemptSegment) {
  uint64_t seed = test::seed_for_test();
  for (int64_t B : test::model_counts()) {
    HFTA_SEEDED_TRACE(seed);
    SCOPED_TRACE(fmt::format("B={}", B));
    RngStream rng(seed++, 0);
    Array a(B, kExemptSizes, kExemptFlags);
    AdadeltaHyper h{{}, {}, {}, {}};
    for (int64_t b = 0; b < B; ++b) {
      h.lr.push_back(uniform(rng, 0.1f, 1.0f));
      h.rho.push_back(uniform(rng, 0.5f, 0.95f));
      h.eps.push_back(std::pow(10.0f, uniform(rng, -6.0f, -3.0f)));
      h.weight_decay.push_back(random_weight_decay(rng));
    }
    FusedAdadelta opt(a.table, h);
    check_exempt_matches_reference<ref::AdadeltaState>(
        a, opt, h.weight_decay,
        [&](ref::AdadeltaState& s, float* p, const float* g, int64_t n, int64_t b, double wd) {
          ref::adadelta_step(s, p, g, n, h.lr[b], h.rho[b], h.eps[b], wd);
        },
        rng);
  }
}

TEST(OptimDecayExempt, RmspropMatchesReferenceWithExemptSegment) {
  uint64_t seed = test::seed_for_test();
  for (int64_t B : test::model_counts()) {
    HFTA_SEEDED_TRACE(seed);
    SCOPED_TRACE(fmt::format("B={}", B));
    RngStream rng(seed++, 0);
    Array a(B, kExemptSizes, kExemptFlags);
    RmspropHyper h{{}, {}, {}, {}, {}, {}};
    for (int64_t b = 0; b < B; ++b) {
      // Every (centered, momentum) pair across the models; B = 1 gets both.
      const int kind = static_cast<int>((b + 3) % 4);
      h.lr.push_back(std::pow(10.0f, uniform(rng, -3.0f, -2.0f)));
      h.alpha.push_back(uniform(rng, 0.9f, 0.99f));
      h.eps.push_back(std::pow(10.0f, uniform(rng, -8.0f, -3.0f)));
      h.weight_decay.push_back(random_weight_decay(rng));
      h.momentum.push_back(kind & 1 ? uniform(rng, 0.5f, 0.9f) : 0.0f);
      h.centered.push_back(kind & 2 ? 1 : 0);
    }
    FusedRmsprop opt(a.table, h);
    check_exempt_matches_reference<ref::RmspropState>(
        a, opt, h.weight_decay,
        [&](ref::RmspropState& s, float* p, const float* g, int64_t n, int64_t b, double wd) {
          ref::rmsprop_step(s, p, g, n, h.lr[b], h.alpha[b], h.eps[b], wd, h.momentum[b],
                            h.centered[b] != 0);
        },
        rng);
  }
}

// ---------------------------------------------------------------------------------------------
// Zero gradient: weight decay alone moves a decayed tensor toward 0 and leaves an exempt one as it
// is, bit for bit (its update is exactly 0 with weight decay 0).

void check_zero_gradient(Optimizer& opt, Array& a, const std::string& what) {
  SCOPED_TRACE(what);
  RngStream rng(test::seed_for_test(), 0);
  for (int64_t b = 0; b < a.B; ++b) {
    std::vector<float> init = random_vector(a.per_model(), rng);
    for (float& x : init) x = std::copysign(0.5f + std::fabs(x), x);  // |x| in [0.5, 1.5]
    a.set_model(a.p(), b, init);
    a.set_model(a.g(), b, std::vector<float>(a.per_model(), 0.0f));
  }
  const int64_t exempt_begin = kExemptSizes[0], exempt_end = exempt_begin + kExemptSizes[1];
  for (int t = 0; t < 3; ++t) {
    std::vector<std::vector<float>> before(a.B);
    for (int64_t b = 0; b < a.B; ++b) before[b] = a.model(a.p(), b);
    EXPECT_FALSE(opt.step(a.p(), a.g()).any_skipped());
    for (int64_t b = 0; b < a.B; ++b) {
      const std::vector<float> after = a.model(a.p(), b);
      int64_t not_shrunk = 0;
      for (int64_t i = 0; i < a.per_model(); ++i) {
        if (i >= exempt_begin && i < exempt_end) continue;
        not_shrunk += !(std::fabs(after[i]) < std::fabs(before[b][i]) &&
                        std::signbit(after[i]) == std::signbit(before[b][i]));
      }
      EXPECT_EQ(not_shrunk, 0) << "step " << t << " model " << b
                               << ": decayed parameters that did not move toward 0";
      expect_bitwise(
          std::vector<float>(after.begin() + exempt_begin, after.begin() + exempt_end),
          std::vector<float>(before[b].begin() + exempt_begin, before[b].begin() + exempt_end),
          fmt::format("step {} model {}: the exempt tensor", t, b));
    }
  }
}

TEST(OptimDecayExempt, ZeroGradientLeavesExemptTensorExactlyUnchanged) {
  const int64_t B = 2;
  for (WeightDecay mode : {WeightDecay::kL2, WeightDecay::kDecoupled}) {
    Array a(B, kExemptSizes, kExemptFlags);
    FusedAdam opt(a.table, AdamHyper{.lr = {1e-2f, 3e-3f}, .weight_decay = {0.1f, 0.05f}}, mode);
    check_zero_gradient(opt, a, mode == WeightDecay::kL2 ? "Adam" : "AdamW");
  }
  {
    Array a(B, kExemptSizes, kExemptFlags);
    FusedSgd opt(a.table, SgdHyper{.lr = {0.1f}, .weight_decay = {0.1f, 0.05f}});
    check_zero_gradient(opt, a, "SGD");
  }
  {
    Array a(B, kExemptSizes, kExemptFlags);
    FusedSgd opt(
        a.table,
        SgdHyper{
            .lr = {0.1f}, .momentum = {0.9f}, .weight_decay = {0.1f, 0.05f}, .nesterov = {0, 1}});
    check_zero_gradient(opt, a, "SGD with momentum, Nesterov for model 1");
  }
}

// ---------------------------------------------------------------------------------------------
// Flags reach the table.

TEST(OptimDecayExempt, FlagsFromViewsAndErrors) {
  float base[64] = {};
  const std::vector<TensorView> views = {TensorView(base, {2, 3}), TensorView(base + 16, {2, 5})};
  const ParamTable all = ParamTable::from_views(base, 64, views);
  ASSERT_EQ(all.segments.size(), 2u);
  EXPECT_TRUE(all.segments[0].decay && all.segments[1].decay);

  const std::vector<uint8_t> flags = {1, 0};
  const ParamTable exempt = ParamTable::from_views(base, 64, views, flags);
  EXPECT_TRUE(exempt.segments[0].decay);
  EXPECT_FALSE(exempt.segments[1].decay);

  const Array a(2, {3, 5}, {0, 1});
  EXPECT_FALSE(a.table.segments[0].decay);
  EXPECT_TRUE(a.table.segments[1].decay);

  const std::vector<uint8_t> three = {1, 0, 1};
  expect_error([&] { ParamTable::from_views(base, 64, views, three); },
               "the parameter table got 3 weight decay flags for 2 parameters: give one per "
               "parameter, or none (every parameter decays)");
  // A table given directly decays every segment unless told otherwise.
  const ParamTable direct{2, {{0, 4}, {8, 3, false}}, 64};
  EXPECT_TRUE(direct.segments[0].decay);
  EXPECT_FALSE(direct.segments[1].decay);
}

}  // namespace
}  // namespace hfta
