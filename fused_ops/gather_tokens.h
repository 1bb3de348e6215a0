// Fused token gather: a masked language model predicts a few positions of each sequence, so its
// output layer and cross-entropy run on those rows only (models/masked_lm.h). For B models in one
// call, over one shared list of row indices.
//
//   x     [B, R, D]   model b's R token rows (a window's sequences, one after another)
//   rows  [K]         shared: the row of x that output row r copies; a negative row: a zero row
//   y     [B, K, D]   y[b, r] = x[b, rows[r]], or 0 where rows[r] < 0
// Backward: dx[b, i] = the dy[b, r] of every r with rows[r] = i, added in order of r in float,
// onto 0 (dx written, =) or onto dx (accumulate_dx, +=); a row no r names gets 0 (or keeps dx).
// A row index >= R raises hfta::Error on every device (the CUDA op copies the K indices back to
// check them).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace hfta {

struct GatherTokensParams {
  int64_t B = 1;
  int64_t R = 1;  // input rows per model
  int64_t K = 1;  // gathered rows per model
  int64_t D = 1;  // features per row

  Shape x_shape() const { return {B, R, D}; }
  Shape rows_shape() const { return {K}; }
  Shape y_shape() const { return {B, K, D}; }
  // A copy: no arithmetic forward.
  double forward_flops() const { return 0.0; }
};

// The tensors of one call, by name (call with designated initializers:
// gather_tokens_forward(p, {.x = x, .rows = rows, .y = y})).
struct GatherTokensForwardArgs {
  TensorView x{};
  IndexView rows{};
  TensorView y{};
};
struct GatherTokensBackwardArgs {
  IndexView rows{};
  TensorView dy{};
  TensorView dx{};             // output; an empty view = not wanted
  bool accumulate_dx = false;  // dx += gradient instead of dx = gradient
};

// Throws hfta::Error when a size is not positive (or R beyond int32), a tensor does not match
// its shape above, or the tensors of one call are on different devices.
void check_gather_tokens(const GatherTokensParams& p, const GatherTokensForwardArgs& a);
void check_gather_tokens_backward(const GatherTokensParams& p, const GatherTokensBackwardArgs& a);
// Throws hfta::Error naming the first row index >= R; `rows` must be in host memory.
void check_gather_tokens_rows(const GatherTokensParams& p, const IndexView& rows);

void gather_tokens_forward(const GatherTokensParams& p, const GatherTokensForwardArgs& a);
void gather_tokens_backward(const GatherTokensParams& p, const GatherTokensBackwardArgs& a);

namespace ref {
void gather_tokens_forward(const GatherTokensParams& p, const GatherTokensForwardArgs& a);
void gather_tokens_backward(const GatherTokensParams& p, const GatherTokensBackwardArgs& a);
}  // namespace ref

namespace cpu {
void gather_tokens_forward(const GatherTokensParams& p, const GatherTokensForwardArgs& a);
void gather_tokens_backward(const GatherTokensParams& p, const GatherTokensBackwardArgs& a);
}  // namespace cpu

// Every tensor in device memory (fused_ops/cuda/gather_tokens.cpp; defined only in a build with
// -DHFTA_CUDA=ON): the CPU op's bits. Each call copies the K row indices to the host and waits,
// to check them; the kernels then run on the calling thread's stream.
namespace cuda {
void gather_tokens_forward(const GatherTokensParams& p, const GatherTokensForwardArgs& a);
void gather_tokens_backward(const GatherTokensParams& p, const GatherTokensBackwardArgs& a);
}  // namespace cuda

}  // namespace hfta
