// Launchers of the CUDA BCE-with-logits kernels (fused_ops/cuda/bce_kernels.cu): pointers, sizes
// and the stream in, the launch's status out. Kept apart from kernels.h under the same rules: only
// *_math.h headers, since nvcc compiles the .cu files in C++17 and cannot include core/error.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace hfta::cuda::kernels {

// logits [B, N], targets [N] (shared), losses [B] = each model's mean loss, mean_sigmoid [B] (may
// be null: skipped) each model's mean sigmoid; one block per model, the sums in
// bce_math.h's fixed order.
cudaError_t bce_forward(const float* logits, const float* targets, float* losses,
                        float* mean_sigmoid, int64_t B, int64_t N, cudaStream_t stream);

// dlogits [B, N] = dlosses[b] / N * (sigmoid(x) - t), written or added (accumulate).
cudaError_t bce_backward(const float* logits, const float* targets, const float* dlosses,
                         float* dlogits, int64_t B, int64_t N, bool accumulate,
                         cudaStream_t stream);

}  // namespace hfta::cuda::kernels
