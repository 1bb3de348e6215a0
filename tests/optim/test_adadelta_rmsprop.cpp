// Fused Adadelta and RMSprop: k fused steps of B models with different hyperparameters equal, for
// each model, k steps of the single-model double reference; a model in an array updates bitwise as
// it does alone (NaN/Inf skips, resets); hyperparameters expand or raise errors naming the model;
// and a one-element two-step trajectory worked out by hand, so that a mistake shared by the
// kernel and the reference fails too.
#include <cmath>
#include <limits>

#include "optim_harness.h"

namespace hfta {
namespace {

using namespace test;  // NOLINT: the harness

// Per-model segment sizes around the 16-float vector width and across chunk boundaries.
const std::vector<int64_t> kStraddling = {
    1, 15, 16, 17, 1000, Optimizer::kChunkFloats - 1, 2 * Optimizer::kChunkFloats + 5};

AdadeltaHyper random_adadelta_hyper(int64_t B, RngStream& rng) {
  AdadeltaHyper h{{}, {}, {}, {}};
  for (int64_t b = 0; b < B; ++b) {
    h.lr.push_back(std::pow(10.0f, uniform(rng, -2.0f, 0.3f)));
    h.rho.push_back(uniform(rng, 0.5f, 0.99f));
    h.eps.push_back(std::pow(10.0f, uniform(rng, -8.0f, -3.0f)));
    h.weight_decay.push_back(b % 2 ? uniform(rng, 0.0f, 0.1f) : 0.0f);
  }
  return h;
}

// kind: 0 plain, 1 momentum, 2 centered, 3 centered with momentum, 4 mixed per model. Odd models
// have weight decay. alpha >= 0.9 keeps v - gavg^2 away from cancellation over a few steps
// (gavg^2 <= (1 - alpha^t) v), so the fp32 tolerance below holds.
RmspropHyper random_rmsprop_hyper(int64_t B, int kind, RngStream& rng) {
  RmspropHyper h{{}, {}, {}, {}, {}, {}};
  for (int64_t b = 0; b < B; ++b) {
    const int model_kind = kind == 4 ? static_cast<int>(b % 4) : kind;
    h.lr.push_back(std::pow(10.0f, uniform(rng, -4.0f, -1.0f)));
    h.alpha.push_back(uniform(rng, 0.9f, 0.999f));
    h.eps.push_back(std::pow(10.0f, uniform(rng, -8.0f, -2.0f)));
    h.weight_decay.push_back(b % 2 ? uniform(rng, 0.0f, 0.1f) : 0.0f);
    h.momentum.push_back(model_kind == 1 || model_kind == 3 ? uniform(rng, 0.5f, 0.99f) : 0.0f);
    h.centered.push_back(model_kind >= 2);
  }
  return h;
}

// Runs k fused steps and k reference steps per model; `ref_step(b, state, params, grads, n)`.
template <typename Opt, typename Hyper, typename RefState, typename RefStep>
void check_matches_reference(int64_t B, const Hyper& h, uint64_t seed, RefStep ref_step) {
  HFTA_SEEDED_TRACE(seed);
  SCOPED_TRACE(fmt::format("B={}", B));
  RngStream rng(seed, 0);
  const int64_t k = 5;
  Array a(B, kStraddling);
  Opt opt(a.table, h);
  std::vector<std::vector<float>> ref_p(B);
  std::vector<RefState> ref_state(B);
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
      ref_step(b, ref_state[b], ref_p[b].data(), grads[t][b].data(), a.per_model());
      max_update[b] = std::max(max_update[b], max_abs_diff(before, ref_p[b]));
    }
  }
  for (int64_t b = 0; b < B; ++b) {
    EXPECT_EQ(opt.steps()[b], k);
    expect_matches_reference(a.model(a.p(), b), ref_p[b], k, max_update[b],
                             fmt::format("model {} parameters", b));
  }
}

TEST(OptimAdadelta, MatchesReferenceWithPerModelHyperparameters) {
  uint64_t seed = test::seed_for_test() + 600;
  for (int64_t B : test::model_counts()) {
    RngStream rng(seed, 1);
    const AdadeltaHyper h = random_adadelta_hyper(B, rng);
    check_matches_reference<FusedAdadelta, AdadeltaHyper, ref::AdadeltaState>(
        B, h, seed++, [&](int64_t b, ref::AdadeltaState& s, float* p, const float* g, int64_t n) {
          ref::adadelta_step(s, p, g, n, h.lr[b], h.rho[b], h.eps[b], h.weight_decay[b]);
        });
  }
}

