// The optimizer tests' harness: B models' parameters and gradients carved from arenas as a model
// carves them, random gradients, the tolerance against the double reference, and the checks that
// a model in an array updates bitwise as it does alone (NaN/Inf skips, resets) for any optimizer.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "optim/adadelta.h"
#include "optim/adam.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
#include "test_util.h"

namespace hfta::test {

// Segment sizes per model: below, at and above a vector width, and one spanning two chunks.
inline const std::vector<int64_t> kSizes = {1, 7, 1000, Optimizer::kChunkFloats + 3};

// B models' parameters and gradients: tensors [B, n] carved from two arenas, as a model does.
// `decay` holds one weight decay flag per tensor, or none (all decay).
struct Array {
  int64_t B;
  std::vector<int64_t> sizes;
  Arena params, grads;
  ParamTable table;

  Array(int64_t B_, std::vector<int64_t> sizes_, std::vector<uint8_t> decay = {})
      : B(B_), sizes(std::move(sizes_)) {
    Arena counting;
    for (int64_t n : sizes) counting.carve(Shape{B, n});
    params = Arena(counting.used(), "test parameters");
    grads = Arena(counting.used(), "test gradients");
    std::vector<TensorView> views;
    for (int64_t n : sizes) {
      views.push_back(params.carve(Shape{B, n}));
      grads.carve(Shape{B, n});
    }
    table = ParamTable::from_arena(params, views, decay);
  }
  float* p() { return reinterpret_cast<float*>(params.data()); }
  float* g() { return reinterpret_cast<float*>(grads.data()); }
  int64_t per_model() const { return table.per_model_numel(); }

