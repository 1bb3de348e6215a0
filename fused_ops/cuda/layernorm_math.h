// The CUDA LayerNorm's arithmetic (fused_ops/layernorm.h's contract), written once for the kernels
// (fused_ops/cuda/layernorm_kernels.cu) and the host test (tests/cuda/test_cuda_layernorm.cpp).
// No project header but backend/cuda/host_device.h (nvcc compiles this in C++17).
//
//   x, y, dy, dx  [B, N, F] = B*N rows of F features   gamma, beta, dgamma, dbeta  [B, F]
//   mean, rstd    [B, N]
//
// Everything is computed in double (the reference's precision; a float product is exact in
// double) and rounded to float once per output. A row's sums: thread t of the row's block adds
// the features t, t + threads, ... in order (row_partial), then the block adds the threads'
// partials in a fixed tree (combine, level by level: partial[t] += partial[t + stride] for
// stride = threads/2, ..., 1). The parameter gradients: one thread per (model, feature) adds the
// model's N rows in row order (the reference's order). Every product feeding a sum is an explicit
// fma, so nvcc contracts nothing the host would not: a host loop over the threads of a block
// computes the device's bits, and a row's result does not depend on B.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::layernorm_math {

struct LnShape {
  int64_t B = 1, N = 1, F = 1;
  double eps = 1e-5;
  bool affine = true;
  HFTA_HOST_DEVICE int64_t rows() const { return B * N; }
};

// Two sums carried through one tree (forward uses only .a).
struct Sums {
  double a = 0.0, b = 0.0;
};

HFTA_HOST_DEVICE inline Sums combine(Sums x, Sums y) { return {x.a + y.a, x.b + y.b}; }

// Forward's two passes over a row, as the reference's: the sum of x, then the sum of squared
// deviations from the double mean of pass 1.
HFTA_HOST_DEVICE inline Sums sum_partial(const LnShape& s, const float* x, int64_t row, int t,
                                         int threads) {
  const float* xr = x + row * s.F;
  Sums p;
  for (int64_t f = t; f < s.F; f += threads) p.a += double(xr[f]);
  return p;
}

HFTA_HOST_DEVICE inline Sums square_partial(const LnShape& s, const float* x, int64_t row,
                                            double mean, int t, int threads) {
  const float* xr = x + row * s.F;
  Sums p;
  for (int64_t f = t; f < s.F; f += threads) {
    const double dev = double(xr[f]) - mean;
    p.a = fma(dev, dev, p.a);
  }
  return p;
}

HFTA_HOST_DEVICE inline double rstd_of(const LnShape& s, double square_sum) {
  return 1.0 / sqrt(square_sum / double(s.F) + s.eps);
}

// y[row, f] = (x - mean) * rstd * gamma + beta (mean and rstd the row's double statistics).
HFTA_HOST_DEVICE inline void y_at(const LnShape& s, const float* x, const float* gamma,
                                  const float* beta, float* y, int64_t row, double mean,
                                  double rstd, int64_t f) {
  const int64_t i = row * s.F + f;
  const double xhat = (double(x[i]) - mean) * rstd;
  if (!s.affine) {
    y[i] = static_cast<float>(xhat);
    return;
  }
  const int64_t pf = (row / s.N) * s.F + f;
  y[i] = static_cast<float>(fma(xhat, double(gamma[pf]), double(beta[pf])));
}

// xhat from the saved float statistics, as backward (and the reference) reads them.
HFTA_HOST_DEVICE inline double saved_xhat(float x, float mean, float rstd) {
  return (double(x) - double(mean)) * double(rstd);
}

// dy * gamma (dy without affine); a product of floats, exact in double.
HFTA_HOST_DEVICE inline double gdy_of(const LnShape& s, const float* dy, const float* gamma,
                                      int64_t row, int64_t f) {
  const double g = double(dy[row * s.F + f]);
  return s.affine ? g * double(gamma[(row / s.N) * s.F + f]) : g;
}

// Backward's row sums: .a = sum gdy, .b = sum gdy * xhat.
HFTA_HOST_DEVICE inline Sums dx_partial(const LnShape& s, const float* x, const float* gamma,
                                        const float* dy, float mean, float rstd, int64_t row, int t,
                                        int threads) {
  Sums p;
  for (int64_t f = t; f < s.F; f += threads) {
    const double gdy = gdy_of(s, dy, gamma, row, f);
    p.a += gdy;
    p.b = fma(gdy, saved_xhat(x[row * s.F + f], mean, rstd), p.b);
  }
  return p;
}

// dx = rstd * (gdy - sum_gdy / F - xhat * sum_gdy_xhat / F), written or added (in float).
// dx may be dy's buffer: element f reads dy[f] before writing it, after the row's sums.
HFTA_HOST_DEVICE inline void dx_at(const LnShape& s, const float* x, const float* gamma,
                                   const float* dy, float* dx, float mean, float rstd, Sums sums,
                                   bool accumulate, int64_t row, int64_t f) {
  const int64_t i = row * s.F + f;
  const double F = double(s.F);
  const double xhat = saved_xhat(x[i], mean, rstd);
  const double inner = fma(-xhat, sums.b / F, gdy_of(s, dy, gamma, row, f) - sums.a / F);
  const float grad = static_cast<float>(double(rstd) * inner);
  dx[i] = accumulate ? dx[i] + grad : grad;
}

// dgamma[b, f] += sum over n of dy * xhat, dbeta[b, f] += sum over n of dy, in row order; j =
// b * F + f; either output may be null (not wanted).
HFTA_HOST_DEVICE inline void param_grads_at(const LnShape& s, const float* x, const float* dy,
                                            const float* mean, const float* rstd, float* dgamma,
                                            float* dbeta, int64_t j) {
  const int64_t b = j / s.F, f = j % s.F;
  double sum_dy = 0.0, sum_dy_xhat = 0.0;
  for (int64_t n = 0; n < s.N; ++n) {
    const int64_t row = b * s.N + n, i = row * s.F + f;
    const double g = double(dy[i]);
    sum_dy += g;
    sum_dy_xhat = fma(g, saved_xhat(x[i], mean[row], rstd[row]), sum_dy_xhat);
  }
  if (dgamma != nullptr) dgamma[j] += static_cast<float>(sum_dy_xhat);
  if (dbeta != nullptr) dbeta[j] += static_cast<float>(sum_dy);
}

}  // namespace hfta::layernorm_math
