#include "fused_ops/conv2d.h"

#include "fused_ops/dispatch.h"

namespace hfta {

namespace {

// One spatial axis: the dilated kernel must fit in the padded input, or there is no output.
// NOLINTBEGIN(bugprone-easily-swappable-parameters): an internal kernel helper called only in this
// file, at a few call sites that pass locals named like its parameters.
void check_conv2d_axis(const char* axis, int64_t size, int64_t kernel, int64_t stride, int64_t pad,
                       int64_t dilation) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  HFTA_CHECK(kernel > 0 && stride > 0 && dilation > 0,
             "conv2d kernel_{0}={1}, stride_{0}={2} and dilation_{0}={3} must be positive (a "
             "dense kernel has dilation 1)",
             axis, kernel, stride, dilation);
  HFTA_CHECK(pad >= 0, "conv2d pad_{}={} must be zero or positive", axis, pad);
  const int64_t extent = dilation * (kernel - 1) + 1;
  HFTA_CHECK(size + 2 * pad >= extent,
             "conv2d has no output along {0}: the input is {1} (plus 2*pad_{0}={2}) but the "
             "kernel spans dilation_{0}*(kernel_{0}-1)+1={3}; use a smaller kernel_{0} or "
             "dilation_{0}, more padding, or a larger input",
             axis, size, 2 * pad, extent);
}

}  // namespace

void check_conv2d_params(const Conv2dParams& p) {
  HFTA_CHECK(p.B > 0 && p.N > 0 && p.in_channels > 0 && p.out_channels > 0 && p.H > 0 && p.W > 0,
             "conv2d sizes must be positive, got B={} N={} in_channels={} out_channels={} H={} "
             "W={}",
             p.B, p.N, p.in_channels, p.out_channels, p.H, p.W);
  HFTA_CHECK(p.groups > 0, "conv2d groups={} must be positive (1 for a dense convolution)",
             p.groups);
  HFTA_CHECK(p.in_channels % p.groups == 0 && p.out_channels % p.groups == 0,
             "conv2d in_channels={} and out_channels={} must both be divisible by groups={}; "
             "change groups to a common divisor",
             p.in_channels, p.out_channels, p.groups);
  check_conv2d_axis("h", p.H, p.kernel_h, p.stride_h, p.pad_h, p.dilation_h);
  check_conv2d_axis("w", p.W, p.kernel_w, p.stride_w, p.pad_w, p.dilation_w);
}

// `saved` is optional, and only the CPU paths read it.
static void check_saved(const Conv2dParams& p, const TensorView& saved, Device device) {
  if (saved.empty()) return;
  HFTA_CHECK(device == Device::kCpu, "conv2d: saved weights are a CPU path's; pass an empty view");
  check_shape(saved, Shape{conv2d_saved_floats(p)}, "conv2d saved weights");
}

void check_conv2d(const Conv2dParams& p, const Conv2dForwardArgs& a) {
  check_conv2d_params(p);
  check_shape(a.x, p.x_shape(), "conv2d input");
  check_shape(a.weight, p.weight_shape(), "conv2d weight");
  if (p.bias) check_shape(a.bias, p.bias_shape(), "conv2d bias");
  check_shape(a.y, p.y_shape(), "conv2d output");
  check_device(a.weight, a.x.device, "conv2d weight");
  check_device(a.bias, a.x.device, "conv2d bias");
  check_device(a.y, a.x.device, "conv2d output");
  check_saved(p, a.saved, a.x.device);
}

void check_conv2d_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a) {
  check_conv2d_params(p);
  check_shape(a.x, p.x_shape(), "conv2d input");
  check_shape(a.weight, p.weight_shape(), "conv2d weight");
  check_shape(a.dy, p.y_shape(), "conv2d output gradient");
  check_optional_shape(a.dx, p.x_shape(), "conv2d input gradient");
  check_optional_shape(a.dweight, p.weight_shape(), "conv2d weight gradient");
  if (p.bias) check_optional_shape(a.dbias, p.bias_shape(), "conv2d bias gradient");
  check_device(a.weight, a.x.device, "conv2d weight");
  check_device(a.dy, a.x.device, "conv2d output gradient");
  check_device(a.dx, a.x.device, "conv2d input gradient");
  check_device(a.dweight, a.x.device, "conv2d weight gradient");
  check_device(a.dbias, a.x.device, "conv2d bias gradient");
  check_saved(p, a.saved, a.x.device);
}

void conv2d_forward(const Conv2dParams& p, const Conv2dForwardArgs& a) {
  check_conv2d(p, a);
  HFTA_DISPATCH_CUDA("conv2d_forward", a.x.device, cpu::conv2d_forward(p, a),
                     cuda::conv2d_forward(p, a));
}

void conv2d_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a) {
  check_conv2d_backward(p, a);
  HFTA_DISPATCH_CUDA("conv2d_backward", a.x.device, cpu::conv2d_backward(p, a),
                     cuda::conv2d_backward(p, with_param_grads_zeroed(a)));
}

}  // namespace hfta
