// ReLU's kernels: one thread per element, grid-stride.
#include <algorithm>

#include "fused_ops/cuda/kernels.h"
#include "fused_ops/cuda/launch.cuh"

namespace hfta::cuda::kernels {

namespace {

__global__ void relu_forward_kernel(const float* x, float* y, int64_t n) {
  for_each_index(n, [&](int64_t i) {
    const float v = x[i];
    y[i] = v < 0.0f ? 0.0f : v;
  });
}

// Each element is read before it is written, so dx may be dy.
__global__ void relu_backward_kernel(const float* y, const float* dy, float* dx, int64_t n,
                                     bool accumulate) {
  for_each_index(n, [&](int64_t i) {
    const float grad = dy[i] * (y[i] > 0.0f ? 1.0f : 0.0f);
    dx[i] = accumulate ? dx[i] + grad : grad;
  });
}

}  // namespace

cudaError_t relu_forward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  relu_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t relu_backward(const float* y, const float* dy, float* dx, int64_t n, bool accumulate,
                          cudaStream_t stream) {
  relu_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(y, dy, dx, n, accumulate);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
