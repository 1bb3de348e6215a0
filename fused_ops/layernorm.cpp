#include "fused_ops/layernorm.h"

#include <cmath>
#include <utility>

#include "fused_ops/cuda/layernorm.h"
#include "fused_ops/dispatch.h"

namespace hfta {

void check_layernorm_params(const LayerNormParams& p) {
  HFTA_CHECK(p.B > 0 && p.N > 0 && p.F > 0, "layernorm sizes must be positive, got B={} N={} F={}",
             p.B, p.N, p.F);
  HFTA_CHECK(p.eps > 0.0 && std::isfinite(p.eps),
             "layernorm eps is {}, expected a finite value > 0 (PyTorch's default is 1e-5)", p.eps);
}

void check_layernorm(const LayerNormParams& p, const LayerNormForwardArgs& a) {
  check_layernorm_params(p);
  check_shape(a.x, p.x_shape(), "layernorm input");
  if (p.affine) {
    check_shape(a.gamma, p.param_shape(), "layernorm gamma (affine = true)");
    check_shape(a.beta, p.param_shape(), "layernorm beta (affine = true)");
  }
  check_shape(a.saved.mean, p.saved_shape(), "layernorm saved.mean");
  check_shape(a.saved.rstd, p.saved_shape(), "layernorm saved.rstd");
  check_shape(a.y, p.y_shape(), "layernorm output");
  for (const auto& [t, name] : {std::pair{a.gamma, "layernorm gamma"},
                                {a.beta, "layernorm beta"},
                                {a.saved.mean, "layernorm saved.mean"},
                                {a.saved.rstd, "layernorm saved.rstd"},
                                {a.y, "layernorm output"}})
    check_device(t, a.x.device, name);
}

void check_layernorm_backward(const LayerNormParams& p, const LayerNormBackwardArgs& a) {
  check_layernorm_params(p);
  check_shape(a.x, p.x_shape(), "layernorm input");
  if (p.affine) check_shape(a.gamma, p.param_shape(), "layernorm gamma (affine = true)");
  check_shape(a.saved.mean, p.saved_shape(), "layernorm saved.mean");
  check_shape(a.saved.rstd, p.saved_shape(), "layernorm saved.rstd");
  check_shape(a.dy, p.y_shape(), "layernorm output gradient");
  check_optional_shape(a.dx, p.x_shape(), "layernorm input gradient");
  if (p.affine) {
    check_optional_shape(a.dgamma, p.param_shape(), "layernorm gamma gradient");
    check_optional_shape(a.dbeta, p.param_shape(), "layernorm beta gradient");
  }
  for (const auto& [t, name] : {std::pair{a.gamma, "layernorm gamma"},
                                {a.saved.mean, "layernorm saved.mean"},
                                {a.saved.rstd, "layernorm saved.rstd"},
                                {a.dy, "layernorm output gradient"},
                                {a.dx, "layernorm input gradient"},
                                {a.dgamma, "layernorm gamma gradient"},
                                {a.dbeta, "layernorm beta gradient"}})
    check_device(t, a.x.device, name);
}

void layernorm_forward(const LayerNormParams& p, const LayerNormForwardArgs& a) {
  check_layernorm(p, a);
  HFTA_DISPATCH_CUDA("layernorm_forward", a.x.device, cpu::layernorm_forward(p, a),
                     cuda::layernorm_forward(p, a));
}

void layernorm_backward(const LayerNormParams& p, const LayerNormBackwardArgs& a) {
  check_layernorm_backward(p, a);
  HFTA_DISPATCH_CUDA("layernorm_backward", a.x.device, cpu::layernorm_backward(p, a),
                     cuda::layernorm_backward(p, a));
}

}  // namespace hfta
