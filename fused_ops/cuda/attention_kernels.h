// Launchers of the CUDA attention's kernels (fused_ops/cuda/attention_kernels.cu): pointers, the
// problem's shape and the stream in, the launch's status out. Kept apart from kernels.h under the
// same rules: only *_math.h headers, since nvcc compiles the .cu files in C++17 and cannot include
// core/error.h. The GEMMs around them are attention_gemms.h's (cuBLAS, issued by the host side).
#pragma once

#include <cuda_runtime.h>

#include "fused_ops/cuda/attention_math.h"

namespace hfta::cuda::kernels {

// The scores in probs (s.rows rows of s.T) turned into probabilities in place, one warp per row.
cudaError_t attention_softmax_forward(const attention_math::SoftmaxShape& s, float* probs,
                                      cudaStream_t stream);

// weights = probs * mask over n elements (dropout's weights for the output GEMM and dV).
cudaError_t attention_apply_mask(const float* probs, const float* mask, float* weights, int64_t n,
                                 cudaStream_t stream);

// dP in ds turned into dS in place (mask null: no dropout), one warp per row of T.
cudaError_t attention_softmax_backward(int64_t rows, int64_t T, const float* probs,
                                       const float* mask, float* ds, cudaStream_t stream);

}  // namespace hfta::cuda::kernels
