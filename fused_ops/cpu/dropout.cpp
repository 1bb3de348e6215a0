// CPU fused dropout.
//
// Parallelization: forward runs one model per thread (parallel_for over B). A model's random
// numbers come from one sequential stream, so its mask cannot be split across threads without
// changing which numbers it draws; each thread draws its model's mask in the single-model order
// and applies it in the same pass (one read of x, one write of mask and y). With B < threads
// some threads idle: the draws (about 2 ns per element) are the cost, not memory.
// Backward and the eval-mode copy are elementwise: the flat tensor is split in 16K-element
// chunks over the threads.
#include "fused_ops/dropout.h"

#include <algorithm>

#include "core/parallel.h"

namespace hfta::cpu {

namespace {

// Draws `count` mask values from rng into mask[0, count) and (kApply) applies them to x into y.
// The uniforms are staged in mask one block at a time, so the keep-or-drop choice runs as a
// branch-free vector loop: drawn and chosen in one scalar loop, the compiler emits a branch that
// mispredicts half the time at p = 0.5 (docs/benchmarks.md, "Measurements behind code choices").
// NOLINTBEGIN(bugprone-easily-swappable-parameters): an internal kernel helper called only in this
// file, at a few call sites that pass locals named like its parameters.
template <bool kApply>
void draw_mask(RngStream& rng, float p, float scale, int64_t count, const float* x, float* mask,
               float* y) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  constexpr int64_t kBlock = 1024;
  for (int64_t begin = 0; begin < count; begin += kBlock) {
    const int64_t end = std::min(count, begin + kBlock);
    for (int64_t i = begin; i < end; ++i) mask[i] = rng.uniform();
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
      const float keep = mask[i] >= p ? scale : 0.0f;
      mask[i] = keep;
      if constexpr (kApply) y[i] = x[i] * keep;
    }
  }
}

// Model b's draws in the order of its single-model tensor, one model per thread: run(rng, at,
// count) for each contiguous run of the model's elements (all of them in [B, ...]; in
// [N, B*C, HW] the C*HW elements of row n, row after row).
template <typename Run>
void for_each_model_run(const DropoutParams& p, std::span<RngStream> streams, Run&& run) {
  parallel_for(p.B, [&](int64_t b) {
    RngStream& rng = streams[b];
    if (p.layout == DropoutLayout::kModelMajor)
      return run(rng, b * p.per_model_numel, p.per_model_numel);
    const int64_t count = p.C * p.HW;
    for (int64_t n = 0; n < p.N; ++n) run(rng, (n * p.B + b) * count, count);
  });
}

}  // namespace

void dropout_forward(const DropoutParams& p, const DropoutForwardArgs& a) {
  const TensorView &x = a.x, &y = a.y;
  if (!p.active()) {
    if (y.data != x.data)
      for_each_chunk(x.numel(), [&](int64_t begin, int64_t end) {
        std::copy(x.data + begin, x.data + end, y.data + begin);
      });
    return;
  }
  const float scale = p.keep_scale();
  float* mask = a.saved.mask.data;
  for_each_model_run(p, a.streams, [&](RngStream& rng, int64_t at, int64_t count) {
    draw_mask<true>(rng, p.p, scale, count, x.data + at, mask + at, y.data + at);
  });
}

void dropout_draw_mask(const DropoutParams& p, std::span<RngStream> streams, float* mask) {
  const float scale = p.keep_scale();
  for_each_model_run(p, streams, [&](RngStream& rng, int64_t at, int64_t count) {
    draw_mask<false>(rng, p.p, scale, count, nullptr, mask + at, nullptr);
  });
}

// No FMA contraction: dx += mask * dy rounds the product first, as the reference and the CUDA
// kernel do (with contraction, GCC fused it wherever the ISA has FMA, so the accumulated
// gradient's last bit depended on the machine).
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
void dropout_backward(const DropoutParams& p, const DropoutBackwardArgs& a) {
  const TensorView &dy = a.dy, &dx = a.dx;
  const DropoutSaved& saved = a.saved;
  const float* g = dy.data;
  float* out = dx.data;
  if (!p.active()) {
    if (a.accumulate_dx)
      for_each_chunk(dy.numel(), [&](int64_t begin, int64_t end) {
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) out[i] += g[i];
      });
    else if (out != g)
      for_each_chunk(dy.numel(), [&](int64_t begin, int64_t end) {
        std::copy(g + begin, g + end, out + begin);
      });
    return;
  }
  const float* mask = saved.mask.data;
  for_each_chunk(dy.numel(), [&](int64_t begin, int64_t end) {
    // NOLINTBEGIN(bugprone-branch-clone): the branches differ (+= vs =); the check ignores the
    // body of an `omp simd` loop.
    if (a.accumulate_dx) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) out[i] += mask[i] * g[i];
    } else {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) out[i] = mask[i] * g[i];
    }
    // NOLINTEND(bugprone-branch-clone)
  });
}
#pragma GCC pop_options

}  // namespace hfta::cpu
