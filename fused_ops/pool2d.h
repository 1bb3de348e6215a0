// Fused 2-D pooling: B independent PyTorch-style MaxPool2d / AvgPool2d / AdaptiveAvgPool2d
// layers in one call.
//
//   x       [N, B*C, H, W]    (model b's channels at [b*C, (b+1)*C), the conv family's layout)
//   y       [N, B*C, OH, OW]
//   argmax  [N, B*C, OH, OW]  int32, max pooling only: where each output came from, as the flat
//                             index h*W + w into its input plane (PyTorch's return_indices)
// Pooling acts on each (n, channel) plane alone and has no parameters, so the fused op is plain
// pooling over N*B*C planes: model b alone computes exactly its channels' planes.
// Backward: dx is written (=), or added to (+=) with accumulate_dx. Max pooling routes each dy to
// its argmax (adding where windows overlap); average pooling spreads dy / divisor over its window.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace hfta {

enum class PoolKind { kMax, kAvg };

// PyTorch's pooling output size along one axis (pooling_output_shape, dilation 1): floor or ceil
// of (size + 2*pad - kernel) / stride, plus one; in ceil mode the last window must start inside
// the input or its left padding, else it is dropped. Not positive when there is no output.
int64_t pool_output_size(int64_t size, int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode);

struct Pool2dParams {
  PoolKind kind = PoolKind::kMax;
  int64_t B = 1;
  int64_t N = 1;
  int64_t C = 1;  // channels per model
  int64_t H = 1;
  int64_t W = 1;
  int64_t kernel_h = 1;
  int64_t kernel_w = 1;
  int64_t stride_h = 0;  // 0 means "= kernel_h", PyTorch's default
  int64_t stride_w = 0;
  int64_t pad_h = 0;  // implicit padding on each side: -inf for max, zeros for avg
  int64_t pad_w = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;  // avg only: divide by the window including its padding

  int64_t effective_stride_h() const { return stride_h == 0 ? kernel_h : stride_h; }
  int64_t effective_stride_w() const { return stride_w == 0 ? kernel_w : stride_w; }
  int64_t out_h() const {
    return pool_output_size(H, kernel_h, effective_stride_h(), pad_h, ceil_mode);
  }
  int64_t out_w() const {
    return pool_output_size(W, kernel_w, effective_stride_w(), pad_w, ceil_mode);
  }
  Shape x_shape() const { return {N, B * C, H, W}; }
  Shape y_shape() const { return {N, B * C, out_h(), out_w()}; }
  Shape argmax_shape() const { return y_shape(); }
  // One compare or add per window element, over all B models.
  double forward_flops() const {
    return double(N) * B * C * out_h() * out_w() * kernel_h * kernel_w;
  }
};

// What backward needs. Max pooling: argmax, filled by forward (may be an empty view in a forward
// that no backward follows, e.g. evaluation). Average pooling: nothing (argmax is ignored).
struct Pool2dSaved {
  IndexView argmax;
};

// The tensors of one call, by name (call with designated initializers:
// pool2d_forward(p, {.x = x, .saved = {.argmax = argmax}, .y = y})).
struct Pool2dForwardArgs {
  TensorView x{};
  Pool2dSaved saved{};  // output for backward (max pooling)
  TensorView y{};
};
struct Pool2dBackwardArgs {
  Pool2dSaved saved{};  // what forward saved
  TensorView dy{};
  TensorView dx{};             // output
  bool accumulate_dx = false;  // dx += gradient instead of dx = gradient
};

// Throws hfta::Error when a size or hyperparameter is invalid (non-positive sizes, kernel or
// stride, negative padding, padding above half the kernel as PyTorch forbids, an empty output)
// or a tensor does not match its shape above.
void check_pool2d_params(const Pool2dParams& p);
void check_pool2d(const Pool2dParams& p, const Pool2dForwardArgs& a);
void check_pool2d_backward(const Pool2dParams& p, const Pool2dBackwardArgs& a);

