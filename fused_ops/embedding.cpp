#include "fused_ops/embedding.h"

#include "fused_ops/cuda/embedding.h"
#include "fused_ops/dispatch.h"

namespace hfta {

static void check_embedding_params(const EmbeddingParams& p) {
  HFTA_CHECK(p.B > 0 && p.R > 0 && p.V > 0 && p.D > 0,
             "embedding sizes must be positive, got B={} R={} V={} D={}", p.B, p.R, p.V, p.D);
  HFTA_CHECK(!p.padding_idx || (*p.padding_idx >= 0 && *p.padding_idx < p.V),
             "embedding padding_idx is {}, expected a token id in [0, V={}) (or none)",
             p.padding_idx.value_or(0), p.V);
}

void check_embedding_ids(const EmbeddingParams& p, const IndexView& ids) {
  check_shape(ids, p.ids_shape(), "embedding ids");
  if (ids.device != Device::kCpu) return;
  for (int64_t r = 0; r < p.R; ++r)
    HFTA_CHECK(ids.data[r] >= 0 && ids.data[r] < p.V,
               "embedding id {} at row {} is outside [0, V={}): token ids must be below the "
               "vocabulary size the table was built with",
               ids.data[r], r, p.V);
}

void check_embedding(const EmbeddingParams& p, const EmbeddingForwardArgs& a) {
  check_embedding_params(p);
  check_shape(a.weight, p.weight_shape(), "embedding weight");
  check_shape(a.y, p.y_shape(), "embedding output");
  check_device(a.ids, a.weight.device, "embedding ids");
  check_device(a.y, a.weight.device, "embedding output");
  check_embedding_ids(p, a.ids);
}

void check_embedding_backward(const EmbeddingParams& p, const EmbeddingBackwardArgs& a) {
  check_embedding_params(p);
  check_shape(a.dy, p.y_shape(), "embedding output gradient");
  check_shape(a.dweight, p.weight_shape(), "embedding weight gradient");
  check_device(a.ids, a.dy.device, "embedding ids");
  check_device(a.dweight, a.dy.device, "embedding weight gradient");
  check_embedding_ids(p, a.ids);
}

void embedding_forward(const EmbeddingParams& p, const EmbeddingForwardArgs& a) {
  check_embedding(p, a);
  HFTA_DISPATCH_CUDA("embedding_forward", a.weight.device, cpu::embedding_forward(p, a),
                     cuda::embedding_forward(p, a));
}

void embedding_backward(const EmbeddingParams& p, const EmbeddingBackwardArgs& a) {
  check_embedding_backward(p, a);
  HFTA_DISPATCH_CUDA("embedding_backward", a.dy.device, cpu::embedding_backward(p, a),
                     cuda::embedding_backward(p, a));
}

}  // namespace hfta
