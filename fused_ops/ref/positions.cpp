#include "fused_ops/positions.h"

namespace hfta {
namespace ref {

// The specification: B independent single-model additions, in double.
void positions_forward(const PositionsParams& p, const PositionsForwardArgs& a) {
  check_positions(p, a);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t s = 0; s < p.n; ++s)
      for (int64_t t = 0; t < p.T; ++t) {
        const int64_t row = (b * p.n + s) * p.T + t;
        // Model b's table row t (the sinusoidal table is the same for every model).
        const int64_t model = p.kind == PositionKind::kLearned ? b : 0;
        const float* pe = a.table.data + (model * p.table_rows() + t) * p.D;
        for (int64_t d = 0; d < p.D; ++d)
          a.y.data[row * p.D + d] =
              static_cast<float>(double(p.x_scale) * a.x.data[row * p.D + d] + pe[d]);
      }
}

// dtable row t gets the sum over the n sequences of dy at position t (in double, rounded once).
void positions_backward(const PositionsParams& p, const PositionsBackwardArgs& a) {
  check_positions_backward(p, a);
  const int64_t D = p.D;
  for (int64_t b = 0; b < p.B; ++b) {
    if (!a.dtable.empty())
      for (int64_t t = 0; t < p.T; ++t)
        for (int64_t d = 0; d < D; ++d) {
          double sum = 0.0;
          for (int64_t s = 0; s < p.n; ++s) sum += a.dy.data[((b * p.n + s) * p.T + t) * D + d];
          a.dtable.data[(b * p.table_rows() + t) * D + d] += static_cast<float>(sum);
        }
    if (a.dx.empty()) continue;
    for (int64_t i = b * p.n * p.T * D; i < (b + 1) * p.n * p.T * D; ++i) {
      const double grad = double(p.x_scale) * a.dy.data[i];
      a.dx.data[i] = static_cast<float>(a.accumulate_dx ? a.dx.data[i] + grad : grad);
    }
  }
}

}  // namespace ref
}  // namespace hfta
