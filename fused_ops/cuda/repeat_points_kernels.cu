// The repeat over points' kernels: one thread per output element forward (a copy), one per input
// element backward (a gather down its points), repeat_points_math.h's arithmetic.
#include "fused_ops/cuda/launch.cuh"
#include "fused_ops/cuda/repeat_points_kernels.h"
#include "fused_ops/cuda/repeat_points_math.h"

namespace hfta::cuda::kernels {

namespace {

__global__ void repeat_points_forward_kernel(const float* x, float* y, int64_t L, int64_t C,
                                             int64_t n) {
  for_each_index(n, [&](int64_t i) { repeat_points_math::forward_at(x, y, L, C, i); });
}

__global__ void repeat_points_backward_kernel(const float* dy, float* dx, int64_t L, int64_t C,
                                              bool accumulate, int64_t n) {
  for_each_index(n,
                 [&](int64_t i) { repeat_points_math::backward_at(dy, dx, L, C, accumulate, i); });
}

}  // namespace

cudaError_t repeat_points_forward(const float* x, float* y, int64_t problems, int64_t L, int64_t C,
                                  cudaStream_t stream) {
  const int64_t n = problems * L * C;
  repeat_points_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, L, C, n);
  return cudaGetLastError();
}

cudaError_t repeat_points_backward(const float* dy, float* dx, int64_t problems, int64_t L,
                                   int64_t C, bool accumulate, cudaStream_t stream) {
  const int64_t n = problems * C;
  repeat_points_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(dy, dx, L, C, accumulate, n);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
