// The CUDA fused optimizers (optim/cuda/fused_step.h) against the CPU ones (FusedAdam,
// FusedAdamW, FusedSgd, FusedRmsprop with every mix of centered and momentum, FusedAdadelta) on
// the same [B, ...] arena: per-model hyperparameters, segments with and without weight decay, a
// segment split into chunks, NaN and Inf gradients that skip a model, an LR change midway.
//
// Without a GPU (this project's CI): the kernels' arithmetic and chunk table run on the host.
//   HostMirror*: optim/cuda/update_math.h's element functions, driven over
//     device_chunk_table(table) exactly as the kernels drive them, equal the CPU optimizers.
//   ChunkTable*: the table covers every float of every segment exactly once, with its model and
//     decay flag, and nothing outside the segments.
// With a GPU: the device step itself against the CPU optimizer. nvcc contracts a * b + c into an
// FMA by default (and GCC may, differently, on the CPU), so the device is not promised to equal
// the CPU bitwise: the comparison allows 1e-5 relative plus 1e-6 of the buffer's largest value.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "optim/adadelta.h"
#include "optim/adam.h"
#include "optim/cuda/fused_step.h"
#include "optim/cuda/update_math.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
#include "optim_cases.h"
#include "test_util.h"

namespace hfta {
namespace {

using cuda::kernels::OptimChunk;
using test::kOptimizerSegments;
using test::make_table;

enum class Kind { kAdam, kAdamW, kSgd, kRmsprop, kAdadelta };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kAdam:
      return "Adam";
    case Kind::kAdamW:
      return "AdamW";
    case Kind::kSgd:
      return "Sgd";
    case Kind::kRmsprop:
      return "Rmsprop";
    case Kind::kAdadelta:
      return "Adadelta";
  }
  return "?";
}

const auto kAllKinds =
    ::testing::Values(Kind::kAdam, Kind::kAdamW, Kind::kSgd, Kind::kRmsprop, Kind::kAdadelta);

// Different hyperparameters for each model.
AdamHyper adam_hyper(int64_t B, Kind kind) {
  AdamHyper h;
  h.lr.clear(), h.beta1.clear(), h.beta2.clear(), h.eps.clear(), h.weight_decay.clear();
  for (int64_t b = 0; b < B; ++b) {
    h.lr.push_back(1e-3f * static_cast<float>(b + 1));
    h.beta1.push_back(0.9f - 0.05f * static_cast<float>(b % 3));
    h.beta2.push_back(b % 2 == 0 ? 0.999f : 0.99f);
    h.eps.push_back(b % 2 == 0 ? 1e-8f : 1e-6f);
    h.weight_decay.push_back(kind == Kind::kAdamW ? 0.01f * static_cast<float>(b % 3 + 1)
                                                  : 0.001f * static_cast<float>(b % 3));
  }
  return h;
}

// Models cycle through: no momentum; momentum with dampening; Nesterov; momentum alone.
SgdHyper sgd_hyper(int64_t B) {
  SgdHyper h;
  h.lr.clear(), h.momentum.clear(), h.dampening.clear(), h.weight_decay.clear(), h.nesterov.clear();
  const float momentum[] = {0.0f, 0.9f, 0.8f, 0.5f}, dampening[] = {0.0f, 0.1f, 0.0f, 0.0f};
  for (int64_t b = 0; b < B; ++b) {
    h.lr.push_back(0.01f * static_cast<float>(b + 1));
    h.momentum.push_back(momentum[b % 4]);
    h.dampening.push_back(dampening[b % 4]);
    h.nesterov.push_back(b % 4 == 2 ? 1 : 0);
    h.weight_decay.push_back(1e-3f * static_cast<float>(b % 3));
  }
  return h;
}

