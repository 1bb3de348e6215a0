#include "fused_ops/batchnorm1d.h"

#include <cmath>

#include "fused_ops/dispatch.h"

namespace hfta {

void check_batchnorm1d_params(const BatchNorm1dParams& p) {
  HFTA_CHECK(p.B > 0 && p.R > 0 && p.C > 0,
             "batchnorm1d sizes must be positive, got B={} R={} C={}", p.B, p.R, p.C);
  HFTA_CHECK(p.eps > 0.0 && std::isfinite(p.eps),
             "batchnorm1d eps is {}, expected a finite value > 0 (PyTorch's default is 1e-5)",
             p.eps);
  HFTA_CHECK(p.momentum >= 0.0 && p.momentum <= 1.0,
             "batchnorm1d momentum is {}, expected a value in [0, 1] (PyTorch's default is 0.1)",
             p.momentum);
  HFTA_CHECK(!p.training || p.R > 1,
             "batchnorm1d in training needs more than one value per channel, got R = 1 row per "
             "model: use a minibatch of at least 2, or eval mode");
  HFTA_CHECK(!p.activation || batchnorm_fuses(*p.activation),
             "batchnorm1d cannot fuse {}: only relu, relu6 and leaky_relu with a slope >= 0 (run "
             "the activation as an op of its own)",
             p.activation ? activation_name(p.activation->kind) : "");
}

static void check_running_stats(const BatchNorm1dParams& p, const TensorView& running_mean,
                                const TensorView& running_var) {
  if (p.training) {
    HFTA_CHECK(running_mean.empty() == running_var.empty(),
               "batchnorm1d running_mean is {} but running_var is {}: pass both (to update them) "
               "or neither (to skip the update)",
               running_mean.empty() ? "missing" : "given",
               running_var.empty() ? "missing" : "given");
    check_optional_shape(running_mean, p.param_shape(), "batchnorm1d running_mean");
    check_optional_shape(running_var, p.param_shape(), "batchnorm1d running_var");
  } else {
    check_shape(running_mean, p.param_shape(), "batchnorm1d running_mean (required in eval mode)");
    check_shape(running_var, p.param_shape(), "batchnorm1d running_var (required in eval mode)");
  }
}

void check_batchnorm1d(const BatchNorm1dParams& p, const BatchNorm1dForwardArgs& a) {
  check_batchnorm1d_params(p);
  check_shape(a.x, p.x_shape(), "batchnorm1d input");
  if (p.affine) {
    check_shape(a.gamma, p.param_shape(), "batchnorm1d gamma (affine = true)");
    check_shape(a.beta, p.param_shape(), "batchnorm1d beta (affine = true)");
  }
  check_running_stats(p, a.running_mean, a.running_var);
  check_shape(a.saved.mean, p.param_shape(), "batchnorm1d saved.mean");
  check_shape(a.saved.rstd, p.param_shape(), "batchnorm1d saved.rstd");
  check_shape(a.y, p.y_shape(), "batchnorm1d output");
  check_device(a.gamma, a.x.device, "batchnorm1d gamma");
  check_device(a.beta, a.x.device, "batchnorm1d beta");
  check_device(a.running_mean, a.x.device, "batchnorm1d running_mean");
  check_device(a.running_var, a.x.device, "batchnorm1d running_var");
  check_device(a.saved.mean, a.x.device, "batchnorm1d saved.mean");
  check_device(a.saved.rstd, a.x.device, "batchnorm1d saved.rstd");
  check_device(a.y, a.x.device, "batchnorm1d output");
}

void check_batchnorm1d_backward(const BatchNorm1dParams& p, const BatchNorm1dBackwardArgs& a) {
  check_batchnorm1d_params(p);
  check_shape(a.x, p.x_shape(), "batchnorm1d input");
  if (p.affine) check_shape(a.gamma, p.param_shape(), "batchnorm1d gamma (affine = true)");
  check_shape(a.saved.mean, p.param_shape(), "batchnorm1d saved.mean");
  check_shape(a.saved.rstd, p.param_shape(), "batchnorm1d saved.rstd");
  check_shape(a.dy, p.y_shape(), "batchnorm1d output gradient");
  if (p.activation) {
    check_shape(a.y, p.y_shape(), "batchnorm1d output (fused activation)");
    if (p.affine) check_shape(a.beta, p.param_shape(), "batchnorm1d beta (fused activation)");
  }
  check_optional_shape(a.dx, p.x_shape(), "batchnorm1d input gradient");
  if (p.affine) {
    check_optional_shape(a.dgamma, p.param_shape(), "batchnorm1d gamma gradient");
    check_optional_shape(a.dbeta, p.param_shape(), "batchnorm1d beta gradient");
  }
  check_device(a.gamma, a.x.device, "batchnorm1d gamma");
  check_device(a.saved.mean, a.x.device, "batchnorm1d saved.mean");
  check_device(a.saved.rstd, a.x.device, "batchnorm1d saved.rstd");
  check_device(a.dy, a.x.device, "batchnorm1d output gradient");
  check_device(a.y, a.x.device, "batchnorm1d output");
  check_device(a.beta, a.x.device, "batchnorm1d beta");
  check_device(a.dx, a.x.device, "batchnorm1d input gradient");
  check_device(a.dgamma, a.x.device, "batchnorm1d gamma gradient");
  check_device(a.dbeta, a.x.device, "batchnorm1d beta gradient");
}

void batchnorm1d_forward(const BatchNorm1dParams& p, const BatchNorm1dForwardArgs& a) {
  check_batchnorm1d(p, a);
  check_fused_activation_device(p.activation, a.x.device, "batchnorm1d");
  HFTA_DISPATCH_CUDA("batchnorm1d_forward", a.x.device, cpu::batchnorm1d_forward(p, a),
                     cuda::batchnorm1d_forward(p, a));
}

void batchnorm1d_backward(const BatchNorm1dParams& p, const BatchNorm1dBackwardArgs& a) {
  check_batchnorm1d_backward(p, a);
  check_fused_activation_device(p.activation, a.x.device, "batchnorm1d");
  HFTA_DISPATCH_CUDA("batchnorm1d_backward", a.x.device, cpu::batchnorm1d_backward(p, a),
                     cuda::batchnorm1d_backward(p, a));
}

}  // namespace hfta
