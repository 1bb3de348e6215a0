// Launchers of the CUDA position-encoding kernels (fused_ops/cuda/positions_kernels.cu): pointers,
// the problem's shape and the stream in, the launch's status out. Kept apart from kernels.h under
// the same rules: only *_math.h headers, since nvcc compiles the .cu files in C++17 and cannot
// include core/error.h.
#pragma once

#include <cuda_runtime.h>

#include "fused_ops/cuda/positions_math.h"

namespace hfta::cuda::kernels {

// y = x_scale * x + table row t (model b's for a learned table); y may be x.
cudaError_t positions_forward(const positions_math::PosShape& s, const float* x, const float* table,
                              float* y, cudaStream_t stream);

// dtable += the sequences' sum of dy (learned only; null: skipped), then dx = x_scale * dy,
// written or added (null: skipped; dx may be dy unless accumulating: dtable reads dy first).
cudaError_t positions_backward(const positions_math::PosShape& s, const float* dy, float* dx,
                               float* dtable, bool accumulate_dx, cudaStream_t stream);

}  // namespace hfta::cuda::kernels
