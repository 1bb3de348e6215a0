// Convolutions with small output planes as GEMMs on the plain buffers (im2col): ResNet-18's last
// stages on 32x32 images (2x2 and 1x1 outputs, 256 and 512 channels), where a model's weights
// are several times its activations. oneDNN's blocked kernels spend most of such a layer's time
// converting the weights between our plain OIHW and their blocked layouts (three passes over the
// weights per step: forward, backward-data, and the gradient added back), and its
// backward-weights cuts the minibatch of a 1x1 plane over the threads. Here the plain weight
// [C_out, C_in*kH*kW] is the GEMM operand as it is, and the weight gradient accumulates straight
// into the caller's buffer (beta = 1): no weight is copied at all. MobileNetV2's 1x1 kernels on
// its 2x2 and 1x1 planes run here too (their im2col a copy of the input, without zeros).
//
// Per model, with cols [N*P, C_in*kH*kW] the input's im2col (P = OH*OW output positions; taps
// that fall into the padding are zeros; built once per call for a shared input):
//   forward          ycols[N*P, C_out] = cols x W^T, scattered to y's [N, C_out, P] (+ bias)
//   backward-data    dxcols = dycols x W, summed back over taps and positions into dx (col2im)
//   backward-weights dW += dycols^T x cols;  dbias += column sums of dycols
// The GEMMs run on backend/cpu/runtime.h's sgemm. They have a few dozen to a few hundred rows,
// where single-threaded GEMMs side by side beat one GEMM threaded inside: with at least as many
// models as threads each thread takes whole models; with fewer, forward's GEMM runs as two
// column blocks side by side and, on two threads, backward's weight-gradient and input-gradient
// GEMMs side by side. Each model's GEMMs are the same calls whatever B, the thread count or the
// plan (the two blocks are cut one way always; oneDNN's sgemm threaded inside is used only for
// a GEMM left whole on more than two threads, and runs on one thread in deterministic mode), so
// a model's bits depend on neither B nor the thread count, and fused equals serial bit for bit.
// cpu/conv2d.cpp picks this path (Conv2dStrategy::kIm2col) when conv2d_im2col_applies.
#pragma once

#include "core/tensor.h"
#include "fused_ops/conv2d.h"

namespace hfta::cpu {

// Whether p is a problem this path takes: groups 1, at most 4 output positions per image, and
// either the weight larger than the input's im2col (C_out > N*OH*OW), so that saving the weight's
// conversions outweighs the zeros the GEMM multiplies, or a 1x1 kernel, whose im2col holds no
// zeros (MobileNetV2's projections on 2x2 planes, where oneDNN took 1.2-1.7x as long at B = 1:
// docs/benchmarks.md). Where oneDNN has only its AVX2 kernels, every small plane: those were
// slower than the GEMMs on such planes at every channel count and minibatch measured, zeros
// included (docs/benchmarks.md, 'Small planes as GEMMs on AVX2'). Independent of B, so a model
// runs the same code alone and in an array.
bool conv2d_im2col_applies(const Conv2dParams& p);

// The floats of the live taps' weights forward saves for backward (Conv2dForwardArgs::saved),
// B x C_out x C_in x live taps where the GEMMs take only the live taps (at most a third of them),
// else 0. Independent of N: a net sizes the buffer once for every batch size.
int64_t conv2d_im2col_saved_floats(const Conv2dParams& p);

// With a.saved (conv2d_im2col_saved_floats floats) forward gathers the live taps' weights there
// rather than in scratch, and backward reads them from there rather than gathering them again.
void conv2d_im2col_forward(const Conv2dParams& p, const Conv2dForwardArgs& a);
// dx is written (=) or added to (+=, accumulate_dx); dweight and dbias accumulate (+=).
void conv2d_im2col_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a);

}  // namespace hfta::cpu
