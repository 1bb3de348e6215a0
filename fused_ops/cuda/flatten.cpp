// CUDA flatten (the contract is fused_ops/flatten.h): the permutation between the conv layout
// [N, B*C, H, W] and the linear layout [B, N, C*H*W], one thread per element
// (fused_ops/cuda/flatten_kernels.cu, index map in flatten_math.h).
#include "fused_ops/flatten.h"

#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/kernels.h"

namespace hfta::cuda {

void flatten_forward(const FlattenParams& p, const FlattenForwardArgs& a) {
  check(kernels::flatten_forward(a.x.data, a.y.data, p.B, p.N, p.features(), stream()),
        "flatten_forward kernel launch");
}

void flatten_backward(const FlattenParams& p, const FlattenBackwardArgs& a) {
  check(kernels::flatten_backward(a.dy.data, a.dx.data, p.B, p.N, p.features(), a.accumulate_dx,
                                  stream()),
        "flatten_backward kernel launch");
}

}  // namespace hfta::cuda