// Models cycle through: plain; momentum; centered; centered with momentum.
RmspropHyper rmsprop_hyper(int64_t B) {
  RmspropHyper h;
  h.lr.clear(), h.alpha.clear(), h.eps.clear(), h.weight_decay.clear(), h.momentum.clear();
  h.centered.clear();
  const float momentum[] = {0.0f, 0.9f, 0.0f, 0.5f};
  for (int64_t b = 0; b < B; ++b) {
    h.lr.push_back(1e-3f * static_cast<float>(b + 1));
    h.alpha.push_back(b % 2 == 0 ? 0.99f : 0.9f);
    h.eps.push_back(b % 2 == 0 ? 1e-8f : 1e-6f);
    h.weight_decay.push_back(1e-3f * static_cast<float>(b % 3));
    h.momentum.push_back(momentum[b % 4]);
    h.centered.push_back(b % 4 >= 2 ? 1 : 0);
  }
  return h;
}

AdadeltaHyper adadelta_hyper(int64_t B) {
  AdadeltaHyper h;
  h.lr.clear(), h.rho.clear(), h.eps.clear(), h.weight_decay.clear();
  for (int64_t b = 0; b < B; ++b) {
    h.lr.push_back(0.5f * static_cast<float>(b + 1));
    h.rho.push_back(b % 2 == 0 ? 0.9f : 0.95f);
    h.eps.push_back(b % 2 == 0 ? 1e-6f : 1e-5f);
    h.weight_decay.push_back(1e-3f * static_cast<float>(b % 3));
  }
  return h;
}

std::unique_ptr<Optimizer> make_cpu_optimizer(Kind kind, const ParamTable& table) {
  switch (kind) {
    case Kind::kAdam:
      return std::make_unique<FusedAdam>(table, adam_hyper(table.B, kind));
    case Kind::kAdamW:
      return std::make_unique<FusedAdamW>(table, adam_hyper(table.B, kind));
    case Kind::kSgd:
      return std::make_unique<FusedSgd>(table, sgd_hyper(table.B));
    case Kind::kRmsprop:
      return std::make_unique<FusedRmsprop>(table, rmsprop_hyper(table.B));
    case Kind::kAdadelta:
      return std::make_unique<FusedAdadelta>(table, adadelta_hyper(table.B));
  }
  return nullptr;
}

// Step `step`'s gradients: random, with a NaN in model 1 at step 2 and an Inf in model B-1 at
// step 3 (when those models exist), each in its last segment's middle.
std::vector<float> make_grads(const ParamTable& table, int step, uint64_t seed) {
  RngStream rng(seed, static_cast<uint64_t>(step));
  std::vector<float> g = test::random_buffer(Shape{table.total_floats}, rng).values;
  const ParamSegment& last = table.segments.back();
  auto poison = [&](int64_t b, float value) {
    g[static_cast<size_t>(last.offset + b * last.per_model_numel + last.per_model_numel / 2)] =
        value;
  };
  if (step == 2 && table.B > 1) poison(1, std::numeric_limits<float>::quiet_NaN());
  if (step == 3 && table.B > 2) poison(table.B - 1, std::numeric_limits<float>::infinity());
  return g;
}

// Model b's constants for its step t, from the CPU optimizer's hyperparameters and current lr.
AdamStepConstants adam_constants(Kind kind, const Optimizer& cpu, int64_t b, int64_t t) {
  const auto& adam = dynamic_cast<const FusedAdam&>(cpu);
  return adam_step_constants(adam.hyper(), b, cpu.lr()[static_cast<size_t>(b)], t,
                             kind == Kind::kAdamW ? WeightDecay::kDecoupled : WeightDecay::kL2);
}

SgdStepConstants sgd_constants(const Optimizer& cpu, int64_t b, int64_t t) {
  const auto& sgd = dynamic_cast<const FusedSgd&>(cpu);
  return sgd_step_constants(sgd.hyper(), b, cpu.lr()[static_cast<size_t>(b)], t);
}

// Every optimizer's B constants for one step; a skipped model's are left value-initialized.
struct StepConstants {
  std::vector<AdamStepConstants> adam;
  std::vector<SgdStepConstants> sgd;
  std::vector<RmspropStepConstants> rmsprop;
  std::vector<AdadeltaStepConstants> adadelta;
};

