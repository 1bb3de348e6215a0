// CUDA fused BatchNorm2d (the contract is fused_ops/batchnorm2d.h): one block per channel of the
// B*C channels, each reducing its statistics or gradient sums in a fixed order and writing its
// outputs (fused_ops/cuda/batchnorm2d_kernels.cu, arithmetic in batchnorm2d_math.h).
#include "fused_ops/batchnorm2d.h"

#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/kernels.h"

namespace hfta::cuda {

namespace {

float* data_or_null(const TensorView& v) { return v.empty() ? nullptr : v.data; }

}  // namespace

void batchnorm2d_forward(const BatchNorm2dParams& p, const BatchNorm2dForwardArgs& a) {
  check(kernels::batchnorm2d_forward(a.x.data, p.affine ? a.gamma.data : nullptr,
                                     p.affine ? a.beta.data : nullptr, data_or_null(a.running_mean),
                                     data_or_null(a.running_var), a.saved.mean.data,
                                     a.saved.rstd.data, a.y.data, p.N, p.B * p.C, p.H * p.W, p.eps,
                                     p.momentum, p.training, stream()),
        "batchnorm2d_forward kernel launch");
}

void batchnorm2d_backward(const BatchNorm2dParams& p, const BatchNorm2dBackwardArgs& a) {
  check(kernels::batchnorm2d_backward(
            a.x.data, p.affine ? a.gamma.data : nullptr, a.saved.mean.data, a.saved.rstd.data,
            a.dy.data, data_or_null(a.dx), p.affine ? data_or_null(a.dgamma) : nullptr,
            p.affine ? data_or_null(a.dbeta) : nullptr, p.N, p.B * p.C, p.H * p.W, p.training,
            a.accumulate_dx, stream()),
        "batchnorm2d_backward kernel launch");
}

}  // namespace hfta::cuda
