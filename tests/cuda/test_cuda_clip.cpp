// Per-model gradient clipping on the device (optim/cuda/fused_step.h, DeviceOptimizerStep::
// clip_grad_norm) against the CPU's clip_grad_norm_per_model (optim/clip.h), on the optimizer
// tests' parameter tables: models far below and far above their limits, a NaN in one.
//
// Without a GPU: ClipHostMirror runs the three clip kernels' arithmetic (optim/cuda/update_math.h)
// on the host over the chunk table, block by block and tree level by tree level. With a GPU:
// DeviceClip runs the device step.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "optim/clip.h"
#include "optim/cuda/fused_step.h"
#include "optim/cuda/update_math.h"
#include "optim_cases.h"
#include "test_util.h"

namespace hfta {
namespace {

using cuda::kernels::OptimChunk;
using test::kOptimizerSegments;
using test::make_table;

// Gradients where model b's norm (about 75 unscaled) is below or far above its limit (1 to 4):
// model b's values scaled by 10^(2 (b % 3) - 3); a NaN in model 1's last segment when B > 2.
std::vector<float> clip_grads(const ParamTable& table, uint64_t seed) {
  RngStream rng(seed, 7);
  std::vector<float> g = test::random_buffer(Shape{table.total_floats}, rng).values;
  for (const ParamSegment& s : table.segments)
    for (int64_t b = 0; b < table.B; ++b)
      for (int64_t i = 0; i < s.per_model_numel; ++i)
        g[static_cast<size_t>(s.offset + b * s.per_model_numel + i)] *=
            std::pow(10.0f, static_cast<float>(2 * (b % 3) - 3));
  if (table.B > 2) {
    const ParamSegment& last = table.segments.back();
    g[static_cast<size_t>(last.offset + last.per_model_numel + 2)] =
        std::numeric_limits<float>::quiet_NaN();
  }
  return g;
}

std::vector<float> clip_limits(int64_t B) {
  std::vector<float> limits;
  for (int64_t b = 0; b < B; ++b) limits.push_back(1.0f + static_cast<float>(b % 4));
  return limits;
}

// The CPU's clip over the table's segments as [B, per_model] gradients.
std::vector<float> cpu_clip(const ParamTable& table, std::vector<float>& grads,
                            std::span<const float> limits) {
  std::vector<TensorView> views;
  for (const ParamSegment& s : table.segments)
    views.push_back(TensorView(grads.data() + s.offset, Shape{table.B, s.per_model_numel}));
  std::vector<float> norms(static_cast<size_t>(table.B));
  clip_grad_norm_per_model(views, table.B, limits, norms);
  return norms;
}

// The three clip kernels run on the host over the chunk table, as the device runs them.
std::vector<float> host_mirror_clip(const ParamTable& table, const std::vector<OptimChunk>& chunks,
                                    std::vector<float>& grads, std::span<const float> limits) {
  constexpr int kThreads = 256;  // the kernels' block (fused_ops/cuda/launch.cuh)
  std::vector<double> partials;
  for (const OptimChunk& c : chunks) {
    double partial[kThreads];
    for (int t = 0; t < kThreads; ++t)
      partial[t] = optim_math::clip_thread_sum(grads.data(), c.begin, c.size, t, kThreads);
    for (int stride = kThreads / 2; stride > 0; stride /= 2)
      for (int t = 0; t < kThreads; ++t) optim_math::clip_tree_level(partial, t, stride);
    partials.push_back(partial[0]);
  }
  std::vector<float> norms(static_cast<size_t>(table.B)), coefs(norms.size());
  for (int64_t b = 0; b < table.B; ++b) {
    double sum = 0.0;
    for (size_t c = 0; c < chunks.size(); ++c)
      if (chunks[c].model == b) sum += partials[c];
    norms[static_cast<size_t>(b)] = optim_math::clip_norm(sum);
    coefs[static_cast<size_t>(b)] =
        optim_math::clip_coefficient(norms[static_cast<size_t>(b)], limits[static_cast<size_t>(b)]);
  }
  for (const OptimChunk& c : chunks) {
    const float coef = coefs[static_cast<size_t>(c.model)];
    if (coef >= 1.0f) continue;
    for (int64_t i = c.begin; i < c.begin + c.size; ++i) grads[static_cast<size_t>(i)] *= coef;
  }
  return norms;
}

// Norms and clipped gradients within 1e-6 relative of the CPU's (the sums' order differs), the
// NaN model's gradients untouched, unclipped models' bit for bit.
void expect_clip_matches_cpu(const ParamTable& table, const std::vector<float>& got_grads,
                             const std::vector<float>& got_norms,
                             const std::vector<float>& cpu_grads,
                             const std::vector<float>& cpu_norms) {
  for (int64_t b = 0; b < table.B; ++b) {
    const float want = cpu_norms[static_cast<size_t>(b)], got = got_norms[static_cast<size_t>(b)];
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "model " << b << "'s norm";
    } else {
      EXPECT_NEAR(got, want, 1e-6 * want) << "model " << b << "'s norm";
    }
  }
  for (size_t i = 0; i < cpu_grads.size(); ++i) {
    const float want = cpu_grads[i], got = got_grads[i];
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << "float " << i;
      continue;
    }
    ASSERT_NEAR(got, want, 1e-6 * std::abs(want)) << "float " << i;
  }
}