// As Optimizer::step: each model that is not skipped advances its step count, then gets its
// constants from the CPU optimizer's hyperparameters and current lr.
StepConstants step_constants(Kind kind, const Optimizer& cpu, const std::vector<uint8_t>& skip,
                             std::vector<int64_t>& steps) {
  const int64_t B = cpu.B();
  const size_t n = static_cast<size_t>(B);
  StepConstants k{std::vector<AdamStepConstants>(n), std::vector<SgdStepConstants>(n),
                  std::vector<RmspropStepConstants>(n), std::vector<AdadeltaStepConstants>(n)};
  for (int64_t b = 0; b < B; ++b) {
    const size_t i = static_cast<size_t>(b);
    if (skip[i]) continue;
    const int64_t t = ++steps[i];
    const float lr = cpu.lr()[i];
    switch (kind) {
      case Kind::kAdam:
      case Kind::kAdamW:
        k.adam[i] = adam_constants(kind, cpu, b, t);
        break;
      case Kind::kSgd:
        k.sgd[i] = sgd_constants(cpu, b, t);
        break;
      case Kind::kRmsprop:
        k.rmsprop[i] =
            rmsprop_step_constants(dynamic_cast<const FusedRmsprop&>(cpu).hyper(), b, lr);
        break;
      case Kind::kAdadelta:
        k.adadelta[i] =
            adadelta_step_constants(dynamic_cast<const FusedAdadelta&>(cpu).hyper(), b, lr);
        break;
    }
  }
  return k;
}

// The state buffers in the CPU optimizer's order (Optimizer::state_buffer): Adam exp_avg,
// exp_avg_sq; SGD the momentum buffer; RMSprop square_avg, then the momentum buffer when a model
// has momentum, then grad_avg when a model is centered; Adadelta square_avg, acc_delta. `state`
// holds three buffers; the named ones point into it (null where the optimizer has none).
struct StateBuffers {
  float *exp_avg = nullptr, *exp_avg_sq = nullptr, *momentum = nullptr, *square_avg = nullptr,
        *grad_avg = nullptr, *acc_delta = nullptr;
};

StateBuffers state_buffers(Kind kind, const Optimizer& cpu, float* s0, float* s1, float* s2) {
  StateBuffers out;
  switch (kind) {
    case Kind::kAdam:
    case Kind::kAdamW:
      out.exp_avg = s0, out.exp_avg_sq = s1;
      break;
    case Kind::kSgd:
      out.momentum = cpu.num_state_buffers() > 0 ? s0 : nullptr;
      break;
    case Kind::kRmsprop: {
      const auto& h = dynamic_cast<const FusedRmsprop&>(cpu).hyper();
      float* next[] = {s1, s2};
      int used = 0;
      out.square_avg = s0;
      if (std::any_of(h.momentum.begin(), h.momentum.end(), [](float m) { return m > 0.0f; }))
        out.momentum = next[used++];
      if (std::any_of(h.centered.begin(), h.centered.end(), [](uint8_t c) { return c != 0; }))
        out.grad_avg = next[used++];
      break;
    }
    case Kind::kAdadelta:
      out.square_avg = s0, out.acc_delta = s1;
      break;
  }
  return out;
}

