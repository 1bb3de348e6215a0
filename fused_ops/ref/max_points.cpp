#include "fused_ops/max_points.h"

#include <cmath>

namespace hfta::ref {

// The specification: per model, per sample, per channel, a scan over the points in order.
// A point replaces the best so far when it is larger, or when it is the first NaN.

void max_over_points_forward(const MaxOverPointsParams& p, const MaxOverPointsForwardArgs& a) {
  check_max_over_points(p, a);
  const int64_t L = p.L, C = p.C;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t s = 0; s < p.N; ++s) {
      const int64_t problem = b * p.N + s;
      const float* x = a.x.data + problem * L * C;
      for (int64_t c = 0; c < C; ++c) {
        float best = x[c];
        int32_t at = 0;
        for (int64_t l = 1; l < L; ++l) {
          const float v = x[l * C + c];
          if (std::isnan(best)) break;
          if (v > best || std::isnan(v)) best = v, at = static_cast<int32_t>(l);
        }
        a.y.data[problem * C + c] = best;
        if (!a.saved.argmax.empty()) a.saved.argmax.data[problem * C + c] = at;
      }
    }
}

void max_over_points_backward(const MaxOverPointsParams& p, const MaxOverPointsBackwardArgs& a) {
  check_max_over_points_backward(p, a);
  const int64_t L = p.L, C = p.C;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t s = 0; s < p.N; ++s) {
      const int64_t problem = b * p.N + s;
      float* dx = a.dx.data + problem * L * C;
      for (int64_t l = 0; l < L; ++l)
        for (int64_t c = 0; c < C; ++c) {
          const bool chosen = a.saved.argmax.data[problem * C + c] == l;
          const float g = chosen ? a.dy.data[problem * C + c] : 0.0f;
          dx[l * C + c] = a.accumulate_dx ? dx[l * C + c] + g : g;
        }
    }
}

}  // namespace hfta::ref
