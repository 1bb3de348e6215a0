// Fused 2-D convolution: B independent PyTorch-style Conv2d layers in one call.
//
//   x       [N, B*C_in, H, W]   ([N, C_in, H, W] when shared_input: one minibatch feeds all B)
//   weight  [B, C_out, C_in/groups, kH, kW]
//   bias    [B, C_out]          (empty view when bias = false)
//   y       [N, B*C_out, OH, OW]
// The channel axis of x and y holds model b's channels at [b*C, (b+1)*C), so the fused op is a
// grouped convolution with B*groups groups, and weight is bit-identical to the grouped weights
// [B*groups, C_out/groups, C_in/groups, kH, kW] of that convolution.
// Backward: dx is written (=), or added to (+=) with accumulate_dx; when shared_input, the
// gradient put into dx is the sum over models of x's gradient (the shared input feeds every
// model). dweight and dbias accumulate (+=), or with accumulate_dparams = false are written (=): a
// step's first gradient, which then needs no zeroing pass before it, and on the oneDNN, im2col and
// pointwise paths no read of the old values either. Any gradient may be an empty view to skip it.
// Backward needs only x and weight. A CPU caller may also pass `saved`, conv2d_saved_floats(p)
// floats that forward fills and backward reads back: on the small planes of cpu/conv2d_im2col.h
// whose kernel reads the input with at most a third of its taps (a 3x3 kernel on a 1x1 plane: the
// centre), each model's live taps' weights, gathered [B, C_out, C_in*live taps], which backward
// would otherwise gather again from the whole weight (9.4 MB for a 512 -> 512 3x3 layer, all of
// it read for a ninth of it). What backward reads is then the weight forward ran with; without
// `saved` (an empty view) backward gathers from `weight` itself.
#pragma once

#include <compare>
#include <cstdint>
#include <string_view>

#include "core/tensor.h"

namespace hfta {

struct Conv2dParams {
  int64_t B = 1;
  int64_t N = 1;
  int64_t in_channels = 1;
  int64_t out_channels = 1;
  int64_t H = 1;
  int64_t W = 1;
  int64_t kernel_h = 1;
  int64_t kernel_w = 1;
  int64_t stride_h = 1;
  int64_t stride_w = 1;
  int64_t pad_h = 0;  // zero padding on each side, as PyTorch's padding
  int64_t pad_w = 0;
  int64_t dilation_h = 1;  // PyTorch meaning: 1 is a dense kernel
  int64_t dilation_w = 1;
  int64_t groups = 1;  // depthwise: groups == in_channels
  bool bias = true;
  bool shared_input = false;

  // Output size, PyTorch's formula (floor division).
  int64_t out_h() const { return (H + 2 * pad_h - dilation_h * (kernel_h - 1) - 1) / stride_h + 1; }
  int64_t out_w() const { return (W + 2 * pad_w - dilation_w * (kernel_w - 1) - 1) / stride_w + 1; }
  Shape x_shape() const {
    return shared_input ? Shape{N, in_channels, H, W} : Shape{N, B * in_channels, H, W};
  }
  Shape weight_shape() const { return {B, out_channels, in_channels / groups, kernel_h, kernel_w}; }
  Shape bias_shape() const { return {B, out_channels}; }
  Shape y_shape() const { return {N, B * out_channels, out_h(), out_w()}; }
  // Forward multiply-adds x2, over all B models.
  double forward_flops() const {
    return 2.0 * B * N * out_channels * out_h() * out_w() * (in_channels / groups) * kernel_h *
           kernel_w;
  }
  // Ordered and comparable, so a backend can key a primitive cache by the whole problem.
  auto operator<=>(const Conv2dParams&) const = default;
};

// The tensors of one call, by name (call with designated initializers:
// conv2d_forward(p, {.x = x, .weight = w, .bias = b, .y = y})).
struct Conv2dForwardArgs {
  TensorView x{}, weight{}, bias{}, y{};
  TensorView saved{};  // optional output for backward: [conv2d_saved_floats(p)] or empty
};
struct Conv2dBackwardArgs {
  TensorView x{}, weight{}, dy{};       // inputs
  TensorView dx{}, dweight{}, dbias{};  // outputs; an empty view = not wanted
  bool accumulate_dx = false;           // dx += gradient instead of dx = gradient
  bool accumulate_dparams = true;       // false: dweight = gradient, dbias = gradient
  TensorView saved{};                   // what forward saved (see above), or empty
};

// The floats of Conv2dForwardArgs::saved for p (independent of N): 0 when no CPU path of p saves
// anything, so callers pass an empty view.
int64_t conv2d_saved_floats(const Conv2dParams& p);

// Throws hfta::Error when a size or hyperparameter is invalid (non-positive sizes, channels not
// divisible by groups, an empty output) or a tensor does not match its shape above.
void check_conv2d_params(const Conv2dParams& p);
void check_conv2d(const Conv2dParams& p, const Conv2dForwardArgs& a);
void check_conv2d_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a);

