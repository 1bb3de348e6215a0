#include "fused_ops/repeat_points.h"

namespace hfta::ref {

// The specification: per model, per sample, per channel; the gradient sums the points in order
// in double.

void repeat_points_forward(const RepeatPointsParams& p, const RepeatPointsForwardArgs& a) {
  check_repeat_points(p, a);
  const int64_t L = p.L, C = p.C;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t s = 0; s < p.N; ++s) {
      const int64_t problem = b * p.N + s;
      for (int64_t l = 0; l < L; ++l)
        for (int64_t c = 0; c < C; ++c)
          a.y.data[(problem * L + l) * C + c] = a.x.data[problem * C + c];
    }
}

void repeat_points_backward(const RepeatPointsParams& p, const RepeatPointsBackwardArgs& a) {
  check_repeat_points_backward(p, a);
  const int64_t L = p.L, C = p.C;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t s = 0; s < p.N; ++s) {
      const int64_t problem = b * p.N + s;
      for (int64_t c = 0; c < C; ++c) {
        double sum = 0.0;
        for (int64_t l = 0; l < L; ++l) sum += a.dy.data[(problem * L + l) * C + c];
        float& dx = a.dx.data[problem * C + c];
        dx = a.accumulate_dx ? dx + static_cast<float>(sum) : static_cast<float>(sum);
      }
    }
}

}  // namespace hfta::ref
