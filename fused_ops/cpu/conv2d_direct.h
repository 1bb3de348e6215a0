// A direct AVX-512 / AVX2 convolution for a network's first layer: a shared input with few channels
// (LeNet's 1->32 5x5 on 28x28 images), which oneDNN's blocked kernels handle poorly (they block
// input channels by 8 or 16 and use one), and which fusion makes wider: all B models read the
// same input, so it is padded once per call and each loaded input row feeds several models'
// output channels at once. cpu/conv2d.cpp picks it (Conv2dStrategy::kDirect) when it applies.
//
// Forward: every (image, block of output channels over all B models, output row) keeps its
// block's rows of y in registers and walks the kernel taps: one input row load per tap feeds
// the whole block (with AVX-512, 8 channels when the row is 17..32 pixels wide).
// Backward weights: a GEMM per image, dW[B*C_out, taps] += dy_n[B*C_out, OH*OW] x
// cols_n[taps, OH*OW]^T, where cols_n (the image's im2col, built once for all B models) has an
// extra row of ones that yields the bias gradient; each thread takes a block of images and
// keeps lane-wise partial sums, added up at the end.
// Backward data (a shared input's gradient, which no training step asks for) is left to oneDNN.
// On LeNet's conv1 its forward pass takes about half oneDNN's time and its weight gradients about
// the same (docs/benchmarks.md, 'LeNet on the Xeon').
#pragma once

#include "core/tensor.h"
#include "fused_ops/conv2d.h"

namespace hfta::cpu {

// Whether p is a problem the direct kernel handles: a shared input with at most 4 channels,
// groups 1, stride 1, no dilation, output rows of at most 4 vectors (64 pixels with AVX-512, 32
// with AVX2), and an AVX-512 or AVX2-with-FMA build.
bool conv2d_direct_applies(const Conv2dParams& p);

void conv2d_direct_forward(const Conv2dParams& p, const TensorView& x, const TensorView& weight,
                           const TensorView& bias, const TensorView& y);
// dweight and dbias accumulate (+=); either may be empty to skip it.
void conv2d_direct_backward_weights(const Conv2dParams& p, const TensorView& x,
                                    const TensorView& dy, const TensorView& dweight,
                                    const TensorView& dbias);

}  // namespace hfta::cpu