  // Model b's floats of an arena laid out like the parameters, as one flat vector.
  std::vector<float> model(const float* base, int64_t b) const {
    std::vector<float> out;
    for (const auto& s : table.segments) {
      const float* src = base + s.offset + b * s.per_model_numel;
      out.insert(out.end(), src, src + s.per_model_numel);
    }
    return out;
  }
  void set_model(float* base, int64_t b, const std::vector<float>& values) const {
    int64_t at = 0;
    for (const auto& s : table.segments) {
      std::copy_n(values.data() + at, s.per_model_numel, base + s.offset + b * s.per_model_numel);
      at += s.per_model_numel;
    }
  }
};

inline std::vector<float> random_vector(int64_t n, RngStream& rng, float scale = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = scale * rng.uniform(-1.0f, 1.0f);
  return v;
}

// grads[t][b]: model b's flat gradient at step t, each model with its own magnitude.
using GradSteps = std::vector<std::vector<std::vector<float>>>;
inline GradSteps random_grads(int64_t steps, int64_t B, int64_t n, RngStream& rng) {
  std::vector<float> scale(B);
  for (float& s : scale) s = std::pow(10.0f, rng.uniform(-3.0f, 1.0f));
  GradSteps g(steps);
  for (auto& step : g)
    for (int64_t b = 0; b < B; ++b) step.push_back(random_vector(n, rng, scale[b]));
  return g;
}

inline float uniform(RngStream& rng, float lo, float hi) { return rng.uniform(lo, hi); }

// Model b's hyperparameters as a one-model list.
inline AdamHyper pick(const AdamHyper& h, int64_t b) {
  return {{h.lr[b]}, {h.beta1[b]}, {h.beta2[b]}, {h.eps[b]}, {h.weight_decay[b]}};
}
inline SgdHyper pick(const SgdHyper& h, int64_t b) {
  return {{h.lr[b]}, {h.momentum[b]}, {h.dampening[b]}, {h.weight_decay[b]}, {h.nesterov[b]}};
}
inline AdadeltaHyper pick(const AdadeltaHyper& h, int64_t b) {
  return {{h.lr[b]}, {h.rho[b]}, {h.eps[b]}, {h.weight_decay[b]}};
}
inline RmspropHyper pick(const RmspropHyper& h, int64_t b) {
  return {{h.lr[b]},           {h.alpha[b]},    {h.eps[b]},
          {h.weight_decay[b]}, {h.momentum[b]}, {h.centered[b]}};
}

// Tolerance against the double reference after k steps. Each step's fp32 update has about 8
// roundings of its own (gradient + decay, m, v, sqrt, scale, + eps, divide, step size), plus about
// 3 per earlier step carried in the fp32 state (m, v or the momentum buffer); relative to the
// largest update U that is (8 + 3t) ulps at step t, summed over k steps. Relative to the parameter
// itself each step rounds up to 3 times (ulp = 2^-24, half a unit in the last place): AdamW's
// shrink factor 1 - lr * wd is an fp32 number (as in PyTorch), the product, and the stored sum.
inline void expect_matches_reference(const std::vector<float>& fused, const std::vector<float>& ref,
                                     int64_t k, double max_update, const std::string& what) {
  const double ulp = std::ldexp(1.0, -24);
  const double atol = k * (8.0 + 3.0 * k) * ulp * max_update, rtol = k * 3.0 * ulp;
  test::expect_close(fused.data(), ref.data(), static_cast<int64_t>(fused.size()), atol, rtol,
                     what);
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

inline void expect_bitwise(const std::vector<float>& a, const std::vector<float>& b,
                           const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  int64_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  EXPECT_EQ(differ, 0) << what << ": " << differ << " of " << a.size() << " floats differ";
}

template <typename F>
void expect_error(F&& f, const std::string& message) {
  try {
    f();
    ADD_FAILURE() << "expected hfta::Error: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

// Runs model b alone (B=1) from `init` over the steps where `use[t]` is set, resetting before step
// `reset_at` (-1: never), and returns its parameters.
template <typename Opt, typename Hyper>
std::vector<float> run_alone(const Hyper& hyper, const std::vector<float>& init,
                             const GradSteps& grads, int64_t b, const std::vector<bool>& use,
                             int64_t reset_at = -1) {
  Array solo(1, kSizes);
  solo.set_model(solo.p(), 0, init);
  Opt opt(solo.table, hyper);
  for (size_t t = 0; t < grads.size(); ++t) {
    if (static_cast<int64_t>(t) == reset_at) opt.reset_model(0);
    if (!use[t]) continue;
    solo.set_model(solo.g(), 0, grads[t][b]);
    opt.step(solo.p(), solo.g());
  }
  return solo.model(solo.p(), 0);
}

template <typename Opt, typename Hyper>
void check_nonfinite_model_is_skipped(const Hyper& h, float bad_value, uint64_t seed) {
  HFTA_SEEDED_TRACE(seed);
  SCOPED_TRACE(fmt::format("bad gradient value {}", bad_value));
  RngStream rng(seed, 0);
  const int64_t B = 3, k = 5, bad_step = 2, bad_model = 1;
  Array a(B, kSizes);
  Opt opt(a.table, h);
  std::vector<std::vector<float>> init(B);
  for (int64_t b = 0; b < B; ++b) {
    init[b] = random_vector(a.per_model(), rng);
    a.set_model(a.p(), b, init[b]);
  }
  GradSteps grads = random_grads(k, B, a.per_model(), rng);
  grads[bad_step][bad_model][1 + 3] = bad_value;  // inside the second segment
  for (int64_t t = 0; t < k; ++t) {
    for (int64_t b = 0; b < B; ++b) a.set_model(a.g(), b, grads[t][b]);
    const std::vector<float> params_before = a.model(a.p(), bad_model);
    std::vector<std::vector<float>> state_before;
    for (int i = 0; i < opt.num_state_buffers(); ++i)
      state_before.push_back(a.model(opt.state_buffer(i), bad_model));
    const StepReport& report = opt.step(a.p(), a.g());
    if (t != bad_step) {
      EXPECT_FALSE(report.any_skipped()) << "step " << t;
      continue;
    }
    EXPECT_EQ(report.skipped, (std::vector<uint8_t>{0, 1, 0}));
    EXPECT_EQ(report.num_skipped, 1);
    expect_bitwise(a.model(a.p(), bad_model), params_before, "skipped model's parameters");
    for (int i = 0; i < opt.num_state_buffers(); ++i)
      expect_bitwise(a.model(opt.state_buffer(i), bad_model), state_before[i],
                     fmt::format("skipped model's state {}", i));
  }
  EXPECT_EQ(std::vector<int64_t>(opt.steps().begin(), opt.steps().end()),
            (std::vector<int64_t>{k, k - 1, k}));
  EXPECT_EQ(std::vector<int64_t>(opt.skip_counts().begin(), opt.skip_counts().end()),
            (std::vector<int64_t>{0, 1, 0}));
  for (int64_t b = 0; b < B; ++b) {
    std::vector<bool> use(k, true);
    if (b == bad_model) use[bad_step] = false;
    expect_bitwise(a.model(a.p(), b), run_alone<Opt>(pick(h, b), init[b], grads, b, use),
                   fmt::format("model {} in the array vs alone", b));
  }
}

template <typename Opt, typename Hyper>
void check_reset_model(const Hyper& h, uint64_t seed) {
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 0);
  const int64_t B = 3, k = 5, reset_at = 3, reset_model = 1;
  Array a(B, kSizes);
  Opt opt(a.table, h);
  std::vector<std::vector<float>> init(B);
  for (int64_t b = 0; b < B; ++b) {
    init[b] = random_vector(a.per_model(), rng);
    a.set_model(a.p(), b, init[b]);
  }
  const GradSteps grads = random_grads(k, B, a.per_model(), rng);
  for (int64_t t = 0; t < k; ++t) {
    if (t == reset_at) {
      opt.reset_model(reset_model);
      EXPECT_EQ(opt.steps()[reset_model], 0);
      EXPECT_EQ(opt.steps()[0], reset_at);
      for (int i = 0; i < opt.num_state_buffers(); ++i)
        expect_bitwise(a.model(opt.state_buffer(i), reset_model),
                       std::vector<float>(a.per_model(), 0.0f), "reset model's state");
    }
    for (int64_t b = 0; b < B; ++b) a.set_model(a.g(), b, grads[t][b]);
    opt.step(a.p(), a.g());
  }
  const std::vector<bool> all(k, true);
  for (int64_t b = 0; b < B; ++b)
    expect_bitwise(
        a.model(a.p(), b),
        run_alone<Opt>(pick(h, b), init[b], grads, b, all, b == reset_model ? reset_at : -1),
        fmt::format("model {} in the array vs alone", b));
}

// Optimizer::step_models over disjoint blocks of models, the blocks run at the same time on two
// threads and in another order than the models', then finish_model_steps, equals one step():
// parameters, state, step and skip counts and the report, bitwise, a NaN model included.
template <typename Opt, typename Hyper>
void check_step_models_equals_step(const Hyper& h, uint64_t seed) {
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 0);
  const int64_t B = 5, k = 4, bad_step = 2, bad_model = 3;
  const std::vector<std::pair<int64_t, int64_t>> blocks = {{3, 2}, {0, 2}, {2, 1}};
  Array whole(B, kSizes), pieces(B, kSizes);
  Opt whole_opt(whole.table, h), pieces_opt(pieces.table, h);
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<float> init = random_vector(whole.per_model(), rng);
    whole.set_model(whole.p(), b, init);
    pieces.set_model(pieces.p(), b, init);
  }
  GradSteps grads = random_grads(k, B, whole.per_model(), rng);
  grads[bad_step][bad_model][5] = std::numeric_limits<float>::quiet_NaN();
  for (int64_t t = 0; t < k; ++t) {
    for (int64_t b = 0; b < B; ++b) {
      whole.set_model(whole.g(), b, grads[t][b]);
      pieces.set_model(pieces.g(), b, grads[t][b]);
    }
    const StepReport expected = whole_opt.step(whole.p(), whole.g());
#pragma omp parallel for num_threads(2) schedule(static, 1)
    for (size_t i = 0; i < blocks.size(); ++i)
      pieces_opt.step_models(pieces.p(), pieces.g(), blocks[i].first, blocks[i].second);
    const StepReport& got = pieces_opt.finish_model_steps();
    EXPECT_EQ(got.skipped, expected.skipped) << "step " << t;
    EXPECT_EQ(got.num_skipped, expected.num_skipped) << "step " << t;
  }
  for (int64_t b = 0; b < B; ++b) {
    expect_bitwise(pieces.model(pieces.p(), b), whole.model(whole.p(), b),
                   fmt::format("model {} parameters", b));
    for (int i = 0; i < whole_opt.num_state_buffers(); ++i)
      expect_bitwise(pieces.model(pieces_opt.state_buffer(i), b),
                     whole.model(whole_opt.state_buffer(i), b),
                     fmt::format("model {} state {}", b, i));
  }
  EXPECT_TRUE(
      std::equal(pieces_opt.steps().begin(), pieces_opt.steps().end(), whole_opt.steps().begin()));
  EXPECT_TRUE(std::equal(pieces_opt.skip_counts().begin(), pieces_opt.skip_counts().end(),
                         whole_opt.skip_counts().begin()));
  expect_error(
      [&] { pieces_opt.step_models(pieces.p(), pieces.g(), 4, 2); },
      fmt::format("{} step of models [4, 6): the array has models 0..4", pieces_opt.name()));
}

}  // namespace hfta::test
