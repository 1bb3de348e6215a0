// CUDA fused repeat over points (the contract is fused_ops/repeat_points.h), through the kernels
// of repeat_points_kernels.cu: the CPU op's bits (repeat_points_math.h).
#include "fused_ops/repeat_points.h"

#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/repeat_points_kernels.h"

namespace hfta::cuda {

void repeat_points_forward(const RepeatPointsParams& p, const RepeatPointsForwardArgs& a) {
  check(kernels::repeat_points_forward(a.x.data, a.y.data, p.B * p.N, p.L, p.C, stream()),
        "repeat_points_forward kernel launch");
}

void repeat_points_backward(const RepeatPointsParams& p, const RepeatPointsBackwardArgs& a) {
  check(kernels::repeat_points_backward(a.dy.data, a.dx.data, p.B * p.N, p.L, p.C, a.accumulate_dx,
                                        stream()),
        "repeat_points_backward kernel launch");
}

}  // namespace hfta::cuda