// The device step run on the host: flag_nonfinite_kernel, the host's step counts and constants,
// then the step kernels' loops over the same chunk table, with the same element functions.
// Returns the skip flags.
std::vector<uint8_t> host_mirror_step(Kind kind, const Optimizer& cpu,
                                      const std::vector<OptimChunk>& chunks,
                                      std::vector<int64_t>& steps, float* params,
                                      const float* grads, const StateBuffers& st) {
  const int64_t B = cpu.B();
  std::vector<uint8_t> skip(static_cast<size_t>(B), 0);
  for (const OptimChunk& c : chunks)
    for (int64_t i = c.begin; i < c.begin + c.size; ++i)
      if (optim_math::is_nonfinite(grads[i])) skip[static_cast<size_t>(c.model)] = 1;
  const StepConstants k = step_constants(kind, cpu, skip, steps);
  using optim_math::decay_chunk_constants;
  for (const OptimChunk& c : chunks) {
    const size_t m = static_cast<size_t>(c.model);
    if (skip[m]) continue;
    const bool decay = c.decay != 0;
    for (int64_t i = c.begin; i < c.begin + c.size; ++i) switch (kind) {
        case Kind::kAdam:
        case Kind::kAdamW:
          optim_math::adam_update_element(params[i], grads[i], st.exp_avg[i], st.exp_avg_sq[i],
                                          decay_chunk_constants(k.adam[m], decay));
          break;
        case Kind::kSgd: {
          const SgdStepConstants ks = decay_chunk_constants(k.sgd[m], decay);
          optim_math::sgd_step_element(params[i], grads[i], ks.momentum ? st.momentum + i : nullptr,
                                       ks);
          break;
        }
        case Kind::kRmsprop: {
          const RmspropStepConstants kr = decay_chunk_constants(k.rmsprop[m], decay);
          optim_math::rmsprop_update_element(params[i], grads[i], st.square_avg[i],
                                             kr.centered ? st.grad_avg + i : nullptr,
                                             kr.use_momentum ? st.momentum + i : nullptr, kr);
          break;
        }
        case Kind::kAdadelta:
          optim_math::adadelta_update_element(params[i], grads[i], st.square_avg[i],
                                              st.acc_delta[i],
                                              decay_chunk_constants(k.adadelta[m], decay));
          break;
      }
  }
  return skip;
}

// Distance in units in the last place (adjacent floats are 1 apart, +0 and -0 are 0 apart).
int64_t ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  auto ordered = [](float x) {
    const int64_t bits = std::bit_cast<int32_t>(x);
    return bits >= 0 ? bits : int64_t{std::numeric_limits<int32_t>::min()} - bits;
  };
  return std::abs(ordered(a) - ordered(b));
}

// The host mirror and the CPU loop are the same expressions compiled by the same compiler with the
// same flags: bitwise equal with GCC 12 -march=native (measured). 2 ulp leaves room for a compiler
// that contracts a * b + c into an FMA in one and not the other; a wrong term is far beyond it.
constexpr int64_t kMaxUlp = 2;

void expect_within_ulp(const float* got, const float* want, int64_t n, int64_t max_ulp,
                       const std::string& what) {
  int64_t worst = 0, worst_at = 0, bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t d = ulp_distance(got[i], want[i]);
    if (d > worst) worst = d, worst_at = i;
    bad += d > max_ulp ? 1 : 0;
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " floats more than " << max_ulp
                    << " ulp apart; worst at float " << worst_at << ": " << got[worst_at]
                    << " against the CPU's " << want[worst_at] << " (" << worst << " ulp)";
}

class HostMirror : public ::testing::TestWithParam<std::tuple<Kind, int64_t>> {};

