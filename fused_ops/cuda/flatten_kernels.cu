// Flatten's kernels: one thread per element of y (grid-stride), through flatten_math.h's index map.
#include "fused_ops/cuda/flatten_math.h"
#include "fused_ops/cuda/kernels.h"
#include "fused_ops/cuda/launch.cuh"

namespace hfta::cuda::kernels {

namespace {

__global__ void flatten_forward_kernel(const float* __restrict__ x, float* __restrict__ y,
                                       int64_t B, int64_t N, int64_t F) {
  const int64_t total = B * N * F;
  for_each_index(total, [&](int64_t i) { y[i] = x[flatten_math::x_index(i, B, N, F)]; });
}

// A permutation: each dx element is read and written by exactly one thread.
__global__ void flatten_backward_kernel(const float* __restrict__ dy, float* __restrict__ dx,
                                        int64_t B, int64_t N, int64_t F, bool accumulate) {
  const int64_t total = B * N * F;
  for_each_index(total, [&](int64_t i) {
    const int64_t j = flatten_math::x_index(i, B, N, F);
    dx[j] = flatten_math::input_grad(accumulate ? dx[j] : 0.0f, dy[i], accumulate);
  });
}

}  // namespace

cudaError_t flatten_forward(const float* x, float* y, int64_t B, int64_t N, int64_t F,
                            cudaStream_t stream) {
  flatten_forward_kernel<<<grid_for(B * N * F), kThreads, 0, stream>>>(x, y, B, N, F);
  return cudaGetLastError();
}

cudaError_t flatten_backward(const float* dy, float* dx, int64_t B, int64_t N, int64_t F,
                             bool accumulate, cudaStream_t stream) {
  flatten_backward_kernel<<<grid_for(B * N * F), kThreads, 0, stream>>>(dy, dx, B, N, F,
                                                                        accumulate);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
