// CPU fused repeat over points: our own OpenMP kernel over [B, N, L, C].
//
// Forward writes L copies of each sample's C channels: tasks are (sample, chunk of points) with
// about 16K floats each, so one sample's large output still spreads over the threads.
// Backward sums each sample's L rows per channel, vectorized across a block of channels with
// double accumulators (exactly the reference's order, so both round to the same float): tasks
// are (sample, channel block), as in max_over_points.
#include "fused_ops/repeat_points.h"

#include <algorithm>
#include <cstring>

#include "core/parallel.h"

namespace hfta::cpu {

namespace {

constexpr int64_t kBlock = 256;  // channels per backward task (1 KB of each row)

}  // namespace

void repeat_points_forward(const RepeatPointsParams& p, const RepeatPointsForwardArgs& a) {
  const int64_t L = p.L, C = p.C;
  const int64_t rows = std::clamp<int64_t>((1 << 14) / C, 1, L);  // points per task
  const int64_t chunks = (L + rows - 1) / rows;
  parallel_for(p.B * p.N * chunks, [&](int64_t t) {
    const int64_t problem = t / chunks, l0 = (t % chunks) * rows, l1 = std::min(L, l0 + rows);
    const float* x = a.x.data + problem * C;
    for (int64_t l = l0; l < l1; ++l)
      std::memcpy(a.y.data + (problem * L + l) * C, x, sizeof(float) * static_cast<size_t>(C));
  });
}

void repeat_points_backward(const RepeatPointsParams& p, const RepeatPointsBackwardArgs& a) {
  const int64_t L = p.L, C = p.C, blocks = (C + kBlock - 1) / kBlock;
  const bool accumulate = a.accumulate_dx;
  parallel_for(p.B * p.N * blocks, [&](int64_t t) {
    const int64_t problem = t / blocks, c0 = (t % blocks) * kBlock;
    const int64_t width = std::min(kBlock, C - c0);
    const float* dy = a.dy.data + problem * L * C + c0;
    double sum[kBlock] = {};
    for (int64_t l = 0; l < L; ++l) {
      const float* row = dy + l * C;
#pragma omp simd
      for (int64_t c = 0; c < width; ++c) sum[c] += row[c];
    }
    float* dx = a.dx.data + problem * C + c0;
    for (int64_t c = 0; c < width; ++c)
      dx[c] = accumulate ? dx[c] + static_cast<float>(sum[c]) : static_cast<float>(sum[c]);
  });
}

}  // namespace hfta::cpu
