// A direct depthwise convolution (groups == in_channels == out_channels, MobileNetV2's 3x3
// layers) on the fused layout's plain NCHW buffers, with no conversion of whole tensors:
//
//   x   [N, B*C, H, W]    model b's channels at [b*C, (b+1)*C)
//   w   [B, C, 1, K, K]   = [B*C, K*K]: channel c's taps at w + c*K*K
//   y   [N, B*C, OH, OW]
//
// Each (image, channel) plane is independent, so the B models are one depthwise convolution over
// B*C channels. The kernel vectorizes across 16 consecutive channels on AVX-512, 8 on AVX2 (a
// "tile": one image's planes of that many channels, which may span two models): the tile is
// transposed in cache into a per-thread buffer [rows][cols][lanes] with a zero border (the padding,
// zeroed once per call), so every tap is one full-width FMA with no masks or bounds tests, whatever
// the plane size (MobileNetV2 at 32x32 inputs has 16x16 down to 1x1 planes, where vectors along the
// rows would be mostly empty); results go back to NCHW through the same in-register transposes.
// oneDNN instead converts the whole activations to its blocked layout and back around each call
// (cpu/conv2d_onednn.cpp), which dominates this memory-bound op.
//
// Forward and the input gradient run over (image, channel block) tiles in parallel; the weight
// and bias gradients reduce over the images per channel block, each task owning its channel
// block's sums (for few channel blocks, tasks own a block and a range of images, and a second
// parallel pass adds the per-range sums in a fixed order: no atomics, deterministic).
// Needs an AVX-512 build, or AVX2 with FMA; `detail::` holds the portable scalar loops (any
// build, for tests and older machines), which the functions below fall back to.
#pragma once

#include "fused_ops/conv2d.h"

namespace hfta::cpu {

// Whether p is a problem the kernel handles: depthwise (groups == in_channels == out_channels),
// not a shared input, a square 3x3 or 5x5 kernel, stride 1 or 2 (both axes alike), no dilation,
// any padding; and an AVX-512 or AVX2 + FMA build.
bool depthwise_applies(const Conv2dParams& p);

// y = conv(x, w) (+ bias when bias is not null). y is written (=).
void depthwise_conv2d_forward(const Conv2dParams& p, const float* x, const float* w,
                              const float* bias, float* y);

// Any of dx, dw, db may be null to skip it. dx is written (=), or added to (+=) when
// accumulate_dx; dw and db always accumulate (+=), as the op's contract says.
void depthwise_conv2d_backward(const Conv2dParams& p, const float* x, const float* w,
                               const float* dy, float* dx, float* dw, float* db,
                               bool accumulate_dx);

namespace detail {
// The portable scalar loops behind the functions above when the build has neither AVX-512 nor
// AVX2 with FMA; same contract, for any p that depthwise_applies would accept on such a build.
void depthwise_conv2d_forward_portable(const Conv2dParams& p, const float* x, const float* w,
                                       const float* bias, float* y);
void depthwise_conv2d_backward_portable(const Conv2dParams& p, const float* x, const float* w,
                                        const float* dy, float* dx, float* dw, float* db,
                                        bool accumulate_dx);
// The shape conditions of depthwise_applies, without the instruction set's.
bool depthwise_shape_applies(const Conv2dParams& p);
}  // namespace detail

}  // namespace hfta::cpu
