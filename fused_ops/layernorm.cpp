#include "fused_ops/layernorm.h"

#include <cmath>

#include "fused_ops/dispatch.h"

namespace hfta {

void check_layernorm_params(const LayerNormParams& p) {
  HFTA_CHECK(p.B > 0 && p.N > 0 && p.F > 0, "layernorm sizes must be positive, got B={} N={} F={}",
             p.B, p.N, p.F);
  HFTA_CHECK(p.eps > 0.0 && std::isfinite(p.eps),
             "layernorm eps is {}, expected a finite value > 0 (PyTorch's default is 1e-5)", p.eps);
}

void check_layernorm(const LayerNormParams& p, const TensorView& x, const TensorView& gamma,
                     const TensorView& beta, const LayerNormSaved& saved, const TensorView& y) {
  check_layernorm_params(p);
  check_shape(x, p.x_shape(), "layernorm input");
  if (p.affine) {
    check_shape(gamma, p.param_shape(), "layernorm gamma (affine = true)");
    check_shape(beta, p.param_shape(), "layernorm beta (affine = true)");
  }
  check_shape(saved.mean, p.saved_shape(), "layernorm saved.mean");
  check_shape(saved.rstd, p.saved_shape(), "layernorm saved.rstd");
  check_shape(y, p.y_shape(), "layernorm output");
}

void check_layernorm_backward(const LayerNormParams& p, const TensorView& x,
                              const TensorView& gamma, const LayerNormSaved& saved,
                              const TensorView& dy, const TensorView& dx, const TensorView& dgamma,
                              const TensorView& dbeta) {
  check_layernorm_params(p);
  check_shape(x, p.x_shape(), "layernorm input");
  if (p.affine) check_shape(gamma, p.param_shape(), "layernorm gamma (affine = true)");
  check_shape(saved.mean, p.saved_shape(), "layernorm saved.mean");
  check_shape(saved.rstd, p.saved_shape(), "layernorm saved.rstd");
  check_shape(dy, p.y_shape(), "layernorm output gradient");
  check_optional_shape(dx, p.x_shape(), "layernorm input gradient");
  if (p.affine) {
    check_optional_shape(dgamma, p.param_shape(), "layernorm gamma gradient");
    check_optional_shape(dbeta, p.param_shape(), "layernorm beta gradient");
  }
}

void layernorm_forward(const LayerNormParams& p, const TensorView& x, const TensorView& gamma,
                       const TensorView& beta, const LayerNormSaved& saved, const TensorView& y) {
  check_layernorm(p, x, gamma, beta, saved, y);
  HFTA_DISPATCH("layernorm_forward", x.device, cpu::layernorm_forward(p, x, gamma, beta, saved, y));
}

void layernorm_backward(const LayerNormParams& p, const TensorView& x, const TensorView& gamma,
                        const LayerNormSaved& saved, const TensorView& dy, const TensorView& dx,
                        const TensorView& dgamma, const TensorView& dbeta) {
  check_layernorm_backward(p, x, gamma, saved, dy, dx, dgamma, dbeta);
  HFTA_DISPATCH("layernorm_backward", x.device,
                cpu::layernorm_backward(p, x, gamma, saved, dy, dx, dgamma, dbeta));
}

}  // namespace hfta
