// The CUDA flatten's index map (fused_ops/flatten.h's contract), written once for the kernels
// (fused_ops/cuda/flatten_kernels.cu) and the host test (tests/cuda/test_cuda_flatten.cpp). A
// permutation: output element i of y [B, N, F] comes from x [N, B*C, H, W] at (n*B + b)*F + f, so
// forward gathers and backward writes each dx element exactly once (no atomics). No project
// header but backend/cuda/host_device.h: nvcc compiles this in C++17 and cannot include
// core/error.h (fmt 9).
#pragma once

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::flatten_math {

// Where y's element i (b, n, f) sits in x, for B models, N samples, F = C*H*W features.
HFTA_HOST_DEVICE inline int64_t x_index(int64_t i, int64_t B, int64_t N, int64_t F) {
  const int64_t f = i % F, row = i / F;  // row = b*N + n
  const int64_t b = row / N, n = row % N;
  return (n * B + b) * F + f;
}

// dx[x_index(i)] = dy[i], or += with accumulate: the arithmetic of backward (one add at most).
HFTA_HOST_DEVICE inline float input_grad(float dx_before, float dy, bool accumulate) {
  return accumulate ? dx_before + dy : dy;
}

}  // namespace hfta::flatten_math
