// The fused add's kernels: one thread per element, grid-stride, running add_math.h's functions.
#include "fused_ops/cuda/add_math.h"
#include "fused_ops/cuda/kernels.h"
#include "fused_ops/cuda/launch.cuh"

namespace hfta::cuda::kernels {

namespace {

__global__ void add_forward_kernel(const float* a, const float* b, float* y, int64_t n) {
  for_each_index(n, [&](int64_t i) { add_math::add_forward_at(a, b, y, i); });
}

__global__ void add_backward_kernel(const float* dy, float* dx, bool accumulate, int64_t n) {
  for_each_index(n, [&](int64_t i) { add_math::add_backward_at(dy, dx, accumulate, i); });
}

}  // namespace

cudaError_t add_forward(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream) {
  add_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, b, y, n);
  return cudaGetLastError();
}

cudaError_t add_backward(const float* dy, float* dx, int64_t n, bool accumulate,
                         cudaStream_t stream) {
  add_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(dy, dx, accumulate, n);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
