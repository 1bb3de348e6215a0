// The CUDA repeat over points' arithmetic (fused_ops/repeat_points.h), written once for the
// kernels (fused_ops/cuda/repeat_points_kernels.cu) and the host test
// (tests/cuda/test_cuda_repeat_points.cpp). Forward is a copy; backward sums each channel's L
// points in point order in double and rounds once, as the CPU op (fused_ops/cpu/repeat_points.cpp)
// does, so the bits are the CPU's. No project header but backend/cuda/host_device.h: nvcc
// compiles this in C++17.
//
//   x, dx [problems, C]   y, dy [problems, L, C]   (problem = b*N + s)
#pragma once

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::repeat_points_math {

// Output element i = (problem*L + l)*C + c: a copy of x[problem, c].
HFTA_HOST_DEVICE inline void forward_at(const float* x, float* y, int64_t L, int64_t C, int64_t i) {
  const int64_t c = i % C, problem = i / (L * C);
  y[i] = x[problem * C + c];
}

// Input element i = problem*C + c: a gather down the channel's L points (no two threads write one
// element, so no atomics), the sum in double rounded once, then written or added.
HFTA_HOST_DEVICE inline void backward_at(const float* dy, float* dx, int64_t L, int64_t C,
                                         bool accumulate, int64_t i) {
  const int64_t c = i % C, problem = i / C;
  const float* column = dy + problem * L * C + c;
  double sum = 0.0;
  for (int64_t l = 0; l < L; ++l) sum += column[l * C];
  const float g = static_cast<float>(sum);
  dx[i] = accumulate ? dx[i] + g : g;
}

}  // namespace hfta::repeat_points_math
