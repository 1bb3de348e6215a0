#include "fused_ops/batchnorm2d.h"

#include <cmath>

#include "fused_ops/dispatch.h"

namespace hfta {

void check_batchnorm2d_params(const BatchNorm2dParams& p) {
  HFTA_CHECK(p.B > 0 && p.N > 0 && p.C > 0 && p.H > 0 && p.W > 0,
             "batchnorm2d sizes must be positive, got B={} N={} C={} H={} W={}", p.B, p.N, p.C, p.H,
             p.W);
  HFTA_CHECK(p.eps > 0.0 && std::isfinite(p.eps),
             "batchnorm2d eps is {}, expected a finite value > 0 (PyTorch's default is 1e-5)",
             p.eps);
  HFTA_CHECK(p.momentum >= 0.0 && p.momentum <= 1.0,
             "batchnorm2d momentum is {}, expected a value in [0, 1] (PyTorch's default is 0.1)",
             p.momentum);
  HFTA_CHECK(!p.training || p.reduction_size() > 1,
             "batchnorm2d in training needs more than one value per channel, got N*H*W = {}*{}*{} "
             "= 1: use a minibatch of at least 2, or eval mode",
             p.N, p.H, p.W);
  HFTA_CHECK(!p.activation || batchnorm_fuses(*p.activation),
             "batchnorm2d cannot fuse {}: only relu, relu6 and leaky_relu with a slope >= 0 (run "
             "the activation as an op of its own)",
             p.activation ? activation_name(p.activation->kind) : "");
}

static void check_running_stats(const BatchNorm2dParams& p, const TensorView& running_mean,
                                const TensorView& running_var) {
  if (p.training) {
    HFTA_CHECK(running_mean.empty() == running_var.empty(),
               "batchnorm2d running_mean is {} but running_var is {}: pass both (to update them) "
               "or neither (to skip the update)",
               running_mean.empty() ? "missing" : "given",
               running_var.empty() ? "missing" : "given");
    check_optional_shape(running_mean, p.param_shape(), "batchnorm2d running_mean");
    check_optional_shape(running_var, p.param_shape(), "batchnorm2d running_var");
  } else {
    check_shape(running_mean, p.param_shape(), "batchnorm2d running_mean (required in eval mode)");
    check_shape(running_var, p.param_shape(), "batchnorm2d running_var (required in eval mode)");
  }
}

static void check_affine(const BatchNorm2dParams& p, const TensorView& gamma, const char* name) {
  if (p.affine) check_shape(gamma, p.param_shape(), name);
}

void check_batchnorm2d(const BatchNorm2dParams& p, const BatchNorm2dForwardArgs& a) {
  check_batchnorm2d_params(p);
  check_shape(a.x, p.x_shape(), "batchnorm2d input");
  check_affine(p, a.gamma, "batchnorm2d gamma (affine = true)");
  check_affine(p, a.beta, "batchnorm2d beta (affine = true)");
  check_running_stats(p, a.running_mean, a.running_var);
  check_shape(a.saved.mean, p.param_shape(), "batchnorm2d saved.mean");
  check_shape(a.saved.rstd, p.param_shape(), "batchnorm2d saved.rstd");
  check_shape(a.y, p.y_shape(), "batchnorm2d output");
  check_device(a.gamma, a.x.device, "batchnorm2d gamma");
  check_device(a.beta, a.x.device, "batchnorm2d beta");
  check_device(a.running_mean, a.x.device, "batchnorm2d running_mean");
  check_device(a.running_var, a.x.device, "batchnorm2d running_var");
  check_device(a.saved.mean, a.x.device, "batchnorm2d saved.mean");
  check_device(a.saved.rstd, a.x.device, "batchnorm2d saved.rstd");
  check_device(a.y, a.x.device, "batchnorm2d output");
}

void check_batchnorm2d_backward(const BatchNorm2dParams& p, const BatchNorm2dBackwardArgs& a) {
  check_batchnorm2d_params(p);
  check_shape(a.x, p.x_shape(), "batchnorm2d input");
  check_affine(p, a.gamma, "batchnorm2d gamma (affine = true)");
  check_shape(a.saved.mean, p.param_shape(), "batchnorm2d saved.mean");
  check_shape(a.saved.rstd, p.param_shape(), "batchnorm2d saved.rstd");
  check_shape(a.dy, p.y_shape(), "batchnorm2d output gradient");
  if (p.activation) {
    check_shape(a.y, p.y_shape(), "batchnorm2d output (fused activation)");
    check_affine(p, a.beta, "batchnorm2d beta (fused activation, affine = true)");
  }
  check_optional_shape(a.dx, p.x_shape(), "batchnorm2d input gradient");
  if (p.affine) {
    check_optional_shape(a.dgamma, p.param_shape(), "batchnorm2d gamma gradient");
    check_optional_shape(a.dbeta, p.param_shape(), "batchnorm2d beta gradient");
  }
  check_device(a.gamma, a.x.device, "batchnorm2d gamma");
  check_device(a.saved.mean, a.x.device, "batchnorm2d saved.mean");
  check_device(a.saved.rstd, a.x.device, "batchnorm2d saved.rstd");
  check_device(a.dy, a.x.device, "batchnorm2d output gradient");
  check_device(a.y, a.x.device, "batchnorm2d output");
  check_device(a.beta, a.x.device, "batchnorm2d beta");
  check_device(a.dx, a.x.device, "batchnorm2d input gradient");
  check_device(a.dgamma, a.x.device, "batchnorm2d gamma gradient");
  check_device(a.dbeta, a.x.device, "batchnorm2d beta gradient");
}

void batchnorm2d_forward(const BatchNorm2dParams& p, const BatchNorm2dForwardArgs& a) {
  check_batchnorm2d(p, a);
  check_fused_activation_device(p.activation, a.x.device, "batchnorm2d");
  HFTA_DISPATCH_CUDA("batchnorm2d_forward", a.x.device, cpu::batchnorm2d_forward(p, a),
                     cuda::batchnorm2d_forward(p, a));
}

void batchnorm2d_backward(const BatchNorm2dParams& p, const BatchNorm2dBackwardArgs& a) {
  check_batchnorm2d_backward(p, a);
  check_fused_activation_device(p.activation, a.x.device, "batchnorm2d");
  HFTA_DISPATCH_CUDA("batchnorm2d_backward", a.x.device, cpu::batchnorm2d_backward(p, a),
                     cuda::batchnorm2d_backward(p, a));
}

}  // namespace hfta
