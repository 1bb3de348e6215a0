// CUDA elementwise activations (the contract is fused_ops/activation.h): ReLU so far, through the
// kernels of activation_kernels.cu. Elementwise, so B and the layout do not matter.
#include "fused_ops/activation.h"

#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/kernels.h"

namespace hfta::cuda {

namespace {

void require_relu(const ActivationParams& p, const char* op) {
  HFTA_CHECK(p.kind == ActivationKind::kRelu,
             "{} has no CUDA kernel for {} yet (relu only, docs/cuda.md): keep its tensors on "
             "the CPU",
             op, activation_name(p.kind));
}

}  // namespace

void activation_forward(const ActivationParams& p, const ActivationForwardArgs& a) {
  require_relu(p, "activation_forward");
  check(kernels::relu_forward(a.x.data, a.y.data, a.x.numel(), stream()),
        "relu_forward kernel launch");
}

void activation_backward(const ActivationParams& p, const ActivationBackwardArgs& a) {
  require_relu(p, "activation_backward");
  check(kernels::relu_backward(a.y.data, a.dy.data, a.dx.data, a.dy.numel(), a.accumulate_dx,
                               stream()),
        "relu_backward kernel launch");
}

}  // namespace hfta::cuda
