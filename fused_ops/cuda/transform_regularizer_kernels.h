// Launchers of the CUDA T-Net regularizer (fused_ops/cuda/transform_regularizer_kernels.cu):
// pointers, sizes and the stream in, the launch's status out. Kept apart from kernels.h under the
// same rules: only *_math.h headers, since nvcc compiles the .cu files in C++17 and cannot
// include core/error.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace hfta::cuda::kernels {

// a [B*N, k, k] -> loss [B] (transform_regularizer_math.h), through device scratch m
// [B*N*k*k] and norms [B*N] (doubles): one thread per element of M, one per matrix for its norm,
// one per model for its loss, three launches in order on `stream`.
cudaError_t transform_regularizer_forward(const float* a, float* loss, double* m, double* norms,
                                          int64_t B, int64_t N, int64_t k, float scale,
                                          cudaStream_t stream);

// da [B*N, k, k] = the loss's gradient times dloss [B], written or added (accumulate): M and the
// norms again into the scratch, then one thread per element of da.
cudaError_t transform_regularizer_backward(const float* a, const float* dloss, float* da, double* m,
                                           double* norms, int64_t B, int64_t N, int64_t k,
                                           float scale, bool accumulate, cudaStream_t stream);

}  // namespace hfta::cuda::kernels