TEST(OptimRmsprop, MatchesReferenceWithPerModelHyperparameters) {
  uint64_t seed = test::seed_for_test() + 700;
  for (int kind = 0; kind <= 4; ++kind)
    for (int64_t B : test::model_counts()) {
      SCOPED_TRACE(fmt::format("kind={}", kind));
      RngStream rng(seed, 1);
      const RmspropHyper h = random_rmsprop_hyper(B, kind, rng);
      check_matches_reference<FusedRmsprop, RmspropHyper, ref::RmspropState>(
          B, h, seed++, [&](int64_t b, ref::RmspropState& s, float* p, const float* g, int64_t n) {
            ref::rmsprop_step(s, p, g, n, h.lr[b], h.alpha[b], h.eps[b], h.weight_decay[b],
                              h.momentum[b], h.centered[b]);
          });
    }
}

TEST(OptimAdadeltaRmsprop, NanOrInfGradientSkipsOnlyThatModel) {
  uint64_t seed = test::seed_for_test() + 800;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (float bad : {nan, inf, -inf}) {
    RngStream rng(seed, 1);
    check_nonfinite_model_is_skipped<FusedAdadelta>(random_adadelta_hyper(3, rng), bad, seed++);
    check_nonfinite_model_is_skipped<FusedRmsprop>(random_rmsprop_hyper(3, 4, rng), bad, seed++);
    check_nonfinite_model_is_skipped<FusedRmsprop>(random_rmsprop_hyper(3, 3, rng), bad, seed++);
  }
}

TEST(OptimAdadeltaRmsprop, ResetModelRestartsOnlyThatModel) {
  uint64_t seed = test::seed_for_test() + 900;
  RngStream rng(seed, 1);
  check_reset_model<FusedAdadelta>(random_adadelta_hyper(3, rng), seed++);
  check_reset_model<FusedRmsprop>(random_rmsprop_hyper(3, 4, rng), seed++);
  check_reset_model<FusedRmsprop>(random_rmsprop_hyper(3, 3, rng), seed++);
}

TEST(OptimAdadeltaRmsprop, StepModelsBlocksEqualOneStep) {
  uint64_t seed = test::seed_for_test() + 950;
  RngStream rng(seed, 1);
  check_step_models_equals_step<FusedAdadelta>(random_adadelta_hyper(5, rng), seed++);
  check_step_models_equals_step<FusedRmsprop>(random_rmsprop_hyper(5, 4, rng), seed++);
  check_step_models_equals_step<FusedRmsprop>(random_rmsprop_hyper(5, 3, rng), seed++);
}

// ---------------------------------------------------------------------------------------------
// Hand-computed trajectories: one parameter p0 = 1, gradients 0.5 then -0.25 (before weight
// decay). The numbers below were worked out in Python floats (double) from PyTorch's formulas;
// the fp32 kernel must land within a few fp32 ulps of them.

constexpr double kParamTol = 3e-7;  // ~5 ulps of a parameter near 1

// The states' tolerance also covers the hyperparameters being fp32: 0.99f = 0.99000000954, so
// 1 - alpha = 0.0099999905 is 1e-6 below 0.01, relatively.
double rel_tol(double x) { return 2e-6 * std::fabs(x); }

// Adadelta, lr = 1, rho = 0.9, eps = 1e-6, weight_decay = 0.1:
// step 1: g = 0.5 + 0.1 * 1 = 0.6
//         v = 0.1 * 0.6^2 = 0.036
//         delta = sqrt(0 + 1e-6) / sqrt(0.036 + 1e-6) * 0.6 = 0.0031622337405603114
//         u = 0.1 * delta^2 = 9.999722229938057e-07
//         p = 1 - delta = 0.9968377662594397
// step 2: g = -0.25 + 0.1 * 0.9968377662594397 = -0.15031622337405603
//         v = 0.9 * 0.036 + 0.1 * g^2 = 0.0346594967009439
//         delta = sqrt(u + 1e-6) / sqrt(v + 1e-6) * g = -0.0011418273640168516
//         u = 0.9 * u + 0.1 * delta^2 = 1.0303519736161924e-06
//         p = 0.9968377662594397 - delta = 0.9979795936234565
TEST(OptimAdadelta, HandComputedTwoSteps) {
  test::Array a(1, {1});
  FusedAdadelta opt(a.table, {.lr = {1.0f}, .rho = {0.9f}, .eps = {1e-6f}, .weight_decay = {0.1f}});
  a.p()[0] = 1.0f;
  a.g()[0] = 0.5f;
  opt.step(a.p(), a.g());
  EXPECT_NEAR(a.p()[0], 0.9968377662594397, kParamTol);
  EXPECT_NEAR(opt.square_avg()[0], 0.036, rel_tol(0.036));
  EXPECT_NEAR(opt.acc_delta()[0], 9.999722229938057e-07, rel_tol(1e-6));
  a.g()[0] = -0.25f;
  opt.step(a.p(), a.g());
  EXPECT_NEAR(a.p()[0], 0.9979795936234565, kParamTol);
  EXPECT_NEAR(opt.square_avg()[0], 0.0346594967009439, rel_tol(0.0346594967009439));
  EXPECT_NEAR(opt.acc_delta()[0], 1.0303519736161924e-06, rel_tol(1.0303519736161924e-06));
}

