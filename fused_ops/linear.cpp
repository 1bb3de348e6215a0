#include "fused_ops/linear.h"

#include "fused_ops/dispatch.h"

namespace hfta {

static void check_linear_sizes(const LinearParams& p) {
  HFTA_CHECK(p.B > 0 && p.N > 0 && p.in_features > 0 && p.out_features > 0,
             "linear sizes must be positive, got B={} N={} in_features={} out_features={}", p.B,
             p.N, p.in_features, p.out_features);
}

void check_linear(const LinearParams& p, const LinearForwardArgs& a) {
  check_linear_sizes(p);
  check_shape(a.x, p.x_shape(), "linear input");
  check_shape(a.weight, p.weight_shape(), "linear weight");
  if (p.bias) check_shape(a.bias, p.bias_shape(), "linear bias");
  check_shape(a.y, p.y_shape(), "linear output");
  check_device(a.weight, a.x.device, "linear weight");
  check_device(a.bias, a.x.device, "linear bias");
  check_device(a.y, a.x.device, "linear output");
}

void check_linear_backward(const LinearParams& p, const LinearBackwardArgs& a) {
  check_linear_sizes(p);
  check_shape(a.x, p.x_shape(), "linear input");
  check_shape(a.weight, p.weight_shape(), "linear weight");
  check_shape(a.dy, p.y_shape(), "linear output gradient");
  check_optional_shape(a.dx, p.x_shape(), "linear input gradient");
  check_optional_shape(a.dweight, p.weight_shape(), "linear weight gradient");
  if (p.bias) check_optional_shape(a.dbias, p.bias_shape(), "linear bias gradient");
  check_device(a.weight, a.x.device, "linear weight");
  check_device(a.dy, a.x.device, "linear output gradient");
  check_device(a.dx, a.x.device, "linear input gradient");
  check_device(a.dweight, a.x.device, "linear weight gradient");
  check_device(a.dbias, a.x.device, "linear bias gradient");
}

void linear_forward(const LinearParams& p, const LinearForwardArgs& a) {
  check_linear(p, a);
  HFTA_DISPATCH_CUDA("linear_forward", a.x.device, cpu::linear_forward(p, a),
                     cuda::linear_forward(p, a));
}

void linear_backward(const LinearParams& p, const LinearBackwardArgs& a) {
  check_linear_backward(p, a);
  HFTA_DISPATCH_CUDA("linear_backward", a.x.device, cpu::linear_backward(p, a),
                     cuda::linear_backward(p, with_param_grads_zeroed(a)));
}

}  // namespace hfta
