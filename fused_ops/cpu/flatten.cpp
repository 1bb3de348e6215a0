// CPU flatten: one contiguous copy per (b, n) row.
//
// Parallelization: parallel_for over the B*N rows. Model b's channels of sample n are one
// contiguous run of C*H*W floats in the conv layout, and row (b, n) of the linear layout is one
// too, so each row is a memcpy and rows are independent. The op only moves memory (no
// arithmetic), so the one goal is long contiguous copies, which whole rows give. For B = 1 the
// rows are consecutive in both layouts and the loop is a plain copy.
#include "fused_ops/flatten.h"

#include <cstring>

#include "core/parallel.h"

namespace hfta::cpu {

void flatten_forward(const FlattenParams& p, const FlattenForwardArgs& a) {
  const TensorView &x = a.x, &y = a.y;
  const int64_t B = p.B, N = p.N, F = p.features();
  parallel_for(B * N, [&](int64_t row) {
    const int64_t b = row / N, n = row % N;
    std::memcpy(y.data + row * F, x.data + (n * B + b) * F, sizeof(float) * F);
  });
}

void flatten_backward(const FlattenParams& p, const FlattenBackwardArgs& a) {
  const TensorView &dy = a.dy, &dx = a.dx;
  const int64_t B = p.B, N = p.N, F = p.features();
  parallel_for(B * N, [&](int64_t row) {
    const int64_t b = row / N, n = row % N;
    float* to = dx.data + (n * B + b) * F;
    const float* from = dy.data + row * F;
    if (a.accumulate_dx) {
#pragma omp simd
      for (int64_t i = 0; i < F; ++i) to[i] += from[i];
    } else {
      std::memcpy(to, from, sizeof(float) * F);
    }
  });
}

}  // namespace hfta::cpu
