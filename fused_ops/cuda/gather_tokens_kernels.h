// Launchers of the CUDA token gather (fused_ops/cuda/gather_tokens_kernels.cu): pointers, sizes
// and the stream in, the launch's status out. Kept apart from kernels.h under the same rules:
// only *_math.h headers, since nvcc compiles the .cu files in C++17 and cannot include
// core/error.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace hfta::cuda::kernels {

// y [B, K, D] = the rows [K] of x [B, R, D] (a zero row for a negative row); one thread per
// element of y. The rows must be < R (the caller checks them).
cudaError_t gather_tokens_forward(const float* x, const int32_t* rows, float* y, int64_t B,
                                  int64_t R, int64_t K, int64_t D, cudaStream_t stream);

// dx [B, R, D] = each input row's gradients from dy [B, K, D], through the row groups
// (gather_tokens_math.h's block, on the device), written or added (accumulate); one thread per
// element of dx.
cudaError_t gather_tokens_backward(const int32_t* groups, const float* dy, float* dx, int64_t B,
                                   int64_t R, int64_t K, int64_t D, bool accumulate,
                                   cudaStream_t stream);

}  // namespace hfta::cuda::kernels
