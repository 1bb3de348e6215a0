// Max over points' kernels: forward one thread per output (problem, channel), adjacent threads
// on adjacent channels so each step down the points reads whole rows; backward one thread per
// input element, a gather of its channel's argmax (no atomics). The arithmetic is
// max_points_math.h's.
#include "fused_ops/cuda/kernels.h"
#include "fused_ops/cuda/launch.cuh"
#include "fused_ops/cuda/max_points_math.h"

namespace hfta::cuda::kernels {

namespace {

__global__ void max_points_forward_kernel(const float* x, float* y, int32_t* argmax, int64_t L,
                                          int64_t C, int64_t n) {
  for_each_index(n, [&](int64_t i) { max_points_math::max_at(x, y, argmax, L, C, i); });
}

__global__ void max_points_backward_kernel(const int32_t* argmax, const float* dy, float* dx,
                                           int64_t L, int64_t C, bool accumulate, int64_t n) {
  for_each_index(n,
                 [&](int64_t i) { max_points_math::dx_at(argmax, dy, dx, L, C, accumulate, i); });
}

}  // namespace

cudaError_t max_points_forward(const float* x, float* y, int32_t* argmax, int64_t problems,
                               int64_t L, int64_t C, cudaStream_t stream) {
  const int64_t n = problems * C;
  max_points_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, argmax, L, C, n);
  return cudaGetLastError();
}

cudaError_t max_points_backward(const int32_t* argmax, const float* dy, float* dx, int64_t problems,
                                int64_t L, int64_t C, bool accumulate, cudaStream_t stream) {
  const int64_t n = problems * L * C;
  max_points_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(argmax, dy, dx, L, C, accumulate,
                                                                   n);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
