#include "fused_ops/gather_tokens.h"

namespace hfta::ref {

// The specification, model by model and element by element: y[b, r, d] = x[b, rows[r], d] (0 for
// a negative row); dx[b, i, d] = the sum over r with rows[r] = i of dy[b, r, d], in double,
// rounded once, then written or added.

void gather_tokens_forward(const GatherTokensParams& p, const GatherTokensForwardArgs& a) {
  check_gather_tokens(p, a);
  check_gather_tokens_rows(p, a.rows);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t r = 0; r < p.K; ++r)
      for (int64_t d = 0; d < p.D; ++d) {
        const int32_t i = a.rows.data[r];
        a.y.data[(b * p.K + r) * p.D + d] = i < 0 ? 0.0f : a.x.data[(b * p.R + i) * p.D + d];
      }
}

void gather_tokens_backward(const GatherTokensParams& p, const GatherTokensBackwardArgs& a) {
  check_gather_tokens_backward(p, a);
  check_gather_tokens_rows(p, a.rows);
  if (a.dx.empty()) return;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t i = 0; i < p.R; ++i)
      for (int64_t d = 0; d < p.D; ++d) {
        double sum = 0.0;
        for (int64_t r = 0; r < p.K; ++r)
          if (a.rows.data[r] == i) sum += a.dy.data[(b * p.K + r) * p.D + d];
        float& dx = a.dx.data[(b * p.R + i) * p.D + d];
        dx = a.accumulate_dx ? dx + static_cast<float>(sum) : static_cast<float>(sum);
      }
}

}  // namespace hfta::ref
