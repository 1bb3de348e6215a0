// Fused channel scaling: squeeze-and-excitation's `scale * input` (MobileNetV3), each channel of
// each sample multiplied by its own scale, for B models in one call.
//
//   x, y, dy, dx   [N, B*C, HW]   the conv layout (model b's channels at [b*C, (b+1)*C))
//   s, ds          [N, B*C]       one scale per sample and channel: the SE branch's [C, 1, 1]
//                                 output in the same layout
// Forward:  y[n, k, i] = x[n, k, i] * s[n, k]. y may be the same buffer as x.
// Backward: dx[n, k, i] = dy[n, k, i] * s[n, k] and ds[n, k] = sum_i dy[n, k, i] * x[n, k, i],
// each written (=) or added (+=) with accumulate_dx / accumulate_ds; either may be empty (not
// wanted). dx may be the same buffer as dy unless accumulating.
// Every (n, k) row is computed alone in the same order, so model b's values do not depend on B
// or on its place in the array.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace hfta {

struct ScaleChannelsParams {
  int64_t B = 1, N = 1, C = 1, HW = 1;
  Shape x_shape() const { return {N, B * C, HW}; }
  Shape s_shape() const { return {N, B * C}; }
};

struct ScaleChannelsForwardArgs {
  TensorView x{}, s{};  // inputs
  TensorView y{};       // output
};
struct ScaleChannelsBackwardArgs {
  TensorView x{}, s{};    // the forward's inputs
  TensorView dy{};        // input
  TensorView dx{}, ds{};  // outputs (either may be empty)
  bool accumulate_dx = false, accumulate_ds = false;
};

// Throws hfta::Error when a size is below 1 or a tensor is missing or has another shape.
void check_scale_channels(const ScaleChannelsParams& p, const ScaleChannelsForwardArgs& a);
void check_scale_channels_backward(const ScaleChannelsParams& p,
                                   const ScaleChannelsBackwardArgs& a);

void scale_channels_forward(const ScaleChannelsParams& p, const ScaleChannelsForwardArgs& a);
void scale_channels_backward(const ScaleChannelsParams& p, const ScaleChannelsBackwardArgs& a);

namespace ref {
void scale_channels_forward(const ScaleChannelsParams& p, const ScaleChannelsForwardArgs& a);
void scale_channels_backward(const ScaleChannelsParams& p, const ScaleChannelsBackwardArgs& a);
}  // namespace ref

namespace cpu {
void scale_channels_forward(const ScaleChannelsParams& p, const ScaleChannelsForwardArgs& a);
void scale_channels_backward(const ScaleChannelsParams& p, const ScaleChannelsBackwardArgs& a);
}  // namespace cpu

// Every tensor in device memory (fused_ops/cuda/scale_channels.cpp; defined only in a build with
// -DHFTA_CUDA=ON): the CPU op's bits. Runs on the calling thread's stream and returns at once.
namespace cuda {
void scale_channels_forward(const ScaleChannelsParams& p, const ScaleChannelsForwardArgs& a);
void scale_channels_backward(const ScaleChannelsParams& p, const ScaleChannelsBackwardArgs& a);
}  // namespace cuda

}  // namespace hfta