void conv2d_forward(const Conv2dParams& p, const Conv2dForwardArgs& a);
void conv2d_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a);

namespace ref {
void conv2d_forward(const Conv2dParams& p, const Conv2dForwardArgs& a);
void conv2d_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a);
}  // namespace ref

namespace cpu {
void conv2d_forward(const Conv2dParams& p, const Conv2dForwardArgs& a);
void conv2d_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a);
// Number of problems (distinct Conv2dParams and strategy) whose oneDNN primitives are cached.
// The cache keeps at most conv2d_cache_capacity() of them per calling thread (32 by default) and
// evicts the least recently used; set_conv2d_cache_capacity (at least 1) shrinks it at once.
int64_t conv2d_cached_problems();
// Drops every cached problem and the memory it holds (plan auto, once a timed candidate array is
// gone: its shapes' entries would otherwise stay until evicted).
void clear_conv2d_cache();
void set_conv2d_cache_capacity(int64_t problems);
int64_t conv2d_cache_capacity();

// What the B models become in oneDNN: one grouped convolution with B*groups groups (kGrouped),
// or B runs of the single-model convolution on each model's channel slices (kPerModel), spread
// one model per thread when B is a multiple of the thread count (cpu::ModelParallelism decides,
// as for linear). kAuto (the default) picks kPerModel for B > 1 unless oneDNN has a JIT kernel
// only for the grouped problem; B = 1 is the single-model convolution either way. A shared
// input with groups > 1 is always per model.
// kDirect: our own AVX-512 kernel (cpu/conv2d_direct.h) for a shared input with few channels,
// which kAuto also picks whenever it applies; kDirect on a problem it does not apply to is kAuto.
// kDepthwise: our own kernel for depthwise convolutions (cpu/conv2d_depthwise.h) on the plain
// NCHW buffers, which kAuto also picks whenever it applies; on other problems it is kAuto.
// kIm2col: GEMMs on the plain buffers (cpu/conv2d_im2col.h) for output planes of at most 2x2
// positions whose weights outweigh their activations (ResNet-18's last stages on 32x32 images),
// which kAuto also picks whenever it applies; on other problems it is kAuto.
// kPointwise: GEMMs straight on the plain buffers (cpu/conv2d_pointwise.h) for 1x1 convolutions
// at stride 1 without padding on planes of at least 16 positions (MobileNetV2's expansions and
// projections), which kAuto also picks whenever it applies; on other problems it is kAuto.
// Only kGrouped and kPerModel force oneDNN (for comparison).
// The environment variable HFTA_CONV_STRATEGY=grouped|per_model|direct|depthwise|im2col|pointwise
// sets the initial value.
enum class Conv2dStrategy { kAuto, kGrouped, kPerModel, kDirect, kDepthwise, kIm2col, kPointwise };
void set_conv2d_strategy(Conv2dStrategy strategy);
Conv2dStrategy conv2d_strategy();
// The strategy (kGrouped, kPerModel, kDirect, kDepthwise, kIm2col or kPointwise) that problem p
// runs with under the current setting.
Conv2dStrategy conv2d_strategy_for(const Conv2dParams& p);
// "auto", "grouped", "per_model", "direct", "depthwise", "im2col", "pointwise"; parse throws
// hfta::Error naming the choices for any other name.
std::string_view conv2d_strategy_name(Conv2dStrategy strategy);
Conv2dStrategy parse_conv2d_strategy(std::string_view name);
}  // namespace cpu

// Every tensor in device memory (fused_ops/cuda/conv2d.cpp; defined only in a build with
// -DHFTA_CUDA=ON): im2col, cuBLAS GEMMs and a gathering col2im (docs/cuda.md). Runs on the calling
// thread's stream (backend/cuda/runtime.h) and returns without waiting for it.
namespace cuda {
void conv2d_forward(const Conv2dParams& p, const Conv2dForwardArgs& a);
void conv2d_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a);
}  // namespace cuda

}  // namespace hfta
