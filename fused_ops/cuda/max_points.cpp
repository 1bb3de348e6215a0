// CUDA fused max over points (the contract is fused_ops/max_points.h), through the kernels of
// max_points_kernels.cu: the CPU op's bits (max_points_math.h).
#include "fused_ops/max_points.h"

#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/kernels.h"

namespace hfta::cuda {

void max_over_points_forward(const MaxOverPointsParams& p, const MaxOverPointsForwardArgs& a) {
  check(kernels::max_points_forward(a.x.data, a.y.data,
                                    a.saved.argmax.empty() ? nullptr : a.saved.argmax.data,
                                    p.B * p.N, p.L, p.C, stream()),
        "max_over_points_forward kernel launch");
}

void max_over_points_backward(const MaxOverPointsParams& p, const MaxOverPointsBackwardArgs& a) {
  check(kernels::max_points_backward(a.saved.argmax.data, a.dy.data, a.dx.data, p.B * p.N, p.L, p.C,
                                     a.accumulate_dx, stream()),
        "max_over_points_backward kernel launch");
}

}  // namespace hfta::cuda
