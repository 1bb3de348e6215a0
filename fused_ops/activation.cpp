#include "fused_ops/activation.h"

#include <cmath>

#include "fused_ops/dispatch.h"

namespace hfta {

const char* activation_name(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::kRelu:
      return "relu";
    case ActivationKind::kLeakyRelu:
      return "leaky_relu";
    case ActivationKind::kGelu:
      return "gelu";
    case ActivationKind::kTanh:
      return "tanh";
    case ActivationKind::kSigmoid:
      return "sigmoid";
    case ActivationKind::kRelu6:
      return "relu6";
    case ActivationKind::kHardswish:
      return "hardswish";
    case ActivationKind::kHardsigmoid:
      return "hardsigmoid";
  }
  return "unknown";
}

bool batchnorm_fuses(const ActivationParams& a) {
  switch (a.kind) {
    case ActivationKind::kRelu:
    case ActivationKind::kRelu6:
      return true;
    case ActivationKind::kLeakyRelu:
      return std::isfinite(a.negative_slope) && a.negative_slope >= 0.0f;
    default:
      return false;
  }
}

void check_fused_activation_device(const std::optional<ActivationParams>& activation, Device device,
                                   const char* op) {
  HFTA_CHECK(!activation || device == Device::kCpu,
             "{} with a fused {} runs on the CPU only: run the activation as an op of its own on "
             "a device",
             op, activation ? activation_name(activation->kind) : "");
}

static void check_activation_params(const ActivationParams& p) {
  HFTA_CHECK(p.kind != ActivationKind::kLeakyRelu || std::isfinite(p.negative_slope),
             "leaky_relu negative_slope is {}, expected a finite number (PyTorch's default is "
             "0.01)",
             p.negative_slope);
}

void check_activation(const ActivationParams& p, const ActivationForwardArgs& a) {
  check_activation_params(p);
  const TensorView &x = a.x, &y = a.y;
  HFTA_CHECK(x.data != nullptr, "{} input is missing", activation_name(p.kind));
  check_shape(y, x.shape, fmt::format("{} output", activation_name(p.kind)));
  check_device(y, x.device, fmt::format("{} output", activation_name(p.kind)));
}

void check_activation_backward(const ActivationParams& p, const ActivationBackwardArgs& a) {
  check_activation_params(p);
  const TensorView &x = a.x, &y = a.y, &dy = a.dy, &dx = a.dx;
  const char* name = activation_name(p.kind);
  HFTA_CHECK(dy.data != nullptr, "{} output gradient is missing", name);
  check_shape(dx, dy.shape, fmt::format("{} input gradient", name));
  HFTA_CHECK(!a.accumulate_dx || dx.data != dy.data,
             "{} backward with accumulate_dx got dx and dy in one buffer: accumulating needs dx "
             "apart from dy",
             name);
  if (p.backward_reads_output()) {
    check_shape(
        y, dy.shape,
        fmt::format("{} output (its backward reads the output; the input may be empty)", name));
    check_optional_shape(x, dy.shape, fmt::format("{} input", name));
  } else {
    check_shape(x, dy.shape,
                fmt::format("{} input (its backward reads the input, so do not run its forward "
                            "in place)",
                            name));
    check_optional_shape(y, dy.shape, fmt::format("{} output", name));
  }
  check_device(x, dy.device, fmt::format("{} input", name));
  check_device(y, dy.device, fmt::format("{} output", name));
  check_device(dx, dy.device, fmt::format("{} input gradient", name));
}

void activation_forward(const ActivationParams& p, const ActivationForwardArgs& a) {
  check_activation(p, a);
  HFTA_DISPATCH_CUDA("activation_forward", a.x.device, cpu::activation_forward(p, a),
                     cuda::activation_forward(p, a));
}

void activation_backward(const ActivationParams& p, const ActivationBackwardArgs& a) {
  check_activation_backward(p, a);
  HFTA_DISPATCH_CUDA("activation_backward", a.dy.device, cpu::activation_backward(p, a),
                     cuda::activation_backward(p, a));
}

}  // namespace hfta
