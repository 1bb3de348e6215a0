// CUDA fused pooling (the contract is fused_ops/pool2d.h): max (with argmax) and average pooling,
// and adaptive average pooling, forward and backward, through the kernels of
// pool2d_kernels.cu. Pooling acts on each of the N*B*C planes alone, so B only lengthens the
// launch. Backward gathers (one thread per input element, no atomics): deterministic.
#include "fused_ops/pool2d.h"

#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/kernels.h"
#include "fused_ops/cuda/pool2d_geometry.h"

namespace hfta::cuda {

void pool2d_forward(const Pool2dParams& p, const Pool2dForwardArgs& a) {
  const pool_math::PoolGeometry g = pool_geometry(p);
  if (p.kind == PoolKind::kMax)
    check(kernels::max_pool_forward(g, a.x.data, a.y.data, a.saved.argmax.data, stream()),
          "max_pool_forward kernel launch");
  else
    check(kernels::avg_pool_forward(g, a.x.data, a.y.data, stream()),
          "avg_pool_forward kernel launch");
}

void pool2d_backward(const Pool2dParams& p, const Pool2dBackwardArgs& a) {
  const pool_math::PoolGeometry g = pool_geometry(p);
  if (p.kind == PoolKind::kMax)
    check(kernels::max_pool_backward(g, a.saved.argmax.data, a.dy.data, a.dx.data, a.accumulate_dx,
                                     stream()),
          "max_pool_backward kernel launch");
  else
    check(kernels::avg_pool_backward(g, a.dy.data, a.dx.data, a.accumulate_dx, stream()),
          "avg_pool_backward kernel launch");
}

void adaptive_avg_pool2d_forward(const AdaptiveAvgPool2dParams& p,
                                 const AdaptiveAvgPool2dForwardArgs& a) {
  check(kernels::adaptive_avg_pool_forward(adaptive_pool_geometry(p), a.x.data, a.y.data, stream()),
        "adaptive_avg_pool_forward kernel launch");
}

void adaptive_avg_pool2d_backward(const AdaptiveAvgPool2dParams& p,
                                  const AdaptiveAvgPool2dBackwardArgs& a) {
  check(kernels::adaptive_avg_pool_backward(adaptive_pool_geometry(p), a.dy.data, a.dx.data,
                                            a.accumulate_dx, stream()),
        "adaptive_avg_pool_backward kernel launch");
}

}  // namespace hfta::cuda
