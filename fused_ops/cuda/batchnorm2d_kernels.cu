// BatchNorm2d's kernels on [N, B*C, H*W] (batchnorm_kernels.cuh, one block per channel, fixed-
// order sums); the arithmetic is batchnorm2d_math.h's, shared with the host tests.
#include "fused_ops/cuda/batchnorm2d_math.h"
#include "fused_ops/cuda/batchnorm_kernels.cuh"
#include "fused_ops/cuda/kernels.h"

namespace hfta::cuda::kernels {

cudaError_t batchnorm2d_forward(const float* x, const float* gamma, const float* beta,
                                float* running_mean, float* running_var, float* saved_mean,
                                float* saved_rstd, float* y, int64_t N, int64_t channels,
                                int64_t hw, double eps, double momentum, bool training,
                                cudaStream_t stream) {
  bn_kernels::
      batchnorm_forward_kernel<<<static_cast<unsigned>(channels), bn::kThreads, 0, stream>>>(
          x, gamma, beta, running_mean, running_var, saved_mean, saved_rstd, y,
          bn::Geometry{N, channels, hw}, eps, momentum, training);
  return cudaGetLastError();
}

cudaError_t batchnorm2d_backward(const float* x, const float* gamma, const float* saved_mean,
                                 const float* saved_rstd, const float* dy, float* dx, float* dgamma,
                                 float* dbeta, int64_t N, int64_t channels, int64_t hw,
                                 bool training, bool accumulate, cudaStream_t stream) {
  const bool need_sums = training || dgamma != nullptr || dbeta != nullptr;
  bn_kernels::
      batchnorm_backward_kernel<<<static_cast<unsigned>(channels), bn::kThreads, 0, stream>>>(
          x, gamma, saved_mean, saved_rstd, dy, dx, dgamma, dbeta, bn::Geometry{N, channels, hw},
          training, need_sums, accumulate);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