// RMSprop, lr = 0.01, alpha = 0.99, eps = 1e-8, weight_decay = 0.1, no momentum, not centered:
// step 1: g = 0.5 + 0.1 * 1 = 0.6
//         v = 0.01 * 0.36 = 0.0036
//         p = 1 - 0.01 * 0.6 / (sqrt(0.0036) + 1e-8) = 1 - 0.006 / 0.06000001 = 0.900000016666664
// step 2: g = -0.25 + 0.1 * 0.900000016666664 = -0.15999999833333362
//         v = 0.99 * 0.0036 + 0.01 * g^2 = 0.0038199999946666708
//         p = p - 0.01 * g / (sqrt(v) + 1e-8) = 0.9258874042942171
TEST(OptimRmsprop, HandComputedTwoStepsPlain) {
  test::Array a(1, {1});
  FusedRmsprop opt(a.table,
                   {.lr = {0.01f}, .alpha = {0.99f}, .eps = {1e-8f}, .weight_decay = {0.1f}});
  EXPECT_EQ(opt.num_state_buffers(), 1);
  a.p()[0] = 1.0f;
  a.g()[0] = 0.5f;
  opt.step(a.p(), a.g());
  EXPECT_NEAR(a.p()[0], 0.900000016666664, kParamTol);
  EXPECT_NEAR(opt.square_avg()[0], 0.0036, rel_tol(0.0036));
  a.g()[0] = -0.25f;
  opt.step(a.p(), a.g());
  EXPECT_NEAR(a.p()[0], 0.9258874042942171, kParamTol);
  EXPECT_NEAR(opt.square_avg()[0], 0.0038199999946666708, rel_tol(0.00382));
}

// RMSprop, lr = 0.1, alpha = 0.9, eps = 0.01, momentum = 0.9, centered, no weight decay:
// step 1: g = 0.5;  v = 0.1 * 0.25 = 0.025;  gavg = 0.1 * 0.5 = 0.05
//         denom = sqrt(0.025 - 0.05^2) + 0.01 = sqrt(0.0225) + 0.01 = 0.15 + 0.01 = 0.16
//         buf = 0.5 / 0.16 = 3.125;  p = 1 - 0.1 * 3.125 = 0.6875
// step 2: g = -0.25;  v = 0.9 * 0.025 + 0.1 * 0.0625 = 0.02875
//         gavg = 0.9 * 0.05 + 0.1 * -0.25 = 0.02
//         denom = sqrt(0.02875 - 0.0004) + 0.01 = sqrt(0.02835) + 0.01 = 0.17837458240482734
//         buf = 0.9 * 3.125 + -0.25 / denom = 1.4109550229661294
//         p = 0.6875 - 0.1 * buf = 0.5464044977033871
TEST(OptimRmsprop, HandComputedTwoStepsCenteredWithMomentum) {
  test::Array a(1, {1});
  FusedRmsprop opt(
      a.table,
      {.lr = {0.1f}, .alpha = {0.9f}, .eps = {0.01f}, .momentum = {0.9f}, .centered = {1}});
  EXPECT_EQ(opt.num_state_buffers(), 3);
  a.p()[0] = 1.0f;
  a.g()[0] = 0.5f;
  opt.step(a.p(), a.g());
  EXPECT_NEAR(a.p()[0], 0.6875, kParamTol);
  EXPECT_NEAR(opt.momentum_buffer()[0], 3.125, rel_tol(3.125));
  EXPECT_NEAR(opt.grad_avg()[0], 0.05, rel_tol(0.05));
  a.g()[0] = -0.25f;
  opt.step(a.p(), a.g());
  EXPECT_NEAR(a.p()[0], 0.5464044977033871, kParamTol);
  EXPECT_NEAR(opt.square_avg()[0], 0.02875, rel_tol(0.02875));
  EXPECT_NEAR(opt.grad_avg()[0], 0.02, rel_tol(0.02));
  EXPECT_NEAR(opt.momentum_buffer()[0], 1.4109550229661294, rel_tol(1.41));
}

// ---------------------------------------------------------------------------------------------
// Hyperparameters: PyTorch's defaults, lists, state buffers, errors.

