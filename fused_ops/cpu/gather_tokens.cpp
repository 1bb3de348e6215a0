// CPU token gather: forward one task per (model, output row), a copy or a zero fill; backward
// zeroes dx (unless accumulating) and then, one task per model so that no two threads add into
// one row, adds the output rows' gradients into their input rows in row order. The CUDA op
// (fused_ops/cuda/gather_tokens_math.h) adds each input row's gradients in the same order.
#include "fused_ops/gather_tokens.h"

#include <algorithm>
#include <cstring>

#include "core/parallel.h"

namespace hfta::cpu {

void gather_tokens_forward(const GatherTokensParams& p, const GatherTokensForwardArgs& a) {
  check_gather_tokens_rows(p, a.rows);
  const int64_t R = p.R, K = p.K, D = p.D;
  parallel_for(p.B * K, [&](int64_t br) {
    const int64_t b = br / K, r = br % K;
    const int32_t i = a.rows.data[r];
    float* dst = a.y.data + br * D;
    if (i < 0)
      std::fill(dst, dst + D, 0.0f);
    else
      std::memcpy(dst, a.x.data + (b * R + i) * D, static_cast<size_t>(D) * sizeof(float));
  });
}

void gather_tokens_backward(const GatherTokensParams& p, const GatherTokensBackwardArgs& a) {
  check_gather_tokens_rows(p, a.rows);
  const int64_t R = p.R, K = p.K, D = p.D;
  if (!a.accumulate_dx) std::fill(a.dx.data, a.dx.data + p.B * R * D, 0.0f);
  parallel_for(p.B, [&](int64_t b) {
    for (int64_t r = 0; r < K; ++r) {
      const int32_t i = a.rows.data[r];
      if (i < 0) continue;
      float* dst = a.dx.data + (b * R + i) * D;
      const float* src = a.dy.data + (b * K + r) * D;
      for (int64_t d = 0; d < D; ++d) dst[d] += src[d];
    }
  });
}

}  // namespace hfta::cpu
