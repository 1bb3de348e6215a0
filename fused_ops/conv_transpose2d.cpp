#include "fused_ops/conv_transpose2d.h"

#include "fused_ops/dispatch.h"

namespace hfta {

namespace {

// One spatial axis: positive kernel and stride, padding that leaves at least one output.
// NOLINTBEGIN(bugprone-easily-swappable-parameters): an internal helper called only in this file,
// with locals named like its parameters.
void check_conv_transpose2d_axis(const char* axis, int64_t size, int64_t kernel, int64_t stride,
                                 int64_t pad) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  HFTA_CHECK(kernel > 0 && stride > 0,
             "conv_transpose2d kernel_{0}={1} and stride_{0}={2} must be positive", axis, kernel,
             stride);
  HFTA_CHECK(pad >= 0, "conv_transpose2d pad_{}={} must be zero or positive", axis, pad);
  const int64_t full = (size - 1) * stride + kernel;
  HFTA_CHECK(full - 2 * pad >= 1,
             "conv_transpose2d has no output along {0}: the full output is (size-1)*stride_{0}+"
             "kernel_{0}={1} for size {2}, and 2*pad_{0}={3} trims all of it; use less padding",
             axis, full, size, 2 * pad);
}

}  // namespace

void check_conv_transpose2d_params(const ConvTranspose2dParams& p) {
  HFTA_CHECK(p.B > 0 && p.N > 0 && p.in_channels > 0 && p.out_channels > 0 && p.H > 0 && p.W > 0,
             "conv_transpose2d sizes must be positive, got B={} N={} in_channels={} "
             "out_channels={} H={} W={}",
             p.B, p.N, p.in_channels, p.out_channels, p.H, p.W);
  check_conv_transpose2d_axis("h", p.H, p.kernel_h, p.stride_h, p.pad_h);
  check_conv_transpose2d_axis("w", p.W, p.kernel_w, p.stride_w, p.pad_w);
}

void check_conv_transpose2d(const ConvTranspose2dParams& p, const ConvTranspose2dForwardArgs& a) {
  check_conv_transpose2d_params(p);
  check_shape(a.x, p.x_shape(), "conv_transpose2d input");
  check_shape(a.weight, p.weight_shape(), "conv_transpose2d weight");
  if (p.bias) check_shape(a.bias, p.bias_shape(), "conv_transpose2d bias");
  check_shape(a.y, p.y_shape(), "conv_transpose2d output");
  check_device(a.weight, a.x.device, "conv_transpose2d weight");
  if (p.bias) check_device(a.bias, a.x.device, "conv_transpose2d bias");
  check_device(a.y, a.x.device, "conv_transpose2d output");
}

void check_conv_transpose2d_backward(const ConvTranspose2dParams& p,
                                     const ConvTranspose2dBackwardArgs& a) {
  check_conv_transpose2d_params(p);
  check_shape(a.x, p.x_shape(), "conv_transpose2d input");
  check_shape(a.weight, p.weight_shape(), "conv_transpose2d weight");
  check_shape(a.dy, p.y_shape(), "conv_transpose2d output gradient");
  check_optional_shape(a.dx, p.x_shape(), "conv_transpose2d input gradient");
  check_optional_shape(a.dweight, p.weight_shape(), "conv_transpose2d weight gradient");
  if (p.bias) check_optional_shape(a.dbias, p.bias_shape(), "conv_transpose2d bias gradient");
  check_device(a.weight, a.x.device, "conv_transpose2d weight");
  check_device(a.dy, a.x.device, "conv_transpose2d output gradient");
  check_device(a.dx, a.x.device, "conv_transpose2d input gradient");
  check_device(a.dweight, a.x.device, "conv_transpose2d weight gradient");
  if (p.bias) check_device(a.dbias, a.x.device, "conv_transpose2d bias gradient");
}

void conv_transpose2d_forward(const ConvTranspose2dParams& p, const ConvTranspose2dForwardArgs& a) {
  check_conv_transpose2d(p, a);
  HFTA_DISPATCH_CUDA("conv_transpose2d_forward", a.x.device, cpu::conv_transpose2d_forward(p, a),
                     cuda::conv_transpose2d_forward(p, a));
}

void conv_transpose2d_backward(const ConvTranspose2dParams& p,
                               const ConvTranspose2dBackwardArgs& a) {
  check_conv_transpose2d_backward(p, a);
  HFTA_DISPATCH_CUDA("conv_transpose2d_backward", a.x.device, cpu::conv_transpose2d_backward(p, a),
                     cuda::conv_transpose2d_backward(p, a));
}

}  // namespace hfta