TEST(OptimAdadeltaRmsprop, DefaultsAreTorchDefaults) {
  const AdadeltaHyper ad;
  EXPECT_EQ(ad.lr, std::vector<float>{1.0f});
  EXPECT_EQ(ad.rho, std::vector<float>{0.9f});
  EXPECT_EQ(ad.eps, std::vector<float>{1e-6f});
  EXPECT_EQ(ad.weight_decay, std::vector<float>{0.0f});
  const RmspropHyper rm;
  EXPECT_EQ(rm.lr, std::vector<float>{0.01f});
  EXPECT_EQ(rm.alpha, std::vector<float>{0.99f});
  EXPECT_EQ(rm.eps, std::vector<float>{1e-8f});
  EXPECT_EQ(rm.weight_decay, std::vector<float>{0.0f});
  EXPECT_EQ(rm.momentum, std::vector<float>{0.0f});
  EXPECT_EQ(rm.centered, std::vector<uint8_t>{0});
}

TEST(OptimAdadeltaRmsprop, ListsExpandAndStateBuffersFollowTheModels) {
  test::Array a(4, {3});
  FusedAdadelta adadelta(a.table, {.rho = {0.9f, 0.8f, 0.7f, 0.6f}});
  EXPECT_EQ(adadelta.name(), "Adadelta");
  EXPECT_EQ(adadelta.hyper().lr, std::vector<float>(4, 1.0f));
  EXPECT_EQ(adadelta.hyper().rho, (std::vector<float>{0.9f, 0.8f, 0.7f, 0.6f}));
  EXPECT_EQ(adadelta.num_state_buffers(), 2);

  FusedRmsprop plain(a.table, RmspropHyper{});
  EXPECT_EQ(plain.name(), "RMSprop");
  EXPECT_EQ(plain.num_state_buffers(), 1);
  EXPECT_EQ(plain.momentum_buffer(), nullptr);
  EXPECT_EQ(plain.grad_avg(), nullptr);
  FusedRmsprop momentum(a.table, {.momentum = {0.0f, 0.9f, 0.0f, 0.0f}});
  EXPECT_EQ(momentum.num_state_buffers(), 2);
  EXPECT_EQ(momentum.momentum_buffer(), momentum.state_buffer(1));
  EXPECT_EQ(momentum.grad_avg(), nullptr);
  FusedRmsprop centered(a.table, {.centered = {0, 0, 1, 0}});
  EXPECT_EQ(centered.num_state_buffers(), 2);
  EXPECT_EQ(centered.momentum_buffer(), nullptr);
  EXPECT_EQ(centered.grad_avg(), centered.state_buffer(1));
  EXPECT_EQ(centered.hyper().centered, (std::vector<uint8_t>{0, 0, 1, 0}));

  expect_error(
      [&] {
        FusedAdadelta(a.table, {.rho = {0.9f, 0.8f}});
      },
      "rho has 2 values but the array has 4 models: give one value (shared) or 4 (one "
      "per model)");
  expect_error(
      [&] {
        FusedRmsprop(a.table, {.centered = {1, 0, 1}});
      },
      "centered has 3 values but the array has 4 models: give one value (shared) or 4 "
      "(one per model)");
}

TEST(OptimAdadeltaRmsprop, OutOfRangeValuesNameTheModel) {
  test::Array a(2, {3});
  auto adadelta_error = [&](const AdadeltaHyper& h, const std::string& message) {
    expect_error([&] { FusedAdadelta opt(a.table, h); }, message);
  };
  adadelta_error({.lr = {1.0f, -1.0f}},
                 "model 1: lr = -1 is out of range: expected a finite lr >= 0");
  adadelta_error({.rho = {1.0f}}, "model 0: rho = 1 is out of range: expected 0 <= rho < 1");
  adadelta_error({.rho = {0.9f, -0.5f}},
                 "model 1: rho = -0.5 is out of range: expected 0 <= rho < 1");
  adadelta_error({.eps = {1e-6f, 0.0f}},
                 "model 1: eps = 0 is out of range: expected a finite eps > 0");
  adadelta_error(
      {.weight_decay = {std::numeric_limits<float>::infinity()}},
      "model 0: weight_decay = inf is out of range: expected a finite weight_decay >= 0");

  auto rmsprop_error = [&](const RmspropHyper& h, const std::string& message) {
    expect_error([&] { FusedRmsprop opt(a.table, h); }, message);
  };
  rmsprop_error({.lr = {std::numeric_limits<float>::quiet_NaN()}},
                "model 0: lr = nan is out of range: expected a finite lr >= 0");
  rmsprop_error({.alpha = {0.99f, 1.5f}},
                "model 1: alpha = 1.5 is out of range: expected 0 <= alpha < 1");
  rmsprop_error({.eps = {-1e-8f}},
                "model 0: eps = -1e-08 is out of range: expected a finite eps > 0");
  rmsprop_error(
      {.weight_decay = {0.0f, -0.1f}},
      "model 1: weight_decay = -0.1 is out of range: expected a finite weight_decay >= 0");
  rmsprop_error({.momentum = {0.9f, -0.9f}},
                "model 1: momentum = -0.9 is out of range: expected a finite momentum >= 0");
}

}  // namespace
}  // namespace hfta
