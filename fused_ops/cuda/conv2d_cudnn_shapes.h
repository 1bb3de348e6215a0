// How the fused conv2d maps onto cuDNN convolutions (fused_ops/cuda/conv2d_cudnn.cpp), as plain
// data, so a host test checks the mapping without a GPU or cuDNN. Two mappings:
//
// Grouped (HFTA's route, one call): per-model inputs x [N, B*C_in, H, W] and
// y [N, B*C_out, OH, OW] in NCHW with model b's channels at [b*C, (b+1)*C) are exactly a grouped
// convolution's tensors with B*groups groups (group b*groups + g reads channels
// [(b*groups + g)*C_in/groups, ...) and writes the same slice of the output), and the
// replica-major weight [B, C_out, C_in/groups, kH, kW] is its filter
// [B*C_out, C_in/groups, kH, kW]. A shared input x [N, C_in, H, W] with groups = 1 is one
// convolution with B*C_out output channels. A shared input with groups > 1 is not expressible:
// cuDNN's groups would order the output channels group-major across the models
// ([groups][B][C_out/groups] where the fused layout is [B][groups][C_out/groups]).
//
// Per model (B calls, to measure the grouped call against): call b is model b's own single-model
// convolution (groups = the layer's groups) on strided views into the fused tensors. Its x and y
// are [N, C, H, W] whose image stride is the fused image's (B*C*H*W; a shared input's C_in*H*W),
// starting b*C*H*W floats into the fused tensor (a shared input: every call reads the same x);
// its filter and bias are model b's contiguous slices. Every problem, a shared input with
// groups > 1 included, is expressible this way.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <optional>

#include "fused_ops/conv2d.h"

namespace hfta::cuda {

// An NCHW tensor descriptor: sizes and strides in elements (cudnnSetTensor4dDescriptorEx).
struct CudnnTensorShape {
  std::array<int, 4> dims{}, strides{};
  auto operator<=>(const CudnnTensorShape&) const = default;
};

enum class CudnnConvMapping { kGrouped, kPerModel };

struct CudnnConvShapes {
  CudnnTensorShape x, y;
  std::array<int, 4> w{};  // the filter as KCRS, packed
  int groups = 1;
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  CudnnTensorShape bias;  // [1, C_out of one call, 1, 1], for cudnnAddTensor and the bias gradient
  // The fused op is `calls` convolutions of these shapes, in order: call b's x, y, weight and bias
  // (and their gradients) start b times these many floats past the fused tensors' starts. An x
  // step of 0 with several calls is a shared input: its gradient is the sum over the calls.
  int64_t calls = 1;
  int64_t x_step = 0, y_step = 0, w_step = 0, bias_step = 0;
  // Ordered, so the algorithms cuDNN picks can be cached by the whole description.
  auto operator<=>(const CudnnConvShapes&) const = default;
};

namespace cudnn_shapes_detail {
inline bool fits_int(int64_t v) { return v >= 1 && v <= std::numeric_limits<int>::max(); }
// A tensor of `dims` whose images lie `image_stride` floats apart, its C, H and W packed; nullopt
// when a size, a stride or the span the descriptor covers exceeds cuDNN's 32-bit ints (cuDNN
// limits a tensor, gaps between its images included, to 2^31 - 1 elements).
inline std::optional<CudnnTensorShape> tensor(const std::array<int64_t, 4>& dims,
                                              int64_t image_stride) {
  const int64_t chw = dims[1] * dims[2] * dims[3];
  const int64_t span = (dims[0] - 1) * image_stride + chw;
  for (int64_t v : {dims[0], dims[1], dims[2], dims[3], image_stride, chw, span})
    if (!fits_int(v)) return std::nullopt;
  auto i = [](int64_t v) { return static_cast<int>(v); };
  return CudnnTensorShape{{i(dims[0]), i(dims[1]), i(dims[2]), i(dims[3])},
                          {i(image_stride), i(dims[2] * dims[3]), i(dims[3]), 1}};
}
}  // namespace cudnn_shapes_detail

// The shapes of `p` as cuDNN convolutions under `mapping`, or nullopt when cuDNN cannot express
// it (grouped: a shared input with groups > 1) or a size, stride or tensor span exceeds cuDNN's
// 32-bit ints.
inline std::optional<CudnnConvShapes> cudnn_conv_shapes(
    const Conv2dParams& p, CudnnConvMapping mapping = CudnnConvMapping::kGrouped) {
  using cudnn_shapes_detail::fits_int;
  using cudnn_shapes_detail::tensor;
  const bool per_model = mapping == CudnnConvMapping::kPerModel;
  if (!per_model && p.shared_input && p.groups > 1) return std::nullopt;
  // Channels of one call, and of the fused tensors it views.
  const int64_t x_channels = p.shared_input ? p.in_channels : p.B * p.in_channels;
  const int64_t call_x_channels = per_model ? p.in_channels : x_channels;
  const int64_t call_y_channels = per_model ? p.out_channels : p.B * p.out_channels;
  const int64_t x_plane = p.H * p.W, y_plane = p.out_h() * p.out_w();
  const auto x = tensor({p.N, call_x_channels, p.H, p.W}, x_channels * x_plane);
  const auto y =
      tensor({p.N, call_y_channels, p.out_h(), p.out_w()}, p.B * p.out_channels * y_plane);
  const auto bias = tensor({1, call_y_channels, 1, 1}, call_y_channels);
  const int64_t groups = per_model ? p.groups : p.shared_input ? 1 : p.B * p.groups;
  const int64_t filter[] = {call_y_channels, p.in_channels / p.groups, p.kernel_h, p.kernel_w};
  const int64_t filter_size = filter[0] * filter[1] * filter[2] * filter[3];
  if (!x || !y || !bias || !fits_int(groups) || !fits_int(filter_size)) return std::nullopt;
  for (int64_t v : {p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w})
    if (v > std::numeric_limits<int>::max()) return std::nullopt;
  auto i = [](int64_t v) { return static_cast<int>(v); };
  CudnnConvShapes s;
  s.x = *x;
  s.y = *y;
  s.bias = *bias;
  s.w = {i(filter[0]), i(filter[1]), i(filter[2]), i(filter[3])};
  s.groups = i(groups);
  s.pad_h = i(p.pad_h);
  s.pad_w = i(p.pad_w);
  s.stride_h = i(p.stride_h);
  s.stride_w = i(p.stride_w);
  s.dilation_h = i(p.dilation_h);
  s.dilation_w = i(p.dilation_w);
  if (per_model) {
    s.calls = p.B;
    s.x_step = p.shared_input ? 0 : p.in_channels * x_plane;
    s.y_step = p.out_channels * y_plane;
    s.w_step = filter_size;
    s.bias_step = p.out_channels;
  }
  return s;
}

// Which implementation the CUDA conv2d runs (HFTA_CUDA_CONV): cuDNN's grouped convolution where
// it is available and can express the problem (auto, the default), always that (cudnn: an error
// where it cannot), B per-model cuDNN convolutions (cudnn-per-model: the comparison the grouped
// call is measured against), hfta's im2col + cuBLAS GEMMs (gemm), or hfta's implicit-GEMM kernels
// (implicit, conv2d_implicit.h: opt-in until measured on a GPU).
enum class CudaConvBackend { kAuto, kGemm, kCudnn, kCudnnPerModel, kImplicit };

}  // namespace hfta::cuda
