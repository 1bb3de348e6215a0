// Launchers of the CUDA repeat over points (fused_ops/cuda/repeat_points_kernels.cu): pointers,
// sizes and the stream in, the launch's status out. Kept apart from kernels.h under the same
// rules: only *_math.h headers, since nvcc compiles the .cu files in C++17 and cannot include
// core/error.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace hfta::cuda::kernels {

// y [problems, L, C] = x [problems, C] repeated over the L points; one thread per element of y.
cudaError_t repeat_points_forward(const float* x, float* y, int64_t problems, int64_t L, int64_t C,
                                  cudaStream_t stream);

// dx [problems, C] = the sum over the L points of dy [problems, L, C] (written, or added with
// accumulate); one thread per element of dx, repeat_points_math.h's order.
cudaError_t repeat_points_backward(const float* dy, float* dx, int64_t problems, int64_t L,
                                   int64_t C, bool accumulate, cudaStream_t stream);

}  // namespace hfta::cuda::kernels
