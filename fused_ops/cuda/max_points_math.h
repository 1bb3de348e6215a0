// The CUDA max over points' arithmetic (fused_ops/max_points.h), written once for the kernels
// (fused_ops/cuda/max_points_kernels.cu) and the host test (tests/cuda/test_cuda_max_points.cpp):
// `__host__ __device__` under nvcc, plain inline C++ elsewhere. Selections and at most one add per
// element, the CPU op's (fused_ops/cpu/max_points.cpp) in its order, so the bits are the CPU's.
// No project header but backend/cuda/host_device.h: nvcc compiles this in C++17.
//
//   x, dx [problems, L, C]   y, dy, argmax [problems, C]   (problem = b*N + s)
#pragma once

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::max_points_math {

// Output i = problem*C + c: the scan down the channel's L points, first maximum winning ties; a
// point replaces the best when larger or when it is the first NaN (v != v), after which nothing
// replaces it. argmax may be null (a forward no backward follows).
HFTA_HOST_DEVICE inline void max_at(const float* x, float* y, int32_t* argmax, int64_t L, int64_t C,
                                    int64_t i) {
  const int64_t problem = i / C, c = i % C;
  const float* column = x + problem * L * C + c;
  float best = column[0];
  int32_t at = 0;
  for (int64_t l = 1; l < L; ++l) {
    const float v = column[l * C];
    if ((v > best) || ((v != v) && (best == best))) {
      best = v;
      at = static_cast<int32_t>(l);
    }
  }
  y[i] = best;
  if (argmax != nullptr) argmax[i] = at;
}

// Input element i = (problem*L + l)*C + c: a gather (no two threads write one element). The CPU
// zeroes dx and then adds dy at the argmax (0 + dy: a -0 gradient arrives as +0), or adds dy onto
// dx there and leaves the other elements untouched.
HFTA_HOST_DEVICE inline void dx_at(const int32_t* argmax, const float* dy, float* dx, int64_t L,
                                   int64_t C, bool accumulate, int64_t i) {
  const int64_t c = i % C, l = (i / C) % L, problem = i / (L * C);
  const int64_t o = problem * C + c;
  if (argmax[o] == l)
    dx[i] = (accumulate ? dx[i] : 0.0f) + dy[o];
  else if (!accumulate)
    dx[i] = 0.0f;
}

}  // namespace hfta::max_points_math
