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
  }
  return "unknown";
}

static void check_activation_params(const ActivationParams& p) {
  HFTA_CHECK(p.kind != ActivationKind::kLeakyRelu || std::isfinite(p.negative_slope),
             "leaky_relu negative_slope is {}, expected a finite number (PyTorch's default is "
             "0.01)",
             p.negative_slope);
}

void check_activation(const ActivationParams& p, const TensorView& x, const TensorView& y) {
  check_activation_params(p);
  HFTA_CHECK(x.data != nullptr, "{} input is missing", activation_name(p.kind));
  check_shape(y, x.shape, fmt::format("{} output", activation_name(p.kind)));
}

void check_activation_backward(const ActivationParams& p, const TensorView& x, const TensorView& y,
                               const TensorView& dy, const TensorView& dx) {
  check_activation_params(p);
  const char* name = activation_name(p.kind);
  HFTA_CHECK(dy.data != nullptr, "{} output gradient is missing", name);
  check_shape(dx, dy.shape, fmt::format("{} input gradient", name));
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
}

void activation_forward(const ActivationParams& p, const TensorView& x, const TensorView& y) {
  check_activation(p, x, y);
  HFTA_DISPATCH("activation_forward", x.device, cpu::activation_forward(p, x, y));
}

void activation_backward(const ActivationParams& p, const TensorView& x, const TensorView& y,
                         const TensorView& dy, const TensorView& dx) {
  check_activation_backward(p, x, y, dy, dx);
  HFTA_DISPATCH("activation_backward", dy.device, cpu::activation_backward(p, x, y, dy, dx));
}

}  // namespace hfta
