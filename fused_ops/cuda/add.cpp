// CUDA fused add (the contract is fused_ops/add.h), through the kernels of add_kernels.cu.
// Elementwise, so B and the layout do not matter.
#include "fused_ops/add.h"

#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/kernels.h"

namespace hfta::cuda {

void add_forward(const AddForwardArgs& a) {
  check(kernels::add_forward(a.a.data, a.b.data, a.y.data, a.y.numel(), stream()),
        "add_forward kernel launch");
}

void add_backward(const AddBackwardArgs& a) {
  check(kernels::add_backward(a.dy.data, a.dx.data, a.dx.numel(), a.accumulate_dx, stream()),
        "add_backward kernel launch");
}

}  // namespace hfta::cuda
