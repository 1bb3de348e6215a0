// Fused optimizers: k fused steps of B models with different hyperparameters equal, for each model,
// k steps of the single-model reference; a model in an array updates bitwise as it does alone, also
// when another model's gradient is NaN/Inf (that model is skipped) or another model is reset;
// hyperparameter lists expand or raise clear errors; LR schedules give PyTorch's values.
#include <cmath>
#include <limits>

#include "optim/lr_schedule.h"
#include "optim_harness.h"

namespace hfta {
namespace {

using namespace test;  // NOLINT: the harness

AdamHyper random_adam_hyper(int64_t B, RngStream& rng) {
  AdamHyper h;
  h.lr = h.beta1 = h.beta2 = h.eps = h.weight_decay = {};
  for (int64_t b = 0; b < B; ++b) {
    h.lr.push_back(std::pow(10.0f, uniform(rng, -4.0f, -1.0f)));
    h.beta1.push_back(uniform(rng, 0.0f, 0.95f));
    h.beta2.push_back(uniform(rng, 0.9f, 0.9999f));
    h.eps.push_back(std::pow(10.0f, uniform(rng, -8.0f, -2.0f)));
    h.weight_decay.push_back(b % 2 ? uniform(rng, 0.0f, 0.1f) : 0.0f);
  }
  return h;
}

// ---------------------------------------------------------------------------------------------
// Fused equals reference.

void check_adam_matches_reference(int64_t B, WeightDecay decay, uint64_t seed) {
  HFTA_SEEDED_TRACE(seed);
  SCOPED_TRACE(fmt::format("B={} decay={}", B, decay == WeightDecay::kL2 ? "L2" : "decoupled"));
  RngStream rng(seed, 0);
  const int64_t k = 5;
  Array a(B, kSizes);
  const AdamHyper h = random_adam_hyper(B, rng);
  FusedAdam opt(a.table, h, decay);
  std::vector<std::vector<float>> ref_p(B);
  std::vector<ref::AdamState> ref_state(B);
  std::vector<double> max_update(B, 0.0);
  for (int64_t b = 0; b < B; ++b) {
    ref_p[b] = random_vector(a.per_model(), rng);
    a.set_model(a.p(), b, ref_p[b]);
  }
  const GradSteps grads = random_grads(k, B, a.per_model(), rng);
  for (int64_t t = 0; t < k; ++t) {
    for (int64_t b = 0; b < B; ++b) a.set_model(a.g(), b, grads[t][b]);
    EXPECT_FALSE(opt.step(a.p(), a.g()).any_skipped());
    for (int64_t b = 0; b < B; ++b) {
      std::vector<float> before = ref_p[b];
      ref::adam_step(ref_state[b], ref_p[b].data(), grads[t][b].data(), a.per_model(), h.lr[b],
                     h.beta1[b], h.beta2[b], h.eps[b], h.weight_decay[b], decay);
      max_update[b] = std::max(max_update[b], max_abs_diff(before, ref_p[b]));
    }
  }
  for (int64_t b = 0; b < B; ++b) {
    EXPECT_EQ(opt.steps()[b], k);
    expect_matches_reference(a.model(a.p(), b), ref_p[b], k, max_update[b],
                             fmt::format("model {} parameters", b));
  }
}

TEST(OptimAdam, MatchesReferenceWithPerModelHyperparameters) {
  uint64_t seed = test::seed_for_test();
  for (int64_t B : test::model_counts()) check_adam_matches_reference(B, WeightDecay::kL2, seed++);
}

TEST(OptimAdamW, MatchesReferenceWithPerModelHyperparameters) {
  uint64_t seed = test::seed_for_test() + 100;
  for (int64_t B : test::model_counts())
    check_adam_matches_reference(B, WeightDecay::kDecoupled, seed++);
}

// kind: 0 plain, 1 momentum, 2 Nesterov, 3 momentum with dampening, 4 mixed per model. Odd models
// have weight decay.
SgdHyper random_sgd_hyper(int64_t B, int kind, RngStream& rng) {
  SgdHyper h{{}, {}, {}, {}, {}};
  for (int64_t b = 0; b < B; ++b) {
    const int model_kind = kind == 4 ? static_cast<int>(b % 4) : kind;
    h.lr.push_back(std::pow(10.0f, uniform(rng, -3.0f, -1.0f)));
    h.momentum.push_back(model_kind == 0 ? 0.0f : uniform(rng, 0.5f, 0.99f));
    h.dampening.push_back(model_kind == 3 ? uniform(rng, 0.1f, 0.9f) : 0.0f);
    h.weight_decay.push_back(b % 2 ? uniform(rng, 0.0f, 0.1f) : 0.0f);
    h.nesterov.push_back(model_kind == 2);
  }
  return h;
}

void check_sgd_matches_reference(int64_t B, int kind, uint64_t seed) {
  HFTA_SEEDED_TRACE(seed);
  SCOPED_TRACE(fmt::format("B={} kind={}", B, kind));
  RngStream rng(seed, 0);
  const int64_t k = 5;
  Array a(B, kSizes);
  const SgdHyper h = random_sgd_hyper(B, kind, rng);
  FusedSgd opt(a.table, h);
  const bool any_momentum =
      std::any_of(h.momentum.begin(), h.momentum.end(), [](float m) { return m > 0.0f; });
  EXPECT_EQ(opt.num_state_buffers(), any_momentum ? 1 : 0);
  std::vector<std::vector<float>> ref_p(B);
  std::vector<ref::SgdState> ref_state(B);
  std::vector<double> max_update(B, 0.0);
  for (int64_t b = 0; b < B; ++b) {
    ref_p[b] = random_vector(a.per_model(), rng);
    a.set_model(a.p(), b, ref_p[b]);
  }
  const GradSteps grads = random_grads(k, B, a.per_model(), rng);
  for (int64_t t = 0; t < k; ++t) {
    for (int64_t b = 0; b < B; ++b) a.set_model(a.g(), b, grads[t][b]);
    opt.step(a.p(), a.g());
    for (int64_t b = 0; b < B; ++b) {
      std::vector<float> before = ref_p[b];
      ref::sgd_step(ref_state[b], ref_p[b].data(), grads[t][b].data(), a.per_model(), h.lr[b],
                    h.momentum[b], h.dampening[b], h.weight_decay[b], h.nesterov[b]);
      max_update[b] = std::max(max_update[b], max_abs_diff(before, ref_p[b]));
    }
  }
  for (int64_t b = 0; b < B; ++b)
    expect_matches_reference(a.model(a.p(), b), ref_p[b], k, max_update[b],
                             fmt::format("model {} parameters", b));
}

TEST(OptimSgd, MatchesReferenceWithPerModelHyperparameters) {
  uint64_t seed = test::seed_for_test() + 200;
  for (int kind = 0; kind <= 4; ++kind)
    for (int64_t B : test::model_counts()) check_sgd_matches_reference(B, kind, seed++);
}

// ---------------------------------------------------------------------------------------------
// A model in an array updates bitwise as it does alone: skipped steps and resets included.

TEST(OptimSkip, NanOrInfGradientSkipsOnlyThatModel) {
  uint64_t seed = test::seed_for_test() + 300;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (float bad : {nan, inf, -inf}) {
    RngStream rng(seed, 1);
    check_nonfinite_model_is_skipped<FusedAdam>(random_adam_hyper(3, rng), bad, seed++);
    check_nonfinite_model_is_skipped<FusedAdamW>(random_adam_hyper(3, rng), bad, seed++);
    check_nonfinite_model_is_skipped<FusedSgd>(random_sgd_hyper(3, 4, rng), bad, seed++);
  }
}

TEST(OptimStepModels, BlocksOnTwoThreadsEqualOneStep) {
  uint64_t seed = test::seed_for_test() + 350;
  RngStream rng(seed, 1);
  check_step_models_equals_step<FusedAdam>(random_adam_hyper(5, rng), seed++);
  check_step_models_equals_step<FusedAdamW>(random_adam_hyper(5, rng), seed++);
  check_step_models_equals_step<FusedSgd>(random_sgd_hyper(5, 4, rng), seed++);
}

TEST(OptimSkip, AllModelsNonFiniteChangesNothing) {
  Array a(2, {5});
  FusedAdam opt(a.table, AdamHyper{});
  a.g()[0] = std::numeric_limits<float>::quiet_NaN();
  a.g()[7] = std::numeric_limits<float>::infinity();
  const StepReport& report = opt.step(a.p(), a.g());
  EXPECT_EQ(report.num_skipped, 2);
  EXPECT_EQ(opt.steps()[0] + opt.steps()[1], 0);
  EXPECT_EQ(opt.skip_counts()[0] + opt.skip_counts()[1], 2);
}

TEST(OptimReset, ResetModelRestartsOnlyThatModel) {
  uint64_t seed = test::seed_for_test() + 400;
  RngStream rng(seed, 1);
  check_reset_model<FusedAdam>(random_adam_hyper(3, rng), seed++);
  check_reset_model<FusedAdamW>(random_adam_hyper(3, rng), seed++);
  check_reset_model<FusedSgd>(random_sgd_hyper(3, 3, rng), seed++);  // dampening: first step
  check_reset_model<FusedSgd>(random_sgd_hyper(3, 4, rng), seed++);
  Array a(3, {4});
  FusedSgd opt(a.table, SgdHyper{});
  try {
    opt.reset_model(3);
    FAIL() << "expected hfta::Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cannot reset model 3: the array has models 0..2");
  }
}

// A checkpoint is the parameters, the state buffers and the step counts: restored into a new
// optimizer, training continues bitwise as if never interrupted.
TEST(OptimState, RestoredOptimizerContinuesExactly) {
  uint64_t seed = test::seed_for_test() + 500;
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 0);
  const int64_t B = 3;
  const AdamHyper h = random_adam_hyper(B, rng);
  Array a(B, {7, 1000}), b(B, {7, 1000});
  for (int64_t m = 0; m < B; ++m) a.set_model(a.p(), m, random_vector(a.per_model(), rng));
  const GradSteps grads = random_grads(4, B, a.per_model(), rng);
  auto step = [&](Array& arr, Optimizer& opt, int64_t t) {
    for (int64_t m = 0; m < B; ++m) arr.set_model(arr.g(), m, grads[t][m]);
    opt.step(arr.p(), arr.g());
  };
  FusedAdamW first(a.table, h);
  step(a, first, 0);
  step(a, first, 1);
  FusedAdamW restored(b.table, h);
  std::copy_n(a.p(), a.table.total_floats, b.p());
  for (int i = 0; i < first.num_state_buffers(); ++i)
    std::copy_n(first.state_buffer(i), a.table.total_floats, restored.state_buffer(i));
  restored.set_steps(first.steps());
  for (int64_t t = 2; t < 4; ++t) {
    step(a, first, t);
    step(b, restored, t);
  }
  for (int64_t m = 0; m < B; ++m)
    expect_bitwise(b.model(b.p(), m), a.model(a.p(), m), fmt::format("model {}", m));
  const std::vector<int64_t> negative = {1, -1, 2};
  expect_error([&] { restored.set_steps(negative); },
               "model 1: step count = -1 is out of range: expected a step count >= 0");
}

