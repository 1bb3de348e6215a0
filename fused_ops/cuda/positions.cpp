// CUDA fused position encodings (the contract is fused_ops/positions.h), through the kernels of
// positions_kernels.cu: the reference's bits (positions_math.h). The sinusoidal table is read
// from wherever the caller put it on the device, shared by every model.
#include "fused_ops/cuda/positions.h"

#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/positions_kernels.h"

namespace hfta::cuda {

namespace {

positions_math::PosShape shape_of(const PositionsParams& p) {
  return {.B = p.B,
          .n = p.n,
          .T = p.T,
          .D = p.D,
          .P = p.table_rows(),
          .learned = p.kind == PositionKind::kLearned,
          .x_scale = p.x_scale};
}

}  // namespace

void positions_forward(const PositionsParams& p, const PositionsForwardArgs& a) {
  check(kernels::positions_forward(shape_of(p), a.x.data, a.table.data, a.y.data, stream()),
        "positions_forward kernel launch");
}

void positions_backward(const PositionsParams& p, const PositionsBackwardArgs& a) {
  check(kernels::positions_backward(shape_of(p), a.dy.data, a.dx.empty() ? nullptr : a.dx.data,
                                    a.dtable.empty() ? nullptr : a.dtable.data, a.accumulate_dx,
                                    stream()),
        "positions_backward kernel launch");
}

}  // namespace hfta::cuda
