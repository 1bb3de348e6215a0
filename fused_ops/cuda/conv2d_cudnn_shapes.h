// How the fused conv2d maps onto one cuDNN convolution (fused_ops/cuda/conv2d_cudnn.cpp), as plain
// data, so a host test checks the mapping without a GPU or cuDNN.
//
// Per-model inputs: x [N, B*C_in, H, W] and y [N, B*C_out, OH, OW] in NCHW with model b's channels
// at [b*C, (b+1)*C) are exactly a grouped convolution's tensors with B*groups groups (group
// b*groups + g reads channels [(b*groups + g)*C_in/groups, ...) and writes the same slice of the
// output), and the replica-major weight [B, C_out, C_in/groups, kH, kW] is its filter
// [B*C_out, C_in/groups, kH, kW]. A shared input x [N, C_in, H, W] with groups = 1 is one
// convolution with B*C_out output channels. A shared input with groups > 1 is not expressible:
// cuDNN's groups would order the output channels group-major across the models
// ([groups][B][C_out/groups] where the fused layout is [B][groups][C_out/groups]).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <optional>

#include "fused_ops/conv2d.h"

namespace hfta::cuda {

struct CudnnConvShapes {
  std::array<int, 4> x, w, y;  // NCHW; the filter as KCRS
  int groups = 1;
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  std::array<int, 4> bias;  // [1, B*C_out, 1, 1], for cudnnAddTensor and the bias gradient
};

// The shapes of `p` as one cuDNN convolution, or nullopt when cuDNN cannot express it (a shared
// input with groups > 1) or a size exceeds cuDNN's 32-bit ints.
inline std::optional<CudnnConvShapes> cudnn_conv_shapes(const Conv2dParams& p) {
  if (p.shared_input && p.groups > 1) return std::nullopt;
  const int64_t values[] = {
      p.N,       p.B * p.in_channels, p.B * p.out_channels, p.H,        p.W,
      p.out_h(), p.out_w(),           p.kernel_h,           p.kernel_w, p.B * p.groups};
  for (int64_t v : values)
    if (v < 1 || v > std::numeric_limits<int>::max()) return std::nullopt;
  auto i = [](int64_t v) { return static_cast<int>(v); };
  CudnnConvShapes s;
  const int64_t x_channels = p.shared_input ? p.in_channels : p.B * p.in_channels;
  s.x = {i(p.N), i(x_channels), i(p.H), i(p.W)};
  s.w = {i(p.B * p.out_channels), i(p.in_channels / p.groups), i(p.kernel_h), i(p.kernel_w)};
  s.y = {i(p.N), i(p.B * p.out_channels), i(p.out_h()), i(p.out_w())};
  s.groups = i(p.shared_input ? 1 : p.B * p.groups);
  s.pad_h = i(p.pad_h);
  s.pad_w = i(p.pad_w);
  s.stride_h = i(p.stride_h);
  s.stride_w = i(p.stride_w);
  s.dilation_h = i(p.dilation_h);
  s.dilation_w = i(p.dilation_w);
  s.bias = {1, i(p.B * p.out_channels), 1, 1};
  return s;
}

// Which implementation the CUDA conv2d runs (HFTA_CUDA_CONV): cuDNN where it is available and can
// express the problem (auto, the default), always cuDNN (cudnn: an error where it cannot),
// hfta's im2col + cuBLAS GEMMs (gemm), or hfta's implicit-GEMM kernels (implicit,
// conv2d_implicit.h: opt-in until measured on a GPU).
enum class CudaConvBackend { kAuto, kGemm, kCudnn, kImplicit };

}  // namespace hfta::cuda
