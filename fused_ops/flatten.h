// Flatten: the layout change between the conv family and the linear family.
//
//   x   [N, B*C, H, W]   (conv layout: model b's channels at [b*C, (b+1)*C))
//   y   [B, N, C*H*W]    (linear layout: model b's rows contiguous, features in C, H, W order)
// y[b, n, (c*H + h)*W + w] = x[n, b*C + c, h, w]: each model's sample is flattened exactly as
// PyTorch's x.flatten(1) would flatten it alone. Backward is the inverse permutation, dx written
// (=), or added to (+=) with accumulate_dx. For B = 1 both layouts hold the same bytes, and the op
// is a copy.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace hfta {

struct FlattenParams {
  int64_t B = 1;
  int64_t N = 1;
  int64_t C = 1;  // channels per model
  int64_t H = 1;
  int64_t W = 1;

  int64_t features() const { return C * H * W; }
  Shape x_shape() const { return {N, B * C, H, W}; }
  Shape y_shape() const { return {B, N, features()}; }
  // A permutation: no arithmetic (it moves B*N*C*H*W floats each way).
  double forward_flops() const { return 0.0; }
};

// The tensors of one call, by name (call with designated initializers:
// flatten_backward(p, {.dy = dy, .dx = dx})).
struct FlattenForwardArgs {
  TensorView x{}, y{};
};
struct FlattenBackwardArgs {
  TensorView dy{};
  TensorView dx{};             // output
  bool accumulate_dx = false;  // dx += gradient instead of dx = gradient
};

// Throws hfta::Error when a size is not positive or a tensor does not match its shape above.
void check_flatten(const FlattenParams& p, const FlattenForwardArgs& a);
void check_flatten_backward(const FlattenParams& p, const FlattenBackwardArgs& a);

void flatten_forward(const FlattenParams& p, const FlattenForwardArgs& a);
void flatten_backward(const FlattenParams& p, const FlattenBackwardArgs& a);

namespace ref {
void flatten_forward(const FlattenParams& p, const FlattenForwardArgs& a);
void flatten_backward(const FlattenParams& p, const FlattenBackwardArgs& a);
}  // namespace ref

namespace cpu {
void flatten_forward(const FlattenParams& p, const FlattenForwardArgs& a);
void flatten_backward(const FlattenParams& p, const FlattenBackwardArgs& a);
}  // namespace cpu

// Every tensor in device memory (fused_ops/cuda/flatten.cpp; defined only in a build with
// -DHFTA_CUDA=ON). Runs on the calling thread's stream (backend/cuda/runtime.h) and returns
// without waiting for it.
namespace cuda {
void flatten_forward(const FlattenParams& p, const FlattenForwardArgs& a);
void flatten_backward(const FlattenParams& p, const FlattenBackwardArgs& a);
}  // namespace cuda

}  // namespace hfta
