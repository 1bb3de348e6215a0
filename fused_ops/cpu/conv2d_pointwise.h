// Pointwise convolutions (1x1 kernel, stride 1, no padding, one group) as GEMMs straight on the
// plain NCHW buffers: MobileNetV2's expansions and projections. In NCHW one image of model b is
// already the GEMM operand [C_in, H*W], so no im2col and no layout conversion is needed, where
// oneDNN's blocked kernels convert the activations (and the weight) to and from their layouts on
// every call, which on these layers costs as much as the arithmetic (docs/benchmarks.md,
// 'Pointwise convolutions as GEMMs').
//
// Per model, with X_n = x's image n [C_in, P] and Y_n = y's [C_out, P] (P = H*W positions):
//   forward          Y_n = W X_n (+ bias), one GEMM per image
//   backward-data    dX_n = W^T dY_n (+= for accumulate_dx, and for the models after the first
//                    of a shared input, whose gradient sums them), one GEMM per image
//   backward-weights dW += dY_n X_n^T for n = 0, 1, ..., N-1 in order; dbias += row sums of dY_n
// The images are spread over the threads: in the forward and backward-data one GEMM per image,
// in the weight gradient a fixed number of chunks of images, summed in order. Each element of
// every result is then computed by the same calls whatever the thread count and B, so a model's
// bits do not depend on them (the GEMMs run on one thread inside the loops, and on one in
// deterministic mode: backend/cpu/runtime.h). cpu/conv2d.cpp picks it (Conv2dStrategy::kPointwise)
// when conv2d_pointwise_applies.
#pragma once

#include "core/tensor.h"
#include "fused_ops/conv2d.h"

namespace hfta::cpu {

// Whether p is a problem this path takes: a 1x1 kernel at stride 1 without padding, one group,
// and at least kMinPointwisePositions positions per image (on smaller planes a GEMM per image is
// too narrow; cpu/conv2d_im2col.h or oneDNN takes those). Independent of B, so a model runs the
// same code alone and in an array.
bool conv2d_pointwise_applies(const Conv2dParams& p);
inline constexpr int64_t kMinPointwisePositions = 16;

void conv2d_pointwise_forward(const Conv2dParams& p, const Conv2dForwardArgs& a);
// dx is written (=) or added to (+=, accumulate_dx); dweight and dbias accumulate (+=).
void conv2d_pointwise_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a);

}  // namespace hfta::cpu
