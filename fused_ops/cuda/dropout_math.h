// The CUDA dropout's per-element arithmetic (fused_ops/dropout.h's contract), written once for the
// kernels (fused_ops/cuda/dropout_kernels.cu) and the host tests
// (tests/cuda/test_cuda_dropout.cpp):
// `__host__ __device__` under nvcc, plain inline C++ elsewhere. The mask holds 1/(1-p) or 0 (drawn
// on the host, cpu::dropout_draw_mask), so these are the CPU op's (fused_ops/cpu/dropout.cpp)
// products, rounded once each (rounded_product: never contracted with the accumulating add). No
// project header but backend/cuda/host_device.h (nvcc compiles this in C++17).
#pragma once

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::dropout_math {

// y[i] = x[i] * mask[i]; y may be x.
HFTA_HOST_DEVICE inline void dropout_forward_at(const float* x, const float* mask, float* y,
                                                int64_t i) {
  y[i] = rounded_product(x[i], mask[i]);
}

// dx[i] = mask[i] * dy[i], or dx[i] += mask[i] * dy[i] (accumulate); dx may be dy unless
// accumulating.
HFTA_HOST_DEVICE inline void dropout_backward_at(const float* mask, const float* dy, float* dx,
                                                 bool accumulate, int64_t i) {
  const float g = rounded_product(mask[i], dy[i]);
  dx[i] = accumulate ? dx[i] + g : g;
}

}  // namespace hfta::dropout_math
