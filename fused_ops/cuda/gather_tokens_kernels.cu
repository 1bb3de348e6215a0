// The token gather's kernels: one thread per output element forward, one per input gradient
// element backward (a gather over its row's group), gather_tokens_math.h's arithmetic.
#include "fused_ops/cuda/gather_tokens_kernels.h"
#include "fused_ops/cuda/gather_tokens_math.h"
#include "fused_ops/cuda/launch.cuh"

namespace hfta::cuda::kernels {

namespace {

__global__ void gather_tokens_forward_kernel(const float* x, const int32_t* rows, float* y,
                                             int64_t R, int64_t K, int64_t D, int64_t n) {
  for_each_index(n, [&](int64_t e) { gather_tokens_math::forward_at(x, rows, y, R, K, D, e); });
}

__global__ void gather_tokens_backward_kernel(const int32_t* groups, const float* dy, float* dx,
                                              int64_t R, int64_t K, int64_t D, bool accumulate,
                                              int64_t n) {
  for_each_index(n, [&](int64_t e) {
    gather_tokens_math::backward_at(groups, dy, dx, R, K, D, accumulate, e);
  });
}

}  // namespace

cudaError_t gather_tokens_forward(const float* x, const int32_t* rows, float* y, int64_t B,
                                  int64_t R, int64_t K, int64_t D, cudaStream_t stream) {
  const int64_t n = B * K * D;
  gather_tokens_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, rows, y, R, K, D, n);
  return cudaGetLastError();
}

cudaError_t gather_tokens_backward(const int32_t* groups, const float* dy, float* dx, int64_t B,
                                   int64_t R, int64_t K, int64_t D, bool accumulate,
                                   cudaStream_t stream) {
  const int64_t n = B * R * D;
  gather_tokens_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(groups, dy, dx, R, K, D,
                                                                      accumulate, n);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
