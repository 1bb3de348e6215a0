// The CUDA position encodings' per-element arithmetic (fused_ops/positions.h's contract), written
// once for the kernels (fused_ops/cuda/positions_kernels.cu) and the host test
// (tests/cuda/test_cuda_positions.cpp). A float product is exact in double, so one double fma
// rounds x_scale * x + pe (or dx + x_scale * dy) once, as the reference's double expression does:
// rounded to float, the reference's bits. The table gradient sums the n sequences in double in
// sequence order and adds once, as the reference and the CPU op do. No project header but
// backend/cuda/host_device.h (nvcc compiles this in C++17).
//
//   x, y, dy, dx  [B, n, T, D]    table, dtable  [B, P, D] (learned) or [P, D] (sinusoidal)
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::positions_math {

struct PosShape {
  int64_t B = 1, n = 1, T = 1, D = 1;
  int64_t P = 1;        // table rows
  bool learned = true;  // per-model table ([B, P, D]) or one shared table ([P, D])
  float x_scale = 1.0f;
  HFTA_HOST_DEVICE int64_t elements() const { return B * n * T * D; }
};

// y[e] = x_scale * x[e] + table[(b,) t, d]; y may be x.
HFTA_HOST_DEVICE inline void forward_at(const PosShape& s, const float* x, const float* table,
                                        float* y, int64_t e) {
  const int64_t d = e % s.D, row = e / s.D, t = row % s.T, b = row / (s.n * s.T);
  const float pe = table[((s.learned ? b * s.P : 0) + t) * s.D + d];
  y[e] = static_cast<float>(fma(double(s.x_scale), double(x[e]), double(pe)));
}

// dx[e] = x_scale * dy[e], written or added; dx may be dy unless accumulating.
HFTA_HOST_DEVICE inline void dx_at(const PosShape& s, const float* dy, float* dx, bool accumulate,
                                   int64_t e) {
  const double start = accumulate ? double(dx[e]) : 0.0;
  dx[e] = static_cast<float>(fma(double(s.x_scale), double(dy[e]), start));
}

// dtable[b, t, d] += sum over sequences s (in order, in double) of dy[b, s, t, d]; i indexes the
// B*T*D gradient entries that sequences reach (rows t >= T are untouched).
HFTA_HOST_DEVICE inline void dtable_at(const PosShape& s, const float* dy, float* dtable,
                                       int64_t i) {
  const int64_t d = i % s.D, t = (i / s.D) % s.T, b = i / (s.D * s.T);
  double sum = 0.0;
  for (int64_t q = 0; q < s.n; ++q) sum += dy[((b * s.n + q) * s.T + t) * s.D + d];
  float& out = dtable[(b * s.P + t) * s.D + d];
  out = out + static_cast<float>(sum);
}

}  // namespace hfta::positions_math