TEST_P(HostMirror, ElementFunctionsOverTheChunkTableMatchCpuOptimizer) {
  const auto [kind, B] = GetParam();
  const uint64_t seed = test::case_seed(fmt::format("host_mirror_{}_{}", kind_name(kind), B));
  HFTA_CASE_TRACE(seed);
  const ParamTable table = make_table(B, kOptimizerSegments, 3);
  std::unique_ptr<Optimizer> cpu = make_cpu_optimizer(kind, table);
  RngStream rng(seed, 1000);
  std::vector<float> cpu_params = test::random_buffer(Shape{table.total_floats}, rng).values;
  std::vector<float> params = cpu_params;
  test::Buffer state0(Shape{table.total_floats}), state1(Shape{table.total_floats}),
      state2(Shape{table.total_floats});
  const StateBuffers st = state_buffers(kind, *cpu, state0.data(), state1.data(), state2.data());
  float* states[] = {state0.data(), state1.data(), state2.data()};
  std::vector<int64_t> steps(static_cast<size_t>(B), 0);
  const std::vector<OptimChunk> chunks = cuda::device_chunk_table(table);

  for (int step = 1; step <= 5; ++step) {
    SCOPED_TRACE(fmt::format("step {}", step));
    if (step == 4) {  // an LR schedule's change
      std::vector<float> lr(cpu->lr().begin(), cpu->lr().end());
      for (float& x : lr) x *= 0.5f;
      cpu->set_lr(lr);
    }
    const std::vector<float> grads = make_grads(table, step, seed);
    const StepReport& report = cpu->step(cpu_params.data(), grads.data());
    const std::vector<uint8_t> skip =
        host_mirror_step(kind, *cpu, chunks, steps, params.data(), grads.data(), st);
    EXPECT_EQ(skip, report.skipped);
    EXPECT_EQ(steps, std::vector<int64_t>(cpu->steps().begin(), cpu->steps().end()));
    const int64_t n = table.total_floats;
    expect_within_ulp(params.data(), cpu_params.data(), n, kMaxUlp, "params");
    for (int i = 0; i < cpu->num_state_buffers(); ++i)
      expect_within_ulp(states[i], cpu->state_buffer(i), n, kMaxUlp,
                        fmt::format("state buffer {}", i));
  }
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<Kind, int64_t>>& info) {
  return fmt::format("{}_B{}", kind_name(std::get<0>(info.param)), std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Optimizers, HostMirror,
                         ::testing::Combine(kAllKinds, ::testing::Values(1, 2, 3, 8)), case_name);

class ChunkTable : public ::testing::TestWithParam<int64_t> {};

TEST_P(ChunkTable, CoversEverySegmentFloatOnceWithItsModelAndDecayFlag) {
  const int64_t B = GetParam();
  for (int64_t chunk_floats : {int64_t{16}, Optimizer::kChunkFloats}) {
    SCOPED_TRACE(fmt::format("B {}, chunks of at most {} floats", B, chunk_floats));
    const int64_t c = chunk_floats;
    const ParamTable table = make_table(
        B, {{1, true}, {c - 1, false}, {c, true}, {c + 1, false}, {2 * c + 1, true}, {7, false}},
        5);
    const std::vector<OptimChunk> chunks = cuda::device_chunk_table(table, chunk_floats);
    const size_t n = static_cast<size_t>(table.total_floats);
    std::vector<int> covered(n, 0), model_at(n, -1), decay_at(n, -1);
    int64_t want_chunks = 0;
    for (const ParamSegment& s : table.segments)
      want_chunks += B * ((s.per_model_numel + chunk_floats - 1) / chunk_floats);
    EXPECT_EQ(static_cast<int64_t>(chunks.size()), want_chunks);
    for (const OptimChunk& chunk : chunks) {
      ASSERT_GE(chunk.size, 1);
      ASSERT_LE(chunk.size, chunk_floats);
      ASSERT_GE(chunk.begin, 0);
      ASSERT_LE(chunk.begin + chunk.size, table.total_floats);
      for (int64_t i = chunk.begin; i < chunk.begin + chunk.size; ++i) {
        ++covered[static_cast<size_t>(i)];
        model_at[static_cast<size_t>(i)] = chunk.model;
        decay_at[static_cast<size_t>(i)] = chunk.decay;
      }
    }
    std::vector<bool> in_segment(n, false);
    for (const ParamSegment& s : table.segments)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < s.per_model_numel; ++i) {
          const size_t at = static_cast<size_t>(s.offset + b * s.per_model_numel + i);
          in_segment[at] = true;
          ASSERT_EQ(covered[at], 1) << "float " << at << " (model " << b << ")";
          ASSERT_EQ(model_at[at], b) << "float " << at;
          ASSERT_EQ(decay_at[at], s.decay ? 1 : 0) << "float " << at;
        }
    for (size_t at = 0; at < n; ++at)
      if (!in_segment[at]) {
        ASSERT_EQ(covered[at], 0) << "float " << at << " is in no segment";
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ChunkTable, ::testing::Values(1, 2, 3, 8));

TEST(ChunkTableErrors, BadChunkSizeOrTableRaises) {
  const ParamTable table = make_table(2, {{4, true}}, 0);
  test::expect_error_containing_all([&] { cuda::device_chunk_table(table, 0); },
                                    {"chunk_floats = 0"});
  ParamTable overlapping = table;
  overlapping.segments.push_back({1, 4, true});
  test::expect_error_containing_all([&] { cuda::device_chunk_table(overlapping); }, {"overlaps"});
}

TEST(CudaOptimNoDevice, DeviceStepRaisesWithoutDevice) {
  if (cuda::device_available()) GTEST_SKIP() << "a CUDA device is present";
  const ParamTable table = make_table(2, {{4, true}}, 0);
  test::expect_error_containing_all([&] { cuda::DeviceOptimizerStep device(table); },
                                    {"no CUDA device"});
}

// ---- On a GPU ------------------------------------------------------------------------------

#define SKIP_WITHOUT_CUDA_DEVICE()                                                              \
  do {                                                                                          \
    if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status(); \
  } while (0)

// |got - want| <= 1e-5 |want| + 1e-6 max |want|: FMA contraction's rounding, with room for
// values that cancel to near zero (a momentum term whose gradient changed sign).
void expect_close_to_cpu(const std::vector<float>& got, const float* want,
                         const std::string& what) {
  float largest = 0.0f;
  for (size_t i = 0; i < got.size(); ++i) largest = std::max(largest, std::abs(want[i]));
  int64_t bad = 0, first_bad = -1;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= 1e-5f * std::abs(want[i]) + 1e-6f * largest)) {
      if (bad++ == 0) first_bad = static_cast<int64_t>(i);
    }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " floats differ from the CPU's; first at "
                    << first_bad << ": "
                    << (first_bad >= 0 ? got[static_cast<size_t>(first_bad)] : 0.0f) << " against "
                    << (first_bad >= 0 ? want[first_bad] : 0.0f);
}

