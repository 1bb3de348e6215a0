// The fused dropout's kernels: one thread per element, grid-stride, running dropout_math.h's
// functions on a mask drawn on the host.
#include "fused_ops/cuda/dropout_math.h"
#include "fused_ops/cuda/kernels.h"
#include "fused_ops/cuda/launch.cuh"

namespace hfta::cuda::kernels {

namespace {

__global__ void dropout_forward_kernel(const float* x, const float* mask, float* y, int64_t n) {
  for_each_index(n, [&](int64_t i) { dropout_math::dropout_forward_at(x, mask, y, i); });
}

__global__ void dropout_backward_kernel(const float* mask, const float* dy, float* dx,
                                        bool accumulate, int64_t n) {
  for_each_index(
      n, [&](int64_t i) { dropout_math::dropout_backward_at(mask, dy, dx, accumulate, i); });
}

}  // namespace

cudaError_t dropout_forward(const float* x, const float* mask, float* y, int64_t n,
                            cudaStream_t stream) {
  dropout_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, mask, y, n);
  return cudaGetLastError();
}

cudaError_t dropout_backward(const float* mask, const float* dy, float* dx, int64_t n,
                             bool accumulate, cudaStream_t stream) {
  dropout_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(mask, dy, dx, accumulate, n);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
