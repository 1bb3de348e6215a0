#include "fused_ops/pool2d.h"

#include <limits>

#include "fused_ops/dispatch.h"

namespace hfta {

namespace {

const char* kind_name(PoolKind kind) {
  return kind == PoolKind::kMax ? "max_pool2d" : "avg_pool2d";
}

// Floor division (C++ truncates toward zero; PyTorch's div_rtn rounds toward -inf).
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// One spatial axis, with PyTorch's rules: padding at most half the kernel (so every window holds
// at least one input element), and at least one output.
void check_pool2d_axis(const char* op, const char* axis, int64_t size, int64_t kernel,
                       int64_t stride, int64_t pad, bool ceil_mode) {
  HFTA_CHECK(kernel > 0, "{} kernel_{}={} must be positive", op, axis, kernel);
  HFTA_CHECK(stride >= 0, "{} stride_{}={} must be positive (or 0 for stride = kernel)", op, axis,
             stride);
  HFTA_CHECK(pad >= 0, "{} pad_{}={} must be zero or positive", op, axis, pad);
  HFTA_CHECK(pad <= kernel / 2,
             "{0} pad_{1}={2} is more than half of kernel_{1}={3}: padding may be at most "
             "kernel/2 (PyTorch's rule, so that no window lies in the padding alone); lower "
             "pad_{1} or enlarge kernel_{1}",
             op, axis, pad, kernel);
  const int64_t out = pool_output_size(size, kernel, stride == 0 ? kernel : stride, pad, ceil_mode);
  HFTA_CHECK(out > 0,
             "{0} has no output along {1}: the input is {2} (plus 2*pad_{1}={3}) but "
             "kernel_{1}={4} is larger; use a smaller kernel_{1}, more padding, or a larger input",
             op, axis, size, 2 * pad, kernel);
}

}  // namespace

int64_t pool_output_size(int64_t size, int64_t kernel, int64_t stride, int64_t pad,
                         bool ceil_mode) {
  if (stride <= 0) return 0;
  int64_t out = floor_div(size + 2 * pad - kernel + (ceil_mode ? stride - 1 : 0), stride) + 1;
  if (ceil_mode && (out - 1) * stride >= size + pad) --out;
  return out;
}

void check_pool2d_params(const Pool2dParams& p) {
  const char* op = kind_name(p.kind);
  HFTA_CHECK(p.B > 0 && p.N > 0 && p.C > 0 && p.H > 0 && p.W > 0,
             "{} sizes must be positive, got B={} N={} C={} H={} W={}", op, p.B, p.N, p.C, p.H,
             p.W);
  HFTA_CHECK(p.H * p.W <= std::numeric_limits<int32_t>::max(),
             "{} input plane H*W={}*{} has 2^31 or more elements, but plane indices (argmax) "
             "are int32; pool smaller planes (e.g. downsample or tile the input first)",
             op, p.H, p.W);
  check_pool2d_axis(op, "h", p.H, p.kernel_h, p.stride_h, p.pad_h, p.ceil_mode);
  check_pool2d_axis(op, "w", p.W, p.kernel_w, p.stride_w, p.pad_w, p.ceil_mode);
}

void check_pool2d(const Pool2dParams& p, const Pool2dForwardArgs& a) {
  check_pool2d_params(p);
  const char* op = kind_name(p.kind);
  check_shape(a.x, p.x_shape(), fmt::format("{} input", op));
  check_shape(a.y, p.y_shape(), fmt::format("{} output", op));
  if (p.kind == PoolKind::kMax)
    check_optional_shape(a.saved.argmax, p.argmax_shape(), "max_pool2d saved argmax");
  check_device(a.y, a.x.device, fmt::format("{} output", op));
  if (p.kind == PoolKind::kMax) check_device(a.saved.argmax, a.x.device, "max_pool2d saved argmax");
}

void check_pool2d_backward(const Pool2dParams& p, const Pool2dBackwardArgs& a) {
  check_pool2d_params(p);
  const Pool2dSaved& saved = a.saved;
  const TensorView &dy = a.dy, &dx = a.dx;
  const char* op = kind_name(p.kind);
  if (p.kind == PoolKind::kMax) {
    HFTA_CHECK(!saved.argmax.empty(),
               "max_pool2d backward needs the saved argmax: pass a Pool2dSaved whose argmax "
               "(shape {}) was filled by pool2d_forward",
               p.argmax_shape().str());
    check_shape(saved.argmax, p.argmax_shape(), "max_pool2d saved argmax");
  }
  check_shape(dy, p.y_shape(), fmt::format("{} output gradient", op));
  check_shape(dx, p.x_shape(), fmt::format("{} input gradient", op));
  check_device(dx, dy.device, fmt::format("{} input gradient", op));
  if (p.kind == PoolKind::kMax) check_device(saved.argmax, dy.device, "max_pool2d saved argmax");
}

void pool2d_forward(const Pool2dParams& p, const Pool2dForwardArgs& a) {
  check_pool2d(p, a);
  HFTA_DISPATCH_CUDA("pool2d_forward", a.x.device, cpu::pool2d_forward(p, a),
                     cuda::pool2d_forward(p, a));
}

void pool2d_backward(const Pool2dParams& p, const Pool2dBackwardArgs& a) {
  check_pool2d_backward(p, a);
  HFTA_DISPATCH_CUDA("pool2d_backward", a.dy.device, cpu::pool2d_backward(p, a),
                     cuda::pool2d_backward(p, a));
}

static void check_adaptive_avg_pool2d_sizes(const AdaptiveAvgPool2dParams& p) {
  HFTA_CHECK(p.B > 0 && p.N > 0 && p.C > 0 && p.H > 0 && p.W > 0,
             "adaptive_avg_pool2d sizes must be positive, got B={} N={} C={} H={} W={}", p.B, p.N,
             p.C, p.H, p.W);
  HFTA_CHECK(p.out_h > 0 && p.out_w > 0,
             "adaptive_avg_pool2d output size must be positive, got out_h={} out_w={} (use 1x1 "
             "for global average pooling)",
             p.out_h, p.out_w);
}

void check_adaptive_avg_pool2d(const AdaptiveAvgPool2dParams& p,
                               const AdaptiveAvgPool2dForwardArgs& a) {
  check_adaptive_avg_pool2d_sizes(p);
  check_shape(a.x, p.x_shape(), "adaptive_avg_pool2d input");
  check_shape(a.y, p.y_shape(), "adaptive_avg_pool2d output");
  check_device(a.y, a.x.device, "adaptive_avg_pool2d output");
}

void check_adaptive_avg_pool2d_backward(const AdaptiveAvgPool2dParams& p,
                                        const AdaptiveAvgPool2dBackwardArgs& a) {
  check_adaptive_avg_pool2d_sizes(p);
  check_shape(a.dy, p.y_shape(), "adaptive_avg_pool2d output gradient");
  check_shape(a.dx, p.x_shape(), "adaptive_avg_pool2d input gradient");
  check_device(a.dx, a.dy.device, "adaptive_avg_pool2d input gradient");
}

void adaptive_avg_pool2d_forward(const AdaptiveAvgPool2dParams& p,
                                 const AdaptiveAvgPool2dForwardArgs& a) {
  check_adaptive_avg_pool2d(p, a);
  HFTA_DISPATCH_CUDA("adaptive_avg_pool2d_forward", a.x.device,
                     cpu::adaptive_avg_pool2d_forward(p, a),
                     cuda::adaptive_avg_pool2d_forward(p, a));
}

void adaptive_avg_pool2d_backward(const AdaptiveAvgPool2dParams& p,
                                  const AdaptiveAvgPool2dBackwardArgs& a) {
  check_adaptive_avg_pool2d_backward(p, a);
  HFTA_DISPATCH_CUDA("adaptive_avg_pool2d_backward", a.dy.device,
                     cpu::adaptive_avg_pool2d_backward(p, a),
                     cuda::adaptive_avg_pool2d_backward(p, a));
}

}  // namespace hfta
