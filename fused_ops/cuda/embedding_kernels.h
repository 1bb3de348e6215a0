// Launchers of the CUDA embedding kernels (fused_ops/cuda/embedding_kernels.cu): pointers, the
// problem's shape and the stream in, the launch's status out. Kept apart from kernels.h under the
// same rules: only *_math.h headers, since nvcc compiles the .cu files in C++17 and cannot include
// core/error.h.
#pragma once

#include <cuda_runtime.h>

#include "fused_ops/cuda/embedding_math.h"

namespace hfta::cuda::kernels {

// y[b, r, :] = weight[b, ids[r], :], one thread per element.
cudaError_t embedding_forward(const embedding_math::EmbShape& s, const float* weight,
                              const int32_t* ids, float* y, cudaStream_t stream);

// dweight += the grouped rows' dy (embedding_math.h's dweight_at), `groups` groups described by
// the device block groups = [vocab (groups), starts (groups + 1), order].
cudaError_t embedding_backward(const embedding_math::EmbShape& s, const int32_t* groups_block,
                               int64_t groups, const float* dy, float* dweight,
                               cudaStream_t stream);

}  // namespace hfta::cuda::kernels
