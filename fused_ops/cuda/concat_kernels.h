// Launchers of the CUDA concatenation (fused_ops/cuda/concat_kernels.cu): pointers, sizes and the
// stream in, the launch's status out. Kept apart from kernels.h under the same rules: only
// *_math.h headers, since nvcc compiles the .cu files in C++17 and cannot include core/error.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "fused_ops/cuda/concat_math.h"

namespace hfta::cuda::kernels {

// One input of `blocks` outer blocks (concat_math.h's Slice s): y's slice of it = x [blocks *
// s.run]; one thread per element of x.
cudaError_t concat_forward_input(const float* x, float* y, const concat_math::Slice& s,
                                 int64_t blocks, cudaStream_t stream);

// dx [blocks * s.run] = its slice of dy, written or added (accumulate); one thread per element.
cudaError_t concat_backward_input(const float* dy, float* dx, const concat_math::Slice& s,
                                  int64_t blocks, bool accumulate, cudaStream_t stream);

}  // namespace hfta::cuda::kernels