class ClipHostMirror : public ::testing::TestWithParam<int64_t> {};

TEST_P(ClipHostMirror, KernelsOverTheChunkTableMatchCpuClip) {
  const int64_t B = GetParam();
  const uint64_t seed = test::case_seed(fmt::format("clip_host_mirror_{}", B));
  HFTA_CASE_TRACE(seed);
  const ParamTable table = make_table(B, kOptimizerSegments, 3);
  const std::vector<float> limits = clip_limits(B);
  std::vector<float> cpu_grads = clip_grads(table, seed), grads = cpu_grads;
  const std::vector<float> cpu_norms = cpu_clip(table, cpu_grads, limits);
  const std::vector<float> norms =
      host_mirror_clip(table, cuda::device_chunk_table(table), grads, limits);
  expect_clip_matches_cpu(table, grads, norms, cpu_grads, cpu_norms);
  // The case clips some models and leaves others (B >= 2), so both paths are checked.
  int clipped = 0;
  for (int64_t b = 0; b < B; ++b)
    clipped += cpu_norms[static_cast<size_t>(b)] > limits[static_cast<size_t>(b)] ? 1 : 0;
  if (B >= 2) {
    EXPECT_GT(clipped, 0);
    EXPECT_LT(clipped, B);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ClipHostMirror, ::testing::Values(1, 2, 3, 8));

class DeviceClip : public ::testing::TestWithParam<int64_t> {};

TEST_P(DeviceClip, MatchesCpuClip) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const int64_t B = GetParam();
  const uint64_t seed = test::case_seed(fmt::format("clip_host_mirror_{}", B));
  HFTA_CASE_TRACE(seed);
  const ParamTable table = make_table(B, kOptimizerSegments, 3);
  const std::vector<float> limits = clip_limits(B);
  std::vector<float> cpu_grads = clip_grads(table, seed);
  const std::vector<float> host_grads = cpu_grads;
  const std::vector<float> cpu_norms = cpu_clip(table, cpu_grads, limits);
  const Shape shape{table.total_floats};
  cuda::DeviceArena arena(cuda::DeviceArena::align_up(host_grads.size() * sizeof(float)),
                          "clip test");
  const TensorView grads = arena.carve(shape);
  cuda::copy_to_device(TensorView(const_cast<float*>(host_grads.data()), shape), grads);
  cuda::DeviceOptimizerStep device(table);
  std::vector<float> norms(static_cast<size_t>(B));
  device.clip_grad_norm(limits, grads.data, norms);
  std::vector<float> got(host_grads.size());
  cuda::copy_to_host(grads, TensorView(got.data(), shape));
  expect_clip_matches_cpu(table, got, norms, cpu_grads, cpu_norms);
}

INSTANTIATE_TEST_SUITE_P(Models, DeviceClip, ::testing::Values(1, 2, 3, 8));

}  // namespace
}  // namespace hfta