void pool2d_forward(const Pool2dParams& p, const Pool2dForwardArgs& a);
void pool2d_backward(const Pool2dParams& p, const Pool2dBackwardArgs& a);

// Adaptive average pooling to a fixed out_h x out_w: output row i averages input rows
// [floor(i*H/out_h), ceil((i+1)*H/out_h)), and likewise for columns (PyTorch's bins; they may
// overlap, and out_h may exceed H). Same layouts as above; no saved state.
struct AdaptiveAvgPool2dParams {
  int64_t B = 1;
  int64_t N = 1;
  int64_t C = 1;  // channels per model
  int64_t H = 1;
  int64_t W = 1;
  int64_t out_h = 1;
  int64_t out_w = 1;

  Shape x_shape() const { return {N, B * C, H, W}; }
  Shape y_shape() const { return {N, B * C, out_h, out_w}; }
  // One add per bin element: each bin spans at most ceil(H/out_h)+1 rows (and columns).
  double forward_flops() const {
    return double(N) * B * C * out_h * out_w * ((H + out_h - 1) / out_h + 1) *
           ((W + out_w - 1) / out_w + 1);
  }
};

struct AdaptiveAvgPool2dForwardArgs {
  TensorView x{}, y{};
};
struct AdaptiveAvgPool2dBackwardArgs {
  TensorView dy{};
  TensorView dx{};             // output
  bool accumulate_dx = false;  // dx += gradient instead of dx = gradient
};

void check_adaptive_avg_pool2d(const AdaptiveAvgPool2dParams& p,
                               const AdaptiveAvgPool2dForwardArgs& a);
void check_adaptive_avg_pool2d_backward(const AdaptiveAvgPool2dParams& p,
                                        const AdaptiveAvgPool2dBackwardArgs& a);

void adaptive_avg_pool2d_forward(const AdaptiveAvgPool2dParams& p,
                                 const AdaptiveAvgPool2dForwardArgs& a);
void adaptive_avg_pool2d_backward(const AdaptiveAvgPool2dParams& p,
                                  const AdaptiveAvgPool2dBackwardArgs& a);

namespace ref {
void pool2d_forward(const Pool2dParams& p, const Pool2dForwardArgs& a);
void pool2d_backward(const Pool2dParams& p, const Pool2dBackwardArgs& a);
void adaptive_avg_pool2d_forward(const AdaptiveAvgPool2dParams& p,
                                 const AdaptiveAvgPool2dForwardArgs& a);
void adaptive_avg_pool2d_backward(const AdaptiveAvgPool2dParams& p,
                                  const AdaptiveAvgPool2dBackwardArgs& a);
}  // namespace ref

namespace cpu {
void pool2d_forward(const Pool2dParams& p, const Pool2dForwardArgs& a);
void pool2d_backward(const Pool2dParams& p, const Pool2dBackwardArgs& a);
void adaptive_avg_pool2d_forward(const AdaptiveAvgPool2dParams& p,
                                 const AdaptiveAvgPool2dForwardArgs& a);
void adaptive_avg_pool2d_backward(const AdaptiveAvgPool2dParams& p,
                                  const AdaptiveAvgPool2dBackwardArgs& a);
}  // namespace cpu

// Every tensor in device memory (fused_ops/cuda/pool2d.cpp; defined only in a build with
// -DHFTA_CUDA=ON). Runs on the calling thread's stream (backend/cuda/runtime.h) and returns
// without waiting for it. Backward gathers (no atomics), so its result does not depend on the
// launch.
namespace cuda {
void pool2d_forward(const Pool2dParams& p, const Pool2dForwardArgs& a);
void pool2d_backward(const Pool2dParams& p, const Pool2dBackwardArgs& a);
void adaptive_avg_pool2d_forward(const AdaptiveAvgPool2dParams& p,
                                 const AdaptiveAvgPool2dForwardArgs& a);
void adaptive_avg_pool2d_backward(const AdaptiveAvgPool2dParams& p,
                                  const AdaptiveAvgPool2dBackwardArgs& a);
}  // namespace cuda

}  // namespace hfta
