#include "fused_ops/embedding.h"

#include <vector>

namespace hfta {
namespace ref {

// The specification: B independent single-model lookups.
void embedding_forward(const EmbeddingParams& p, const EmbeddingForwardArgs& a) {
  check_embedding(p, a);
  const int64_t D = p.D;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t r = 0; r < p.R; ++r)
      for (int64_t d = 0; d < D; ++d)
        a.y.data[(b * p.R + r) * D + d] = a.weight.data[(b * p.V + a.ids.data[r]) * D + d];
}

// Per model, each table row's gradient summed over its rows in double, then added once.
void embedding_backward(const EmbeddingParams& p, const EmbeddingBackwardArgs& a) {
  check_embedding_backward(p, a);
  const int64_t D = p.D;
  for (int64_t b = 0; b < p.B; ++b) {
    std::vector<double> sum(static_cast<size_t>(p.V * D), 0.0);
    std::vector<bool> used(static_cast<size_t>(p.V), false);
    for (int64_t r = 0; r < p.R; ++r) {
      const int64_t v = a.ids.data[r];
      if (p.padding_idx && v == *p.padding_idx) continue;
      used[v] = true;
      for (int64_t d = 0; d < D; ++d) sum[v * D + d] += a.dy.data[(b * p.R + r) * D + d];
    }
    for (int64_t v = 0; v < p.V; ++v)
      if (used[v])
        for (int64_t d = 0; d < D; ++d)
          a.dweight.data[(b * p.V + v) * D + d] += static_cast<float>(sum[v * D + d]);
  }
}

}  // namespace ref
}  // namespace hfta
