// Convolutions with small output planes as GEMMs on the plain buffers (im2col): ResNet-18's last
// stages on 32x32 images (2x2 and 1x1 outputs, 256 and 512 channels), where a model's weights
// are several times its activations. oneDNN's blocked kernels spend most of such a layer's time
// converting the weights between our plain OIHW and their blocked layouts (three passes over the
// weights per step: forward, backward-data, and the gradient added back), and its
// backward-weights cuts the minibatch of a 1x1 plane over the threads. Here the plain weight
// [C_out, C_in*kH*kW] is the GEMM operand as it is, and the weight gradient accumulates straight
// into the caller's buffer (beta = 1): no weight is copied at all.
//
// Per model, with cols [N*P, C_in*kH*kW] the input's im2col (P = OH*OW output positions; taps
// that fall into the padding are zeros; built once per call for a shared input):
//   forward          ycols[N*P, C_out] = cols x W^T, scattered to y's [N, C_out, P] (+ bias)
//   backward-data    dxcols = dycols x W, summed back over taps and positions into dx (col2im)
//   backward-weights dW += dycols^T x cols;  dbias += column sums of dycols
// The GEMMs run on backend/cpu/runtime.h's sgemm. They have a few dozen to a few hundred rows,
// where single-threaded GEMMs side by side beat one GEMM threaded inside (linear.cpp's split):
// forward cuts the output columns into one block per thread where each gets at least 64, and on
// two threads backward runs the weight-gradient and input-gradient GEMMs side by side; otherwise
// sgemm is threaded inside (one thread in deterministic mode, so a model's bits depend neither on
// B nor on the thread count). Every model's calls are those of the model alone, so fused equals
// serial bit for bit here too. cpu/conv2d.cpp picks it (Conv2dStrategy::kIm2col) when
// conv2d_im2col_applies.
#pragma once

#include "core/tensor.h"
#include "fused_ops/conv2d.h"

namespace hfta::cpu {

// Whether p is a problem this path takes: groups 1, at most 4 output positions per image, and
// the weight larger than the input's im2col (C_out > N*OH*OW), so that saving the weight's
// conversions outweighs the zeros the GEMM multiplies. Independent of B, so a model runs the same
// code alone and in an array.
bool conv2d_im2col_applies(const Conv2dParams& p);

void conv2d_im2col_forward(const Conv2dParams& p, const Conv2dForwardArgs& a);
// dx is written (=) or added to (+=, accumulate_dx); dweight and dbias accumulate (+=).
void conv2d_im2col_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a);

}  // namespace hfta::cpu
