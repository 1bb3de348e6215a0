// The T-Net regularizer's arithmetic (fused_ops/transform_regularizer.h), written once for the
// CPU op (fused_ops/cpu/transform_regularizer.cpp), the CUDA kernels
// (fused_ops/cuda/transform_regularizer_kernels.cu) and the host test
// (tests/cuda/test_cuda_transform_regularizer.cpp), so all three compute the same bits. It is
// the arithmetic PointNet's regularizer node had before it became an op (its losses and
// gradients are unchanged): M's entries in double from exact float products, the squares of M
// summed in row-major order with each square rounded before its add (an fma there would change
// the norm's last bits, and whether a compiler fuses it depends on the target's tuning), M
// rounded to float for the gradient's float products, summed in double. No project header but
// backend/cuda/host_device.h (nvcc compiles this in C++17).
//
//   a, da [B*N, k, k]   m [B*N, k, k] (double)   norms [B*N] (double)   loss, dloss [B]
//   (matrix bs = b*N + s; element e = bs*k*k + i*k + j)
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::transform_regularizer_math {

// x * x rounded to double before the add it feeds: never an fma.
HFTA_HOST_DEVICE inline double unfused_square(double x) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(x, x);
#else
  volatile double square = x * x;
  return square;
#endif
}

// x * y rounded to float, then widened: the widening keeps any compiler from fusing the product
// into the double add that follows (an fma needs one type); on the device __fmul_rn says so.
HFTA_HOST_DEVICE inline double float_product(float x, float y) {
#if defined(__CUDA_ARCH__)
  return static_cast<double>(__fmul_rn(x, y));
#else
  return static_cast<double>(x * y);
#endif
}

// M[i, j] = (A A^T - I)[i, j] of the k x k matrix a: products of floats are exact in double, so
// an fma in the sum changes nothing.
HFTA_HOST_DEVICE inline double deviation(const float* a, int64_t k, int64_t i, int64_t j) {
  const float* ri = a + i * k;
  const float* rj = a + j * k;
  double acc = 0.0;
  for (int64_t l = 0; l < k; ++l) acc += static_cast<double>(ri[l]) * static_cast<double>(rj[l]);
  return i == j ? acc - 1.0 : acc;
}

// ||M||_F of one matrix's kk = k*k deviations, in row-major order.
HFTA_HOST_DEVICE inline double frobenius(const double* m, int64_t kk) {
  double sq = 0.0;
  for (int64_t e = 0; e < kk; ++e) sq += unfused_square(m[e]);
  return sqrt(sq);
}

// scale / N * (the sum of one model's N norms in sample order).
HFTA_HOST_DEVICE inline float loss_of(const double* norms, int64_t N, float scale) {
  double sum = 0.0;
  for (int64_t s = 0; s < N; ++s) sum += norms[s];
  return static_cast<float>(static_cast<double>(scale) * sum / static_cast<double>(N));
}

// g = dloss * scale / N / ||M|| (dloss * scale a float product), 0 at M = 0.
HFTA_HOST_DEVICE inline double gradient_scale(float dloss, float scale, int64_t N, double norm) {
  if (!(norm > 0.0)) return 0.0;
  return static_cast<double>(rounded_product(dloss, scale)) / static_cast<double>(N) / norm;
}

// 2 g (M A)[i, j] with M rounded to float, the float products summed in double.
HFTA_HOST_DEVICE inline float gradient(const double* m, const float* a, int64_t k, double g,
                                       int64_t i, int64_t j) {
  double acc = 0.0;
  for (int64_t l = 0; l < k; ++l)
    acc += float_product(static_cast<float>(m[i * k + l]), a[l * k + j]);
  return static_cast<float>(2.0 * g * acc);
}

// ---- one thread's work in the kernels (the CPU op runs the same per matrix) ----

// Element e of every matrix's M.
HFTA_HOST_DEVICE inline void deviation_at(const float* a, double* m, int64_t k, int64_t e) {
  const int64_t kk = k * k, ij = e % kk;
  m[e] = deviation(a + (e - ij), k, ij / k, ij % k);
}

// Matrix bs's norm.
HFTA_HOST_DEVICE inline void norm_at(const double* m, double* norms, int64_t kk, int64_t bs) {
  norms[bs] = frobenius(m + bs * kk, kk);
}

// Model b's loss.
HFTA_HOST_DEVICE inline void loss_at(const double* norms, float* loss, int64_t N, float scale,
                                     int64_t b) {
  loss[b] = loss_of(norms + b * N, N, scale);
}

// Element e of da, written or added.
HFTA_HOST_DEVICE inline void gradient_at(const double* m, const double* norms, const float* a,
                                         const float* dloss, float* da, int64_t N, int64_t k,
                                         float scale, bool accumulate, int64_t e) {
  const int64_t kk = k * k, ij = e % kk, bs = e / kk;
  const double g = gradient_scale(dloss[bs / N], scale, N, norms[bs]);
  const float v = gradient(m + (e - ij), a + (e - ij), k, g, ij / k, ij % k);
  da[e] = accumulate ? da[e] + v : v;
}

}  // namespace hfta::transform_regularizer_math
