// CPU fused LayerNorm: our own OpenMP kernel over the B*N rows of [B, N, F].
//
// Parallelization: parallel_for over the B*N rows for the forward pass and for dx (every row is
// independent; across models and rows at once, so B=1 keeps all threads busy too). Each row is
// a contiguous, vectorized loop over F. dgamma/dbeta reduce over the N rows of each model; a
// second parallel_for over (model, block of features) does it, each task owning its
// outputs, so there are no races, no per-thread partial buffers (no workspace) and the result
// does not depend on the thread count. The price is that backward reads x and dy twice. Blocks
// are as wide as keeps the threads busy: fixed 64-feature blocks read strided 256-byte row
// segments, which made that pass about twice as slow (docs/benchmarks.md, 'Measurements behind
// code choices').
//
// Statistics use two passes (mean, then squared deviations from it), float within a row (rows
// are at most a few thousand features) and double for the column sums over N.
#include "fused_ops/layernorm.h"

#include <algorithm>
#include <cmath>

#include "core/parallel.h"

namespace hfta::cpu {

namespace {

// At most this many features per dgamma/dbeta task: its double accumulators (16 KiB) stay in L1.
constexpr int64_t kMaxColumnBlock = 1024;

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

}  // namespace

void layernorm_forward(const LayerNormParams& p, const LayerNormForwardArgs& a) {
  const TensorView &x = a.x, &gamma = a.gamma, &beta = a.beta, &y = a.y;
  const LayerNormSaved& saved = a.saved;
  const int64_t F = p.F;
  parallel_for(p.B * p.N, [&](int64_t row) {
    const float* xr = x.data + row * F;
    float* yr = y.data + row * F;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t f = 0; f < F; ++f) sum += xr[f];
    const float mean = sum / static_cast<float>(F);
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (int64_t f = 0; f < F; ++f) sq += (xr[f] - mean) * (xr[f] - mean);
    const float rstd = static_cast<float>(1.0 / std::sqrt(double(sq) / F + p.eps));
    saved.mean.data[row] = mean;
    saved.rstd.data[row] = rstd;
    if (p.affine) {
      const int64_t b = row / p.N;
      const float* g = gamma.data + b * F;
      const float* s = beta.data + b * F;
#pragma omp simd
      for (int64_t f = 0; f < F; ++f) yr[f] = (xr[f] - mean) * rstd * g[f] + s[f];
    } else {
#pragma omp simd
      for (int64_t f = 0; f < F; ++f) yr[f] = (xr[f] - mean) * rstd;
    }
  });
}

void layernorm_backward(const LayerNormParams& p, const LayerNormBackwardArgs& a) {
  const TensorView &x = a.x, &gamma = a.gamma, &dy = a.dy, &dx = a.dx, &dgamma = a.dgamma,
                   &dbeta = a.dbeta;
  const LayerNormSaved& saved = a.saved;
  const int64_t F = p.F, N = p.N;
  // dx = rstd * (gdy - mean(gdy) - xhat * mean(gdy * xhat)), gdy = dy * gamma.
  if (!dx.empty())
    parallel_for(p.B * N, [&](int64_t row) {
      const float* xr = x.data + row * F;
      const float* dyr = dy.data + row * F;
      float* dxr = dx.data + row * F;
      const float mean = saved.mean.data[row], rstd = saved.rstd.data[row];
      const float* g = p.affine ? gamma.data + (row / N) * F : nullptr;
      float sum_gdy = 0.0f, sum_gdy_xmu = 0.0f;  // sum gdy, sum gdy * (x - mean)
      if (g) {
#pragma omp simd reduction(+ : sum_gdy, sum_gdy_xmu)
        for (int64_t f = 0; f < F; ++f) {
          float gdy = dyr[f] * g[f];
          sum_gdy += gdy;
          sum_gdy_xmu += gdy * (xr[f] - mean);
        }
      } else {
#pragma omp simd reduction(+ : sum_gdy, sum_gdy_xmu)
        for (int64_t f = 0; f < F; ++f) {
          sum_gdy += dyr[f];
          sum_gdy_xmu += dyr[f] * (xr[f] - mean);
        }
      }
      // dx = rstd * gdy + k1 * (x - mean) + k0
      const float k1 = -rstd * rstd * rstd * sum_gdy_xmu / static_cast<float>(F);
      const float k0 = -rstd * sum_gdy / static_cast<float>(F);
      // NOLINTBEGIN(bugprone-branch-clone): the branches differ (+= vs =); the check ignores the
      // body of an `omp simd` loop.
      if (g && a.accumulate_dx) {
#pragma omp simd
        for (int64_t f = 0; f < F; ++f) dxr[f] += rstd * (dyr[f] * g[f]) + k1 * (xr[f] - mean) + k0;
      } else if (g) {
#pragma omp simd
        for (int64_t f = 0; f < F; ++f) dxr[f] = rstd * (dyr[f] * g[f]) + k1 * (xr[f] - mean) + k0;
      } else if (a.accumulate_dx) {
#pragma omp simd
        for (int64_t f = 0; f < F; ++f) dxr[f] += rstd * dyr[f] + k1 * (xr[f] - mean) + k0;
      } else {
#pragma omp simd
        for (int64_t f = 0; f < F; ++f) dxr[f] = rstd * dyr[f] + k1 * (xr[f] - mean) + k0;
      }
      // NOLINTEND(bugprone-branch-clone)
    });

  const bool want_dgamma = p.affine && !dgamma.empty(), want_dbeta = p.affine && !dbeta.empty();
  if (!want_dgamma && !want_dbeta) return;
  // Split each model's features into as few column blocks as keep every thread busy (two tasks
  // per thread), so a task walks long contiguous row segments; the sums over n run in the same
  // order whatever the split, so the result does not depend on it.
  const int64_t min_blocks = std::max<int64_t>((F + kMaxColumnBlock - 1) / kMaxColumnBlock,
                                               (2 * int64_t{num_threads()} + p.B - 1) / p.B);
  const int64_t width = std::min(kMaxColumnBlock, round_up((F + min_blocks - 1) / min_blocks, 16));
  const int64_t blocks = (F + width - 1) / width;
  parallel_for(p.B * blocks, [&](int64_t task) {
    const int64_t b = task / blocks, f0 = (task % blocks) * width;
    const int64_t cols = std::min(width, F - f0);
    double acc_g[kMaxColumnBlock] = {}, acc_b[kMaxColumnBlock] = {};
    for (int64_t n = 0; n < N; ++n) {
      const int64_t row = b * N + n;
      const float* xr = x.data + row * F + f0;
      const float* dyr = dy.data + row * F + f0;
      const float mean = saved.mean.data[row], rstd = saved.rstd.data[row];
#pragma omp simd
      for (int64_t f = 0; f < cols; ++f) {
        acc_g[f] += dyr[f] * ((xr[f] - mean) * rstd);
        acc_b[f] += dyr[f];
      }
    }
    for (int64_t f = 0; f < cols; ++f) {
      if (want_dgamma) dgamma.data[b * F + f0 + f] += static_cast<float>(acc_g[f]);
      if (want_dbeta) dbeta.data[b * F + f0 + f] += static_cast<float>(acc_b[f]);
    }
  });
}

}  // namespace hfta::cpu
