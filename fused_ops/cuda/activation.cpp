// CUDA elementwise activations (the contract is fused_ops/activation.h): ReLU, LeakyReLU, ReLU6,
// Hardswish and Hardsigmoid with the CPU op's arithmetic, bit for bit; tanh, sigmoid and GELU with
// accurate libm formulas, within a few ulp of the CPU's oneDNN polynomials (activation_math.h).
// Elementwise, so B and the layout do not matter: model b gets the same bits at any B.
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
    case ActivationKind::kTanh:
      return activation_math::kTanh;
    case ActivationKind::kSigmoid:
      return activation_math::kSigmoid;
    case ActivationKind::kGelu:
      return activation_math::kGelu;
  }
  fail(
      "{} got activation kind {}, which has no CUDA kernel: fused_ops/activation.h lists the kinds",
      op, static_cast<int>(p.kind));
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