// ---------------------------------------------------------------------------------------------
// Hyperparameter lists and errors.

TEST(OptimHyper, ListsExpandToOnePerModel) {
  const std::vector<float> one = {0.5f}, four = {1, 2, 3, 4}, three = {1, 2, 3};
  EXPECT_EQ(expand_per_model(one, 4, "--beta1"), (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(expand_per_model(four, 4, "--beta1"), four);
  expect_error([&] { expand_per_model(three, 4, "--beta1"); },
               "--beta1 has 3 values but the array has 4 models: give one value (shared) or 4 "
               "(one per model)");
  expect_error([&] { expand_per_model(three, 1, "--lr"); },
               "--lr has 3 values but the array has 1 model: give one value (shared) or 1 (one "
               "per model)");
  expect_error([&] { expand_per_model(std::vector<float>{}, 2, "--eps"); },
               "--eps has 0 values but the array has 2 models: give one value (shared) or 2 (one "
               "per model)");

  Array a(4, {3});
  AdamHyper h;
  h.lr = {1e-3f, 2e-3f, 3e-3f, 4e-3f};
  FusedAdam adam(a.table, h);
  EXPECT_EQ(adam.hyper().beta1, std::vector<float>(4, 0.9f));
  EXPECT_EQ(std::vector<float>(adam.lr().begin(), adam.lr().end()), h.lr);
  h.beta1 = {0.9f, 0.8f, 0.7f};
  expect_error([&] { FusedAdam(a.table, h); },
               "beta1 has 3 values but the array has 4 models: give one value (shared) or 4 (one "
               "per model)");
  SgdHyper s;
  s.nesterov = {1, 0};
  expect_error([&] { FusedSgd(a.table, s); },
               "nesterov has 2 values but the array has 4 models: give one value (shared) or 4 "
               "(one per model)");
}

TEST(OptimHyper, OutOfRangeValuesNameTheModel) {
  Array a(2, {3});
  auto adam_error = [&](const AdamHyper& h, const std::string& message) {
    expect_error([&] { FusedAdam opt(a.table, h); }, message);
  };
  adam_error({.beta1 = {0.9f, 1.0f}},
             "model 1: beta1 = 1 is out of range: expected 0 <= beta1 < 1");
  adam_error({.beta2 = {-0.5f}}, "model 0: beta2 = -0.5 is out of range: expected 0 <= beta2 < 1");
  adam_error({.lr = {1e-3f, -1.0f}}, "model 1: lr = -1 is out of range: expected a finite lr >= 0");
  adam_error({.lr = {std::numeric_limits<float>::quiet_NaN()}},
             "model 0: lr = nan is out of range: expected a finite lr >= 0");
  adam_error({.eps = {0.0f}}, "model 0: eps = 0 is out of range: expected a finite eps > 0");
  adam_error({.weight_decay = {0.0f, -0.1f}},
             "model 1: weight_decay = -0.1 is out of range: expected a finite weight_decay >= 0");

  auto sgd_error = [&](const SgdHyper& h, const std::string& message) {
    expect_error([&] { FusedSgd opt(a.table, h); }, message);
  };
  sgd_error({.momentum = {0.9f, -0.1f}},
            "model 1: momentum = -0.1 is out of range: expected a finite momentum >= 0");
  sgd_error({.dampening = {1.5f}},
            "model 0: dampening = 1.5 is out of range: expected 0 <= dampening <= 1");
  sgd_error({.nesterov = {0, 1}},
            "model 1: Nesterov momentum needs momentum > 0 and dampening = 0, got momentum = 0 "
            "and dampening = 0: set a momentum, zero the dampening, or turn Nesterov off");
  sgd_error({.momentum = {0.9f}, .dampening = {0.0f, 0.5f}, .nesterov = {1}},
            "model 1: Nesterov momentum needs momentum > 0 and dampening = 0, got momentum = 0.9 "
            "and dampening = 0.5: set a momentum, zero the dampening, or turn Nesterov off");

  FusedAdam opt(a.table, AdamHyper{});
  const std::vector<float> three = {1, 2, 3}, negative = {1e-3f, -2.0f};
  expect_error([&] { opt.set_lr(three); },
               "set_lr got 3 learning rates but the array has 2 models: give one per model");
  expect_error([&] { opt.set_lr(negative); },
               "model 1: lr = -2 is out of range: expected a finite lr >= 0");
}

TEST(OptimParamTable, OffsetsFromViewsAndLayoutErrors) {
  Array a(3, {2, 20, 5});
  // Each tensor starts on a 64-byte boundary: 2*3 floats pad to 16, 20*3 to 64.
  ASSERT_EQ(a.table.segments.size(), 3u);
  EXPECT_EQ(a.table.segments[0].offset, 0);
  EXPECT_EQ(a.table.segments[1].offset, 16);
  EXPECT_EQ(a.table.segments[2].offset, 80);
  EXPECT_EQ(a.table.segments[2].per_model_numel, 5);
  EXPECT_EQ(a.table.total_floats, 96);
  EXPECT_EQ(a.table.per_model_numel(), 27);

  float base[64] = {};
  const std::vector<TensorView> mixed = {TensorView(base, {2, 3}), TensorView(base + 16, {3, 3})};
  expect_error([&] { ParamTable::from_views(base, 64, mixed); },
               "parameter 1 has shape [3, 3] but parameter 0 has B=2: every parameter is [B, ...]");
  const std::vector<TensorView> outside = {TensorView(base + 60, {2, 3})};
  expect_error([&] { ParamTable::from_views(base, 64, outside); },
               "parameter 0 (shape [2, 3]) lies outside the parameter arena of 64 floats");
  ParamTable overlapping{2, {{0, 4}, {6, 1}}, 64};
  expect_error([&] { overlapping.check(); },
               "parameter segment at offset 6 overlaps the previous one, which ends at 8: each "
               "float of the arena belongs to at most one parameter");
  ParamTable too_long{2, {{0, 40}}, 64};
  expect_error([&] { too_long.check(); },
               "parameter segments reach float 80 but the arena holds 64 floats");
  // A table given directly works as one built from views.
  ParamTable direct{2, {{8, 3}, {0, 4}}, 64};
  FusedSgd sgd(direct, SgdHyper{{0.5f}});
  for (int i = 0; i < 64; ++i) base[i] = 1.0f;
  std::vector<float> grad(64, 2.0f);
  sgd.step(base, grad.data());
  EXPECT_EQ(base[0], 0.0f);   // segment {0, 4}
  EXPECT_EQ(base[13], 0.0f);  // segment {8, 3}: floats 8..13
  EXPECT_EQ(base[14], 1.0f);  // not a parameter
}

// ---------------------------------------------------------------------------------------------
// LR schedules against values computed by hand.

TEST(OptimLrSchedule, ClosedFormsMatchHandComputedValues) {
  const LrSchedule constant = LrSchedule::constant();
  EXPECT_DOUBLE_EQ(constant.lr_at(0.1, 0), 0.1);
  EXPECT_DOUBLE_EQ(constant.lr_at(0.1, 1000), 0.1);

  const LrSchedule step = LrSchedule::step_decay(3, 0.5f);
  EXPECT_DOUBLE_EQ(step.lr_at(0.1, 0), 0.1);
  EXPECT_DOUBLE_EQ(step.lr_at(0.1, 2), 0.1);
  EXPECT_DOUBLE_EQ(step.lr_at(0.1, 3), 0.05);
  EXPECT_DOUBLE_EQ(step.lr_at(0.1, 7), 0.025);

  const LrSchedule cosine = LrSchedule::cosine(10, 0.001f);
  const double eta_min = double(0.001f);
  EXPECT_DOUBLE_EQ(cosine.lr_at(0.1, 0), 0.1);
  EXPECT_DOUBLE_EQ(cosine.lr_at(0.1, 5), (0.1 + eta_min) / 2);  // cos(pi/2) = 0
  EXPECT_NEAR(cosine.lr_at(0.1, 10), eta_min, 1e-15);           // cos(pi) = -1
  // cos(pi/5) = (1 + sqrt 5) / 4
  EXPECT_NEAR(cosine.lr_at(0.1, 2), eta_min + (0.1 - eta_min) * (1 + (1 + std::sqrt(5.0)) / 4) / 2,
              1e-15);

  const LrSchedule warm = LrSchedule::constant().with_warmup(4, 0.25f);
  EXPECT_DOUBLE_EQ(warm.lr_at(0.2, 0), 0.05);
  EXPECT_DOUBLE_EQ(warm.lr_at(0.2, 2), 0.2 * (0.25 + 0.75 * 0.5));
  EXPECT_DOUBLE_EQ(warm.lr_at(0.2, 4), 0.2);
  EXPECT_DOUBLE_EQ(warm.lr_at(0.2, 9), 0.2);
  const LrSchedule warm_cosine = LrSchedule::cosine(10).with_warmup(5);
  EXPECT_DOUBLE_EQ(warm_cosine.lr_at(1.0, 0), 0.0);
  EXPECT_NEAR(warm_cosine.lr_at(1.0, 5), 0.5, 1e-15);  // warmup done, cosine halfway

  expect_error([] { LrSchedule::step_decay(0, 0.5f); },
               "step decay step_size = 0 is out of range: expected >= 1");
  expect_error([] { LrSchedule::cosine(10, -1.0f); },
               "cosine eta_min = -1 is out of range: expected a finite eta_min >= 0");
  expect_error([] { LrSchedule::constant().with_warmup(3, 2.0f); },
               "warmup start factor = 2 is out of range: expected 0 <= factor <= 1");
}

// The schedule reads each model's own step count: a reset model restarts its schedule.
TEST(OptimLrSchedule, PerModelStepsDriveSetLr) {
  Array a(3, {4});
  AdamHyper h;
  h.lr = {0.1f, 0.2f, 0.4f};
  FusedAdam opt(a.table, h);
  const LrSchedule schedule = LrSchedule::step_decay(1, 0.5f);
  std::vector<float> lr(3);
  for (int t = 0; t < 2; ++t) {
    schedule.compute(opt.hyper().lr, opt.steps(), lr);
    opt.set_lr(lr);
    opt.step(a.p(), a.g());
  }
  opt.reset_model(2);
  schedule.compute(opt.hyper().lr, opt.steps(), lr);
  EXPECT_EQ(lr, (std::vector<float>{0.025f, 0.05f, 0.4f}));
  const std::vector<int64_t> shared_t = {3};
  schedule.compute(opt.hyper().lr, shared_t, lr);
  EXPECT_EQ(lr, (std::vector<float>{0.0125f, 0.025f, 0.05f}));
}

}  // namespace
}  // namespace hfta
