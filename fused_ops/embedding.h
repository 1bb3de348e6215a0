// Fused embedding lookup: B per-model tables read with one shared sequence of token ids.
//
//   weight   [B, V, D]   model b's table (V tokens, D features), replica-major
//   ids      [R]         int32 token ids in [0, V), shared by all B models (R = n*T token rows of
//                        the rows layout); never copied per model
//   y        [B, R, D]   y[b, r, :] = weight[b, ids[r], :]
//   dy       [B, R, D]
//   dweight  [B, V, D]   accumulates (+=) the scatter-add of dy: dweight[b, v, :] += sum of
//                        dy[b, r, :] over the rows r with ids[r] == v
// padding_idx (as torch.nn.Embedding(padding_idx=...)): that row is looked up as usual but never
// receives gradient. Ids outside [0, V) raise hfta::Error naming the row and the id. There is no
// input gradient: ids are integers.
#pragma once

#include <cstdint>
#include <optional>

#include "core/tensor.h"

namespace hfta {

struct EmbeddingParams {
  int64_t B = 1;
  int64_t R = 1;                         // token rows (n sequences * T tokens)
  int64_t V = 1;                         // vocabulary
  int64_t D = 1;                         // features
  std::optional<int64_t> padding_idx{};  // a row in [0, V) that gets no gradient; none by default

  Shape weight_shape() const { return {B, V, D}; }
  Shape ids_shape() const { return {R}; }
  Shape y_shape() const { return {B, R, D}; }
};

// The tensors of one call, by name (call with designated initializers:
// embedding_forward(p, {.weight = w, .ids = ids, .y = y})).
struct EmbeddingForwardArgs {
  TensorView weight{};
  IndexView ids{};
  TensorView y{};  // output
};
struct EmbeddingBackwardArgs {
  IndexView ids{};
  TensorView dy{};
  TensorView dweight{};  // output, accumulates (+=)
};

// Throws hfta::Error when a size is not positive, padding_idx is outside [0, V), a tensor does
// not match its shape above, or an id is outside [0, V).
void check_embedding(const EmbeddingParams& p, const EmbeddingForwardArgs& a);
// Every id in [0, V). Ids in device memory pass here unread: the CUDA op checks them on a host
// copy (fused_ops/cuda/embedding.cpp).
void check_embedding_ids(const EmbeddingParams& p, const IndexView& ids);
void check_embedding_backward(const EmbeddingParams& p, const EmbeddingBackwardArgs& a);

void embedding_forward(const EmbeddingParams& p, const EmbeddingForwardArgs& a);
void embedding_backward(const EmbeddingParams& p, const EmbeddingBackwardArgs& a);

namespace ref {
void embedding_forward(const EmbeddingParams& p, const EmbeddingForwardArgs& a);
void embedding_backward(const EmbeddingParams& p, const EmbeddingBackwardArgs& a);
}  // namespace ref

namespace cpu {
void embedding_forward(const EmbeddingParams& p, const EmbeddingForwardArgs& a);
void embedding_backward(const EmbeddingParams& p, const EmbeddingBackwardArgs& a);
}  // namespace cpu

}  // namespace hfta