class DeviceStep : public ::testing::TestWithParam<std::tuple<Kind, int64_t>> {};

TEST_P(DeviceStep, MatchesCpuOptimizerAndSkipsNonFiniteModels) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const auto [kind, B] = GetParam();
  const uint64_t seed = test::case_seed(fmt::format("device_step_{}_{}", kind_name(kind), B));
  HFTA_CASE_TRACE(seed);
  const ParamTable table = make_table(B, kOptimizerSegments, 3);
  std::unique_ptr<Optimizer> cpu = make_cpu_optimizer(kind, table);
  RngStream rng(seed, 1000);
  std::vector<float> cpu_params = test::random_buffer(Shape{table.total_floats}, rng).values;
  const Shape shape{table.total_floats};
  const size_t bytes = cuda::DeviceArena::align_up(cpu_params.size() * sizeof(float));
  cuda::DeviceArena arena(5 * bytes, "optimizer test");
  const TensorView params = arena.carve(shape), grads = arena.carve(shape),
                   state0 = arena.carve(shape), state1 = arena.carve(shape),
                   state2 = arena.carve(shape);
  const StateBuffers st = state_buffers(kind, *cpu, state0.data, state1.data, state2.data);
  const TensorView states[] = {state0, state1, state2};
  cuda::copy_to_device(TensorView(cpu_params.data(), shape), params);
  cuda::DeviceOptimizerStep device(table);
  std::vector<int64_t> steps(static_cast<size_t>(B), 0);

  auto to_host = [&](const TensorView& v) {
    std::vector<float> out(cpu_params.size());
    cuda::copy_to_host(v, TensorView(out.data(), shape));
    return out;
  };
  for (int step = 1; step <= 5; ++step) {
    SCOPED_TRACE(fmt::format("step {}", step));
    if (step == 4) {
      std::vector<float> lr(cpu->lr().begin(), cpu->lr().end());
      for (float& x : lr) x *= 0.5f;
      cpu->set_lr(lr);
    }
    std::vector<float> host_grads = make_grads(table, step, seed);
    const StepReport& report = cpu->step(cpu_params.data(), host_grads.data());
    cuda::copy_to_device(TensorView(host_grads.data(), shape), grads);
    const std::vector<float> params_before = to_host(params);
    const std::vector<uint8_t> skip = device.find_nonfinite_models(grads.data);
    EXPECT_EQ(skip, report.skipped);
    const StepConstants k = step_constants(kind, *cpu, skip, steps);
    switch (kind) {
      case Kind::kAdam:
      case Kind::kAdamW:
        device.adam_step(k.adam, params.data, grads.data, st.exp_avg, st.exp_avg_sq);
        break;
      case Kind::kSgd:
        device.sgd_step(k.sgd, params.data, grads.data, st.momentum);
        break;
      case Kind::kRmsprop:
        device.rmsprop_step(k.rmsprop, params.data, grads.data, st.square_avg, st.grad_avg,
                            st.momentum);
        break;
      case Kind::kAdadelta:
        device.adadelta_step(k.adadelta, params.data, grads.data, st.square_avg, st.acc_delta);
        break;
    }
    cuda::synchronize();
    const std::vector<float> got = to_host(params);
    expect_close_to_cpu(got, cpu_params.data(), "params");
    for (int i = 0; i < cpu->num_state_buffers(); ++i)
      expect_close_to_cpu(to_host(states[i]), cpu->state_buffer(i),
                          fmt::format("state buffer {}", i));
    // A skipped model's parameters are untouched, bit for bit.
    for (int64_t b = 0; b < B; ++b) {
      if (!skip[static_cast<size_t>(b)]) continue;
      for (const ParamSegment& s : table.segments)
        for (int64_t i = 0; i < s.per_model_numel; ++i) {
          const size_t at = static_cast<size_t>(s.offset + b * s.per_model_numel + i);
          ASSERT_EQ(std::bit_cast<uint32_t>(got[at]), std::bit_cast<uint32_t>(params_before[at]))
              << "skipped model " << b << " changed at float " << at;
        }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, DeviceStep,
                         ::testing::Combine(kAllKinds, ::testing::Values(1, 2, 3, 8)), case_name);

TEST(DeviceStepErrors, HostPointersAndWrongConstantCountsRaise) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const ParamTable table = make_table(2, {{4, true}}, 0);
  cuda::DeviceArena arena(4 * cuda::DeviceArena::kAlignment, "optimizer errors test");
  float* p = arena.carve(Shape{8}).data;
  float* g = arena.carve(Shape{8}).data;
  float* m = arena.carve(Shape{8}).data;
  float* v = arena.carve(Shape{8}).data;
  std::vector<float> host(8, 0.0f);
  cuda::DeviceOptimizerStep device(table);
  const std::vector<AdamStepConstants> two(2), one(1);
  test::expect_error_containing_all([&] { device.adam_step(one, p, g, m, v); },
                                    {"constants for 1 models", "has 2"});
  test::expect_error_containing_all([&] { device.adam_step(two, host.data(), g, m, v); },
                                    {"params is not device memory"});
  std::vector<SgdStepConstants> sgd(2);
  sgd[1].momentum = true;
  test::expect_error_containing_all([&] { device.sgd_step(sgd, p, g, nullptr); },
                                    {"momentum_buffer", "null"});
  std::vector<RmspropStepConstants> rmsprop(2);
  rmsprop[0].centered = true;
  test::expect_error_containing_all([&] { device.rmsprop_step(rmsprop, p, g, m, nullptr, v); },
                                    {"grad_avg (a model is centered)", "null"});
  const std::vector<AdadeltaStepConstants> adadelta(2);
  test::expect_error_containing_all([&] { device.adadelta_step(adadelta, p, g, m, host.data()); },
                                    {"acc_delta is not device memory"});
}

}  // namespace
}  // namespace hfta
