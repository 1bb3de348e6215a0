// CUDA fused BatchNorm1d on the rows layout (the contract is fused_ops/batchnorm1d.h): one block
// per channel of the B*C channels, each reducing its statistics or gradient sums in a fixed order
// and writing its outputs (fused_ops/cuda/batchnorm1d_kernels.cu, arithmetic in
// batchnorm1d_math.h and batchnorm2d_math.h).
#include "fused_ops/batchnorm1d.h"

#include <limits>

#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/kernels.h"

namespace hfta::cuda {

namespace {

float* data_or_null(const TensorView& v) { return v.empty() ? nullptr : v.data; }

// One block per channel: the grid's x dimension holds up to 2^31 - 1 blocks.
void check_grid(const BatchNorm1dParams& p) {
  HFTA_CHECK(p.B * p.C <= std::numeric_limits<int32_t>::max(),
             "CUDA batchnorm1d: B*C = {}*{} channels exceed the kernel's grid (2^31 - 1 blocks): "
             "train fewer models at once",
             p.B, p.C);
}

}  // namespace

void batchnorm1d_forward(const BatchNorm1dParams& p, const BatchNorm1dForwardArgs& a) {
  check_grid(p);
  check(kernels::batchnorm1d_forward(
            a.x.data, p.affine ? a.gamma.data : nullptr, p.affine ? a.beta.data : nullptr,
            data_or_null(a.running_mean), data_or_null(a.running_var), a.saved.mean.data,
            a.saved.rstd.data, a.y.data, p.B, p.R, p.C, p.eps, p.momentum, p.training, stream()),
        "batchnorm1d_forward kernel launch");
}

void batchnorm1d_backward(const BatchNorm1dParams& p, const BatchNorm1dBackwardArgs& a) {
  check_grid(p);
  check(kernels::batchnorm1d_backward(
            a.x.data, p.affine ? a.gamma.data : nullptr, a.saved.mean.data, a.saved.rstd.data,
            a.dy.data, data_or_null(a.dx), p.affine ? data_or_null(a.dgamma) : nullptr,
            p.affine ? data_or_null(a.dbeta) : nullptr, p.B, p.R, p.C, p.training, a.accumulate_dx,
            stream()),
        "batchnorm1d_backward kernel launch");
}

}  // namespace hfta::cuda
