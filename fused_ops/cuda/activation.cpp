// CUDA elementwise activations (the contract is fused_ops/activation.h): ReLU, LeakyReLU, ReLU6,
// Hardswish and Hardsigmoid, with the CPU op's arithmetic (activation_math.h). GELU, tanh and
// sigmoid raise: the CPU computes them with oneDNN's polynomials, which a kernel would have to
// match. Elementwise, so B and the layout do not matter.
#include "fused_ops/activation.h"

#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/activation_math.h"
#include "fused_ops/cuda/kernels.h"

namespace hfta::cuda {

namespace {

int kernel_kind(const ActivationParams& p, const char* op) {
  switch (p.kind) {
    case ActivationKind::kRelu:
      return activation_math::kRelu;
    case ActivationKind::kLeakyRelu:
      return activation_math::kLeakyRelu;
    case ActivationKind::kRelu6:
      return activation_math::kRelu6;
    case ActivationKind::kHardswish:
      return activation_math::kHardswish;
    case ActivationKind::kHardsigmoid:
      return activation_math::kHardsigmoid;
    default:
      fail(
          "{} has no CUDA kernel for {} yet (relu, leaky_relu, relu6, hardswish and hardsigmoid "
          "have one; docs/cuda.md): keep its tensors on the CPU",
          op, activation_name(p.kind));
  }
}

}  // namespace

void activation_forward(const ActivationParams& p, const ActivationForwardArgs& a) {
  const int kind = kernel_kind(p, "activation_forward");
  check(kernels::activation_forward(kind, p.negative_slope, a.x.data, a.y.data, a.x.numel(),
                                    stream()),
        "activation_forward kernel launch");
}

void activation_backward(const ActivationParams& p, const ActivationBackwardArgs& a) {
  const int kind = kernel_kind(p, "activation_backward");
  const TensorView& v = p.backward_reads_output() ? a.y : a.x;
  check(kernels::activation_backward(kind, p.negative_slope, v.data, a.dy.data, a.dx.data,
                                     a.dy.numel(), a.accumulate_dx, stream()),
        "activation_backward kernel launch");
}

}  // namespace hfta::cuda
