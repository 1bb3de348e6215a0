// The T-Net regularizer's kernels: M one thread per element, each matrix's norm one thread (its
// squares summed in the CPU op's order), each model's loss one thread (its samples in order), the
// gradient one thread per element: no atomics, and model b's bits do not depend on B.
#include "fused_ops/cuda/launch.cuh"
#include "fused_ops/cuda/transform_regularizer_kernels.h"
#include "fused_ops/cuda/transform_regularizer_math.h"

namespace hfta::cuda::kernels {

namespace {

namespace math = transform_regularizer_math;

__global__ void deviation_kernel(const float* a, double* m, int64_t k, int64_t n) {
  for_each_index(n, [&](int64_t e) { math::deviation_at(a, m, k, e); });
}

__global__ void norm_kernel(const double* m, double* norms, int64_t kk, int64_t matrices) {
  for_each_index(matrices, [&](int64_t bs) { math::norm_at(m, norms, kk, bs); });
}

__global__ void loss_kernel(const double* norms, float* loss, int64_t N, float scale, int64_t B) {
  for_each_index(B, [&](int64_t b) { math::loss_at(norms, loss, N, scale, b); });
}

__global__ void gradient_kernel(const double* m, const double* norms, const float* a,
                                const float* dloss, float* da, int64_t N, int64_t k, float scale,
                                bool accumulate, int64_t n) {
  for_each_index(
      n, [&](int64_t e) { math::gradient_at(m, norms, a, dloss, da, N, k, scale, accumulate, e); });
}

// M and the norms of every matrix into the scratch.
void deviations_and_norms(const float* a, double* m, double* norms, int64_t matrices, int64_t k,
                          cudaStream_t stream) {
  const int64_t n = matrices * k * k;
  deviation_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, m, k, n);
  norm_kernel<<<grid_for(matrices), kThreads, 0, stream>>>(m, norms, k * k, matrices);
}

}  // namespace

cudaError_t transform_regularizer_forward(const float* a, float* loss, double* m, double* norms,
                                          int64_t B, int64_t N, int64_t k, float scale,
                                          cudaStream_t stream) {
  deviations_and_norms(a, m, norms, B * N, k, stream);
  loss_kernel<<<grid_for(B), kThreads, 0, stream>>>(norms, loss, N, scale, B);
  return cudaGetLastError();
}

cudaError_t transform_regularizer_backward(const float* a, const float* dloss, float* da, double* m,
                                           double* norms, int64_t B, int64_t N, int64_t k,
                                           float scale, bool accumulate, cudaStream_t stream) {
  deviations_and_norms(a, m, norms, B * N, k, stream);
  const int64_t n = B * N * k * k;
  gradient_kernel<<<grid_for(n), kThreads, 0, stream>>>(m, norms, a, dloss, da, N, k, scale,
                                                        accumulate, n);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
