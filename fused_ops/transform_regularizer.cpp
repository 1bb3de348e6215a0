#include "fused_ops/transform_regularizer.h"

#include <cmath>
#include <utility>

#include "fused_ops/dispatch.h"

namespace hfta {

static void check_transform_regularizer_params(const TransformRegularizerParams& p) {
  HFTA_CHECK(p.B > 0 && p.N > 0 && p.k > 0,
             "transform_regularizer sizes must be positive, got B={} N={} k={}", p.B, p.N, p.k);
  HFTA_CHECK(std::isfinite(p.scale), "transform_regularizer scale is {}, expected a finite number",
             p.scale);
}

void check_transform_regularizer(const TransformRegularizerParams& p,
                                 const TransformRegularizerForwardArgs& a) {
  check_transform_regularizer_params(p);
  check_shape(a.a, p.a_shape(), "transform_regularizer input");
  check_shape(a.loss, p.loss_shape(), "transform_regularizer loss");
  check_device(a.loss, a.a.device, "transform_regularizer loss");
}

void check_transform_regularizer_backward(const TransformRegularizerParams& p,
                                          const TransformRegularizerBackwardArgs& a) {
  check_transform_regularizer_params(p);
  check_shape(a.a, p.a_shape(), "transform_regularizer input");
  check_shape(a.dloss, p.loss_shape(), "transform_regularizer loss gradient");
  check_optional_shape(a.da, p.a_shape(), "transform_regularizer input gradient");
  for (const auto& [t, name] : {std::pair{a.dloss, "transform_regularizer loss gradient"},
                                {a.da, "transform_regularizer input gradient"}})
    check_device(t, a.a.device, name);
  HFTA_CHECK(a.da.empty() || a.da.data != a.a.data,
             "transform_regularizer backward got its input gradient in the input's buffer: "
             "backward reads the input while writing the gradient, give it its own buffer");
}

void transform_regularizer_forward(const TransformRegularizerParams& p,
                                   const TransformRegularizerForwardArgs& a) {
  check_transform_regularizer(p, a);
  HFTA_DISPATCH_CUDA("transform_regularizer_forward", a.a.device,
                     cpu::transform_regularizer_forward(p, a),
                     cuda::transform_regularizer_forward(p, a));
}

void transform_regularizer_backward(const TransformRegularizerParams& p,
                                    const TransformRegularizerBackwardArgs& a) {
  check_transform_regularizer_backward(p, a);
  if (a.da.empty()) return;
  HFTA_DISPATCH_CUDA("transform_regularizer_backward", a.a.device,
                     cpu::transform_regularizer_backward(p, a),
                     cuda::transform_regularizer_backward(p, a));
}

}  // namespace hfta
