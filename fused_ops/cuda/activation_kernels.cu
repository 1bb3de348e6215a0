// The elementwise activations' kernels: one thread per element, grid-stride, the arithmetic of
// activation_math.h.
#include "fused_ops/cuda/activation_math.h"
#include "fused_ops/cuda/kernels.h"
#include "fused_ops/cuda/launch.cuh"

namespace hfta::cuda::kernels {

namespace {

__global__ void activation_forward_kernel(int kind, float slope, const float* x, float* y,
                                          int64_t n) {
  for_each_index(n,
                 [&](int64_t i) { activation_math::activation_forward_at(kind, slope, x, y, i); });
}

// Each element is read before it is written, so dx may be dy.
__global__ void activation_backward_kernel(int kind, float slope, const float* v, const float* dy,
                                           float* dx, int64_t n, bool accumulate) {
  for_each_index(n, [&](int64_t i) {
    activation_math::activation_backward_at(kind, slope, v, dy, dx, accumulate, i);
  });
}

}  // namespace

cudaError_t activation_forward(int kind, float slope, const float* x, float* y, int64_t n,
                               cudaStream_t stream) {
  activation_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(kind, slope, x, y, n);
  return cudaGetLastError();
}

cudaError_t activation_backward(int kind, float slope, const float* v, const float* dy, float* dx,
                                int64_t n, bool accumulate, cudaStream_t stream) {
  activation_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(kind, slope, v, dy, dx, n,
                                                                   accumulate);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
