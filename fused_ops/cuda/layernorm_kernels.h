// Launchers of the CUDA LayerNorm kernels (fused_ops/cuda/layernorm_kernels.cu): pointers, the
// problem's shape and the stream in, the launch's status out. Kept apart from kernels.h under the
// same rules: only *_math.h headers, since nvcc compiles the .cu files in C++17 and cannot include
// core/error.h. gamma and beta are null without affine.
#pragma once

#include <cuda_runtime.h>

#include "fused_ops/cuda/layernorm_math.h"

namespace hfta::cuda::kernels {

// One block of kThreads threads per row: mean, rstd (saved as float) and y.
cudaError_t layernorm_forward(const layernorm_math::LnShape& s, const float* x, const float* gamma,
                              const float* beta, float* mean, float* rstd, float* y,
                              cudaStream_t stream);

// dgamma and dbeta (accumulated; null: skipped) one thread per (model, feature), launched first
// (dx may be dy's buffer); then dx (written or added; null: skipped), one block per row.
cudaError_t layernorm_backward(const layernorm_math::LnShape& s, const float* x, const float* gamma,
                               const float* mean, const float* rstd, const float* dy, float* dx,
                               float* dgamma, float* dbeta, bool accumulate_dx,
                               cudaStream_t stream);

}  // namespace hfta::cuda::kernels
