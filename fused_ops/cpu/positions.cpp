// CPU fused position encodings.
//
// Forward and the input gradient are elementwise over rows of D features: parallel over the
// B*n*T rows. The learned table's gradient sums each position over the n sequences, so backward
// runs one task per (model, position): it sums that position's n dy rows in double in sequence
// order (the reference's order and precision, so dtable is exact, whatever B or the thread
// count) and writes the same rows' dx in the same pass (in place over dy is safe: each element
// is read before it is written).
#include "fused_ops/positions.h"

#include <algorithm>
#include <vector>

#include "core/parallel.h"

namespace hfta::cpu {

void positions_forward(const PositionsParams& p, const PositionsForwardArgs& a) {
  const int64_t D = p.D, P = p.table_rows();
  const bool learned = p.kind == PositionKind::kLearned;
  const float scale = p.x_scale;
  parallel_for(p.B * p.n * p.T, [&](int64_t row) {
    const int64_t b = row / (p.n * p.T), t = row % p.T;
    const float* pe = a.table.data + ((learned ? b * P : 0) + t) * D;
    const float* x = a.x.data + row * D;
    float* y = a.y.data + row * D;
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) y[d] = scale * x[d] + pe[d];
  });
}

namespace {

// dx = x_scale * dy over one row, written or added.
// NOLINTBEGIN(bugprone-easily-swappable-parameters): an internal helper called in this file only.
inline void input_grad_row(const float* dy, float* dx, int64_t D, float scale, bool accumulate) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  // NOLINTBEGIN(bugprone-branch-clone): the branches differ (+= vs =); the check ignores the
  // body of an `omp simd` loop.
  if (accumulate) {
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) dx[d] += scale * dy[d];
  } else {
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) dx[d] = scale * dy[d];
  }
  // NOLINTEND(bugprone-branch-clone)
}

}  // namespace

void positions_backward(const PositionsParams& p, const PositionsBackwardArgs& a) {
  const int64_t D = p.D, T = p.T;
  const float scale = p.x_scale;
  const bool want_dx = !a.dx.empty();
  if (a.dtable.empty()) {
    if (want_dx)
      parallel_for(p.B * p.n * T, [&](int64_t row) {
        input_grad_row(a.dy.data + row * D, a.dx.data + row * D, D, scale, a.accumulate_dx);
      });
    return;
  }
  parallel_for(p.B * T, [&](int64_t task) {
    const int64_t b = task / T, t = task % T;
    thread_local std::vector<double> sum;
    sum.assign(static_cast<size_t>(D), 0.0);
    for (int64_t s = 0; s < p.n; ++s) {
      const int64_t row = (b * p.n + s) * T + t;
      const float* dy = a.dy.data + row * D;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) sum[d] += dy[d];
      if (want_dx) input_grad_row(dy, a.dx.data + row * D, D, scale, a.accumulate_dx);
    }
    float* dtable = a.dtable.data + (b * p.table_rows() + t) * D;
    for (int64_t d = 0; d < D; ++d) dtable[d] += static_cast<float>(sum[d]);
  });
}

}  // namespace hfta::cpu
