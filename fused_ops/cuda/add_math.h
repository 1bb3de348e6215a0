// The CUDA add's per-element arithmetic (fused_ops/add.h's contract), written once for the
// kernels (fused_ops/cuda/add_kernels.cu) and the host tests (tests/cuda/test_cuda_add.cpp):
// `__host__ __device__` under nvcc, plain inline C++ elsewhere. The CPU op's
// (fused_ops/cpu/add.cpp) one add per element, so the results are equal bit for bit. No project
// header but backend/cuda/host_device.h: nvcc compiles this in C++17 and cannot include
// core/error.h (fmt 9).
#pragma once

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::add_math {

// y[i] = a[i] + b[i]; y may be a or b (each element is read before it is written).
HFTA_HOST_DEVICE inline void add_forward_at(const float* a, const float* b, float* y, int64_t i) {
  y[i] = a[i] + b[i];
}

// dx[i] = dy[i], or dx[i] += dy[i] (accumulate). Without accumulate a copy of the bits, as the
// CPU's memcpy.
HFTA_HOST_DEVICE inline void add_backward_at(const float* dy, float* dx, bool accumulate,
                                             int64_t i) {
  dx[i] = accumulate ? dx[i] + dy[i] : dy[i];
}

}  // namespace hfta::add_math
