// CPU fused embedding.
//
// Forward copies one D-float table row per (model, token row): parallel over the B*R output rows.
// Backward is a scatter-add where one id may repeat many times (frequent tokens), so rows cannot
// be split across threads without atomics or per-thread copies of the table. Instead each task
// owns one model and a slice of the D columns, and runs all R rows in order, adding its slice of
// each dy row to the slice of the id's table row: tasks write disjoint memory (no races), and the
// sum's order is the row order whatever B or the thread count (the result is reproducible). The
// slices are multiples of 16 columns, as few as give every thread a task.
#include "fused_ops/embedding.h"

#include <algorithm>

#include "core/parallel.h"

namespace hfta::cpu {

void embedding_forward(const EmbeddingParams& p, const EmbeddingForwardArgs& a) {
  const int64_t R = p.R, D = p.D;
  parallel_for(p.B * R, [&](int64_t row) {
    const int64_t b = row / R;
    const float* from = a.weight.data + (b * p.V + a.ids.data[row % R]) * D;
    std::copy(from, from + D, a.y.data + row * D);
  });
}

void embedding_backward(const EmbeddingParams& p, const EmbeddingBackwardArgs& a) {
  const int64_t R = p.R, D = p.D;
  const int64_t vectors = (D + 15) / 16;
  const int64_t slices = std::clamp<int64_t>((num_threads() + p.B - 1) / p.B, 1, vectors);
  const int64_t width = (vectors + slices - 1) / slices * 16;
  const int32_t* ids = a.ids.data;
  const int64_t padding = p.padding_idx.value_or(-1);
  parallel_for(p.B * slices, [&](int64_t task) {
    const int64_t b = task / slices, c0 = (task % slices) * width;
    const int64_t cols = std::min(D, c0 + width) - c0;
    if (cols <= 0) return;
    float* table = a.dweight.data + b * p.V * D + c0;
    const float* g = a.dy.data + b * R * D + c0;
    for (int64_t r = 0; r < R; ++r) {
      if (ids[r] == padding) continue;
      float* to = table + ids[r] * D;
      const float* from = g + r * D;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) to[c] += from[c];
    }
  });
}

}  // namespace hfta::cpu
