// Fused 2-D transposed convolution: B independent PyTorch-style ConvTranspose2d layers in one
// call (groups 1, dilation 1 and output_padding 0 per model: DCGAN's generator).
//
//   x       [N, B*C_in, H, W]   ([N, C_in, H, W] when shared_input: one tensor feeds all B)
//   weight  [B, C_in, C_out, kH, kW]   model b's slice is PyTorch's ConvTranspose2d.weight
//   bias    [B, C_out]          (empty view when bias = false)
//   y       [N, B*C_out, OH, OW],  OH = (H - 1) * stride_h - 2 * pad_h + kernel_h  (OW alike)
// Model b owns channels [b*C, (b+1)*C) of x and y (the conv family's layout), so the fused op is
// one transposed convolution with B groups, whose weight [B, C_in, C_out, kH, kW] is oneDNN's
// `giohw` order: the weight needs no transpose of ours (and export is a slice).
// Forward: y[n, o, h*s - p + i, w*s - p + j] += x[n, c, h, w] * weight[c, o, i, j] (+ bias[o]),
// per model: each input pixel scatters a kH x kW patch, and the adjoint of Conv2d's forward.
// Backward: dx is written (=), or added to (+=) with accumulate_dx; when shared_input, the
// gradient put into dx is the sum over models. dweight and dbias accumulate (+=). Any gradient
// may be an empty view to skip it. Backward needs only x and weight: there is no Saved struct.
#pragma once

#include <compare>
#include <cstdint>

#include "core/tensor.h"

namespace hfta {

struct ConvTranspose2dParams {
  int64_t B = 1;
  int64_t N = 1;
  int64_t in_channels = 1;
  int64_t out_channels = 1;
  int64_t H = 1;  // input size
  int64_t W = 1;
  int64_t kernel_h = 1;
  int64_t kernel_w = 1;
  int64_t stride_h = 1;
  int64_t stride_w = 1;
  int64_t pad_h = 0;  // PyTorch's padding: trims pad rows off each side of the full output
  int64_t pad_w = 0;
  bool bias = true;
  bool shared_input = false;

  // Output size, PyTorch's formula with dilation 1 and output_padding 0.
  int64_t out_h() const { return (H - 1) * stride_h - 2 * pad_h + kernel_h; }
  int64_t out_w() const { return (W - 1) * stride_w - 2 * pad_w + kernel_w; }
  Shape x_shape() const {
    return shared_input ? Shape{N, in_channels, H, W} : Shape{N, B * in_channels, H, W};
  }
  Shape weight_shape() const { return {B, in_channels, out_channels, kernel_h, kernel_w}; }
  Shape bias_shape() const { return {B, out_channels}; }
  Shape y_shape() const { return {N, B * out_channels, out_h(), out_w()}; }
  // Forward multiply-adds x2 over all B models: every input pixel meets every tap (including
  // the taps that padding trims, which the kernels compute or skip depending on the algorithm).
  double forward_flops() const {
    return 2.0 * B * N * in_channels * H * W * out_channels * kernel_h * kernel_w;
  }
  // Ordered and comparable, so a backend can key a primitive cache by the whole problem.
  auto operator<=>(const ConvTranspose2dParams&) const = default;
};

// The tensors of one call, by name (call with designated initializers:
// conv_transpose2d_forward(p, {.x = x, .weight = w, .bias = b, .y = y})).
struct ConvTranspose2dForwardArgs {
  TensorView x{}, weight{}, bias{}, y{};
};
struct ConvTranspose2dBackwardArgs {
  TensorView x{}, weight{}, dy{};       // inputs
  TensorView dx{}, dweight{}, dbias{};  // outputs; an empty view = not wanted
  bool accumulate_dx = false;           // dx += gradient instead of dx = gradient
};

// Throws hfta::Error when a size is not positive, the stride or kernel is not positive, the
// padding is negative or trims the whole output, or a tensor does not match its shape above.
void check_conv_transpose2d_params(const ConvTranspose2dParams& p);
void check_conv_transpose2d(const ConvTranspose2dParams& p, const ConvTranspose2dForwardArgs& a);
void check_conv_transpose2d_backward(const ConvTranspose2dParams& p,
                                     const ConvTranspose2dBackwardArgs& a);

void conv_transpose2d_forward(const ConvTranspose2dParams& p, const ConvTranspose2dForwardArgs& a);
void conv_transpose2d_backward(const ConvTranspose2dParams& p,
                               const ConvTranspose2dBackwardArgs& a);

namespace ref {
void conv_transpose2d_forward(const ConvTranspose2dParams& p, const ConvTranspose2dForwardArgs& a);
void conv_transpose2d_backward(const ConvTranspose2dParams& p,
                               const ConvTranspose2dBackwardArgs& a);
}  // namespace ref

namespace cpu {
void conv_transpose2d_forward(const ConvTranspose2dParams& p, const ConvTranspose2dForwardArgs& a);
void conv_transpose2d_backward(const ConvTranspose2dParams& p,
                               const ConvTranspose2dBackwardArgs& a);

// How the B models map onto oneDNN's deconvolution: one deconvolution with B groups (kGrouped,
// what kAuto picks for a per-model input), or B runs of the single-model deconvolution on each
// model's channel slices (kPerModel, and always for a shared input, which one grouped primitive
// cannot read). B = 1 is the single-model deconvolution either way. For comparison in tests and
// benchmarks; HFTA_CONV_TRANSPOSE_STRATEGY=grouped|per_model sets the initial value.
enum class ConvTranspose2dStrategy { kAuto, kGrouped, kPerModel };
void set_conv_transpose2d_strategy(ConvTranspose2dStrategy strategy);
ConvTranspose2dStrategy conv_transpose2d_strategy();
// kGrouped or kPerModel: what problem p runs as under the current setting.
ConvTranspose2dStrategy conv_transpose2d_strategy_for(const ConvTranspose2dParams& p);
// Number of problems whose primitives are cached (at most 32, least recently used evicted).
int64_t conv_transpose2d_cached_problems();
// Drops every cached problem and the memory it holds (as clear_conv2d_cache).
void clear_conv_transpose2d_cache();
}  // namespace cpu

// Every tensor in device memory (fused_ops/cuda/conv_transpose2d.cpp; defined only in a build
// with -DHFTA_CUDA=ON): conv2d's im2col and col2im kernels and cuBLAS GEMMs
// (conv_transpose2d_gemms.h), per-model calls in deterministic mode. Runs on the calling thread's
// stream (backend/cuda/runtime.h) and returns without waiting for it.
namespace cuda {
void conv_transpose2d_forward(const ConvTranspose2dParams& p, const ConvTranspose2dForwardArgs& a);
void conv_transpose2d_backward(const ConvTranspose2dParams& p,
                               const ConvTranspose2dBackwardArgs& a);
}  // namespace cuda

}  // namespace hfta
