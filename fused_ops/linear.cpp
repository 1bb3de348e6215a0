#include "fused_ops/linear.h"

#include "fused_ops/dispatch.h"

namespace hfta {

static void check_linear_sizes(const LinearParams& p) {
  HFTA_CHECK(p.B > 0 && p.N > 0 && p.in_features > 0 && p.out_features > 0,
             "linear sizes must be positive, got B={} N={} in_features={} out_features={}", p.B,
             p.N, p.in_features, p.out_features);
}

void check_linear(const LinearParams& p, const TensorView& x, const TensorView& weight,
                  const TensorView& bias, const TensorView& y) {
  check_linear_sizes(p);
  check_shape(x, p.x_shape(), "linear input");
  check_shape(weight, p.weight_shape(), "linear weight");
  if (p.bias) check_shape(bias, p.bias_shape(), "linear bias");
  check_shape(y, p.y_shape(), "linear output");
}

void check_linear_backward(const LinearParams& p, const TensorView& x,
                                  const TensorView& weight, const TensorView& dy,
                                  const TensorView& dx, const TensorView& dweight,
                                  const TensorView& dbias) {
  check_linear_sizes(p);
  check_shape(x, p.x_shape(), "linear input");
  check_shape(weight, p.weight_shape(), "linear weight");
  check_shape(dy, p.y_shape(), "linear output gradient");
  check_optional_shape(dx, p.x_shape(), "linear input gradient");
  check_optional_shape(dweight, p.weight_shape(), "linear weight gradient");
  if (p.bias) check_optional_shape(dbias, p.bias_shape(), "linear bias gradient");
}

void linear_forward(const LinearParams& p, const TensorView& x, const TensorView& weight,
                    const TensorView& bias, const TensorView& y) {
  check_linear(p, x, weight, bias, y);
  HFTA_DISPATCH("linear_forward", x.device, cpu::linear_forward(p, x, weight, bias, y));
}

void linear_backward(const LinearParams& p, const TensorView& x, const TensorView& weight,
                     const TensorView& dy, const TensorView& dx, const TensorView& dweight,
                     const TensorView& dbias) {
  check_linear_backward(p, x, weight, dy, dx, dweight, dbias);
  HFTA_DISPATCH("linear_backward", x.device,
                cpu::linear_backward(p, x, weight, dy, dx, dweight, dbias));
}

}  // namespace hfta
