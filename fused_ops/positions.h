// Fused position encodings, added to token activations of B models.
//
//   x, y, dy, dx   [B, n, T, D]   n sequences of T tokens, D features (the rows layout [B, n*T, D])
//   table          learned:    [B, P, D]  per-model parameters, P >= T positions (the first T used)
//                  sinusoidal: [P, D]     one fixed table shared by all models (sinusoidal_table)
//   dtable         learned only: [B, P, D], accumulates (+=) sum over s of dy[b, s, t, :] into
//                  row t (rows t >= T untouched); the sinusoidal table has no gradient
// y[b, s, t, :] = x_scale * x[b, s, t, :] + table[(b,) t, :]. x_scale serves PyTorch's
// word_language_model, which multiplies the embeddings by sqrt(D) before its PositionalEncoding;
// it is 1 by default. Backward: dx = x_scale * dy, written (=), or added (+=) with accumulate_dx.
// y may be x's buffer (in place) and dx may be dy's, unless accumulating; dx may be an empty view
// (not wanted), and so may dtable.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace hfta {

enum class PositionKind { kLearned, kSinusoidal };

struct PositionsParams {
  int64_t B = 1;
  int64_t n = 1;  // sequences per model
  int64_t T = 1;  // tokens per sequence
  int64_t D = 1;  // features
  PositionKind kind = PositionKind::kLearned;
  int64_t P = 0;  // positions in the table, >= T; 0 = T
  float x_scale = 1.0f;

  int64_t table_rows() const { return P > 0 ? P : T; }
  Shape x_shape() const { return {B, n, T, D}; }
  Shape table_shape() const {
    return kind == PositionKind::kLearned ? Shape{B, table_rows(), D} : Shape{table_rows(), D};
  }
};

// PyTorch's word_language_model PositionalEncoding, [P, D] row-major: for column pairs (2i, 2i+1)
// pe[t, 2i] = sin(t * w_i), pe[t, 2i + 1] = cos(t * w_i) with w_i = exp(-2i ln(10000) / D),
// computed in double and rounded to float (odd D: the last column is a sine).
std::vector<float> sinusoidal_table(int64_t P, int64_t D);

// The tensors of one call, by name (call with designated initializers:
// positions_forward(p, {.x = x, .table = table, .y = y})).
struct PositionsForwardArgs {
  TensorView x{}, table{};
  TensorView y{};  // output
};
struct PositionsBackwardArgs {
  TensorView dy{};
  TensorView dx{};             // output; an empty view = not wanted
  TensorView dtable{};         // learned only: accumulates (+=); an empty view = not wanted
  bool accumulate_dx = false;  // dx += gradient instead of dx = gradient
};

// Throws hfta::Error when a size is not positive, P < T, x_scale is not finite, a tensor does not
// match its shape above, a sinusoidal table gets a gradient, or accumulating dx shares dy's buffer.
void check_positions(const PositionsParams& p, const PositionsForwardArgs& a);
void check_positions_backward(const PositionsParams& p, const PositionsBackwardArgs& a);

void positions_forward(const PositionsParams& p, const PositionsForwardArgs& a);
void positions_backward(const PositionsParams& p, const PositionsBackwardArgs& a);

namespace ref {
void positions_forward(const PositionsParams& p, const PositionsForwardArgs& a);
void positions_backward(const PositionsParams& p, const PositionsBackwardArgs& a);
}  // namespace ref

namespace cpu {
void positions_forward(const PositionsParams& p, const PositionsForwardArgs& a);
void positions_backward(const PositionsParams& p, const PositionsBackwardArgs& a);
}  // namespace cpu

}  // namespace hfta
