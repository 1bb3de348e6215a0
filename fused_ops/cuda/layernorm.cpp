// CUDA fused LayerNorm (the contract is fused_ops/layernorm.h), through the kernels of
// layernorm_kernels.cu: double arithmetic in fixed orders (layernorm_math.h), so every model's
// bits are what it gets alone, and the results are within a few float roundings of the reference
// (the CPU op sums a row in float instead).
#include "fused_ops/cuda/layernorm.h"

#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/layernorm_kernels.h"

namespace hfta::cuda {

namespace {

layernorm_math::LnShape shape_of(const LayerNormParams& p) {
  return {.B = p.B, .N = p.N, .F = p.F, .eps = p.eps, .affine = p.affine};
}

float* or_null(const TensorView& t) { return t.empty() ? nullptr : t.data; }

}  // namespace

void layernorm_forward(const LayerNormParams& p, const LayerNormForwardArgs& a) {
  check(kernels::layernorm_forward(shape_of(p), a.x.data, p.affine ? a.gamma.data : nullptr,
                                   p.affine ? a.beta.data : nullptr, a.saved.mean.data,
                                   a.saved.rstd.data, a.y.data, stream()),
        "layernorm_forward kernel launch");
}

void layernorm_backward(const LayerNormParams& p, const LayerNormBackwardArgs& a) {
  check(kernels::layernorm_backward(
            shape_of(p), a.x.data, p.affine ? a.gamma.data : nullptr, a.saved.mean.data,
            a.saved.rstd.data, a.dy.data, or_null(a.dx), p.affine ? or_null(a.dgamma) : nullptr,
            p.affine ? or_null(a.dbeta) : nullptr, a.accumulate_dx, stream()),
        "layernorm_backward kernel launch");
}

}  // namespace hfta::cuda
