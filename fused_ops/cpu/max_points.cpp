// CPU fused max over points: our own OpenMP kernel over [B, N, L, C].
//
// Each (model, sample) is L rows of C channels; the max runs down the rows, vectorized across a
// block of channels, keeping the best value and its row per channel in registers/L1. Tasks are
// (model, sample, channel block) triples, so PointNet's B*32 samples of 1024 channels give
// plenty of parallelism, and a single sample still splits over the threads when C is large.
// A block of kBlock channels reads kBlock*4 contiguous bytes from each row: whole cache lines.
// Backward zeroes each sample's dx (unless accumulating) and scatters one dy per channel, so
// each task is one sample: its dx block [L, C] is contiguous.
#include "fused_ops/max_points.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "core/parallel.h"

namespace hfta::cpu {

namespace {

constexpr int64_t kBlock = 256;  // channels per task (1 KB of each row)

// A block of `width` channels of one sample: L rows, `stride` floats apart.
struct Block {
  int64_t L, stride, width;
};

template <bool kWithArgmax>
void max_block(const float* x, const Block& k, float* y, int32_t* argmax) {
  const int64_t L = k.L, C = k.stride, width = k.width;
  float best[kBlock];
  int32_t at[kBlock];
  std::copy(x, x + width, best);
  std::fill(at, at + width, 0);
  for (int64_t l = 1; l < L; ++l) {
    const float* xr = x + l * C;
    const int32_t row = static_cast<int32_t>(l);
#pragma omp simd
    for (int64_t c = 0; c < width; ++c) {
      const float v = xr[c], b = best[c];
      // Larger, or the first NaN (once best is NaN, nothing compares larger or replaces it).
      const bool take = (v > b) | ((v != v) & (b == b));
      best[c] = take ? v : b;
      if constexpr (kWithArgmax) at[c] = take ? row : at[c];
    }
  }
  std::copy(best, best + width, y);
  if constexpr (kWithArgmax) std::copy(at, at + width, argmax);
}

}  // namespace

void max_over_points_forward(const MaxOverPointsParams& p, const MaxOverPointsForwardArgs& a) {
  const int64_t L = p.L, C = p.C, blocks = (C + kBlock - 1) / kBlock;
  const bool with_argmax = !a.saved.argmax.empty();
  parallel_for(p.B * p.N * blocks, [&](int64_t t) {
    const int64_t problem = t / blocks, c0 = (t % blocks) * kBlock;
    const int64_t width = std::min(kBlock, C - c0);
    const float* x = a.x.data + problem * L * C + c0;
    float* y = a.y.data + problem * C + c0;
    if (with_argmax)
      max_block<true>(x, {L, C, width}, y, a.saved.argmax.data + problem * C + c0);
    else
      max_block<false>(x, {L, C, width}, y, nullptr);
  });
}

void max_over_points_backward(const MaxOverPointsParams& p, const MaxOverPointsBackwardArgs& a) {
  const int64_t L = p.L, C = p.C;
  const bool accumulate = a.accumulate_dx;
  parallel_for(p.B * p.N, [&](int64_t problem) {
    float* dx = a.dx.data + problem * L * C;
    const float* dy = a.dy.data + problem * C;
    const int32_t* at = a.saved.argmax.data + problem * C;
    if (!accumulate) std::memset(dx, 0, sizeof(float) * static_cast<size_t>(L * C));
    for (int64_t c = 0; c < C; ++c) {
      assert(at[c] >= 0 && at[c] < L);
      dx[at[c] * C + c] += dy[c];
    }
  });
}

}  // namespace hfta::cpu
