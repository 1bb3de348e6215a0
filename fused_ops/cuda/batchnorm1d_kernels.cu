// BatchNorm1d's kernels on the rows layout [B, R, C] (batchnorm_kernels.cuh, one block per
// channel b*C + c, fixed-order sums); the arithmetic is batchnorm1d_math.h's and
// batchnorm2d_math.h's, shared with the host tests.
#include "fused_ops/cuda/batchnorm1d_math.h"
#include "fused_ops/cuda/batchnorm_kernels.cuh"
#include "fused_ops/cuda/kernels.h"

namespace hfta::cuda::kernels {

cudaError_t batchnorm1d_forward(const float* x, const float* gamma, const float* beta,
                                float* running_mean, float* running_var, float* saved_mean,
                                float* saved_rstd, float* y, int64_t B, int64_t R, int64_t C,
                                double eps, double momentum, bool training, cudaStream_t stream) {
  bn_kernels::batchnorm_forward_kernel<<<static_cast<unsigned>(B * C), bn::kThreads, 0, stream>>>(
      x, gamma, beta, running_mean, running_var, saved_mean, saved_rstd, y, bn1::RowsGeometry{R, C},
      eps, momentum, training);
  return cudaGetLastError();
}

cudaError_t batchnorm1d_backward(const float* x, const float* gamma, const float* saved_mean,
                                 const float* saved_rstd, const float* dy, float* dx, float* dgamma,
                                 float* dbeta, int64_t B, int64_t R, int64_t C, bool training,
                                 bool accumulate, cudaStream_t stream) {
  const bool need_sums = training || dgamma != nullptr || dbeta != nullptr;
  bn_kernels::batchnorm_backward_kernel<<<static_cast<unsigned>(B * C), bn::kThreads, 0, stream>>>(
      x, gamma, saved_mean, saved_rstd, dy, dx, dgamma, dbeta, bn1::RowsGeometry{R, C}, training,
      need_sums, accumulate);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
