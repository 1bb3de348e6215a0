// The CUDA BatchNorm2d's arithmetic (fused_ops/cuda/batchnorm2d_kernels.cu), as __host__
// __device__ functions that the kernels and the host tests (tests/cuda/test_cuda_batchnorm2d.cpp)
// both run: a host loop over the kThreads "threads" of a channel's block computes exactly what
// the block computes on a device. Plain C++ outside nvcc; no project include but
// backend/cuda/host_device.h (nvcc compiles the kernels as C++17 without fmt).
//
// One block of kThreads threads per channel k = b*C + c. Thread t reduces the channel's elements
// j = t, t + kThreads, ... (j = n*HW + i: sample n, position i) in double, then the kThreads
// partial sums are added pairwise in a fixed tree, so the result does not depend on the device or
// the launch. Products that feed a sum are explicit fma() (nvcc would otherwise contract a*b + c
// into an FMA on the device and not on the host), and the elementwise outputs are fmaf(), so the
// host mirror equals the device bit for bit. The CPU kernel (fused_ops/cpu/batchnorm2d.cpp) sums
// rows in float and rows in double: the two agree to rounding, not bit for bit.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::cuda::bn {

inline constexpr int kThreads = 256;

// Where channel k's element j lives in [N, B*C, H, W].
struct Geometry {
  int64_t N, channels, hw;  // channels = B*C
  HFTA_HOST_DEVICE int64_t count() const { return N * hw; }
  HFTA_HOST_DEVICE int64_t offset(int64_t k, int64_t j) const {
    return (j / hw) * channels * hw + k * hw + j % hw;
  }
};

// Thread t's partial sum of channel k's values.
HFTA_HOST_DEVICE inline double partial_sum(const float* x, const Geometry& g, int64_t k, int t) {
  double s = 0.0;
  for (int64_t j = t; j < g.count(); j += kThreads) s += static_cast<double>(x[g.offset(k, j)]);
  return s;
}

// Thread t's partial sum of squared deviations from `mean`.
HFTA_HOST_DEVICE inline double partial_sq_dev(const float* x, const Geometry& g, int64_t k, int t,
                                              float mean) {
  double s = 0.0;
  for (int64_t j = t; j < g.count(); j += kThreads) {
    const double d = static_cast<double>(x[g.offset(k, j)]) - mean;
    s = fma(d, d, s);
  }
  return s;
}

// Thread t's partial sums of dy and of dy * (x - mean), for backward.
HFTA_HOST_DEVICE inline void partial_grad_sums(const float* x, const float* dy, const Geometry& g,
                                               int64_t k, int t, float mean, double& sum_dy,
                                               double& sum_dy_xmu) {
  sum_dy = 0.0;
  sum_dy_xmu = 0.0;
  for (int64_t j = t; j < g.count(); j += kThreads) {
    const int64_t o = g.offset(k, j);
    const double grad = static_cast<double>(dy[o]);
    sum_dy += grad;
    sum_dy_xmu = fma(grad, static_cast<double>(x[o]) - mean, sum_dy_xmu);
  }
}

// One level of the tree: partial[t] += partial[t + stride] for t < stride, strides kThreads/2,
// kThreads/4, ..., 1; the sum ends in partial[0].
HFTA_HOST_DEVICE inline void tree_level(double* partial, int t, int stride) {
  if (t < stride) partial[t] += partial[t + stride];
}

// A channel's statistics from its sums, as the CPU kernel forms them: mean and 1/sqrt(var + eps)
// with the biased variance, in float.
struct Stats {
  float mean, rstd;
};
HFTA_HOST_DEVICE inline float mean_of(double sum, int64_t count) {
  return static_cast<float>(sum / static_cast<double>(count));
}
HFTA_HOST_DEVICE inline float rstd_of(double sq_dev, int64_t count, double eps) {
  return static_cast<float>(1.0 / sqrt(sq_dev / static_cast<double>(count) + eps));
}
HFTA_HOST_DEVICE inline float eval_rstd(float running_var, double eps) {
  return static_cast<float>(1.0 / sqrt(static_cast<double>(running_var) + eps));
}
// PyTorch's running statistics update (unbiased variance for running_var).
HFTA_HOST_DEVICE inline void update_running(float& running_mean, float& running_var, float mean,
                                            double sq_dev, int64_t count, double momentum) {
  running_mean =
      static_cast<float>(fma(1.0 - momentum, static_cast<double>(running_mean), momentum * mean));
  running_var = static_cast<float>(fma(1.0 - momentum, static_cast<double>(running_var),
                                       momentum * (sq_dev / static_cast<double>(count - 1))));
}

// y = (x - mean) * scale + shift, scale = gamma * rstd (rstd without affine), shift = beta (0).
HFTA_HOST_DEVICE inline float normalize(float x, float mean, float scale, float shift) {
  return fmaf(x - mean, scale, shift);
}

// dx = a * dy + k1 * (x - mean) + k0, the CPU kernel's form of
// gamma * rstd * (dy - mean(dy) - xhat * mean(dy * xhat)) (k1 = k0 = 0 in eval mode).
struct GradCoefficients {
  float a, k1, k0;
};
HFTA_HOST_DEVICE inline GradCoefficients grad_coefficients(double sum_dy, double sum_dy_xmu,
                                                           float gamma, float rstd, int64_t count,
                                                           bool training) {
  const double ga = static_cast<double>(gamma) * static_cast<double>(rstd);
  const double sum_dy_xhat = sum_dy_xmu * rstd;
  const double M = static_cast<double>(count);
  return {static_cast<float>(ga),
          training ? static_cast<float>(-ga * rstd * sum_dy_xhat / M) : 0.0f,
          training ? static_cast<float>(-ga * sum_dy / M) : 0.0f};
}
HFTA_HOST_DEVICE inline float input_grad(const GradCoefficients& c, float x, float mean, float dy) {
  return fmaf(c.a, dy, fmaf(c.k1, x - mean, c.k0));
}

}  // namespace hfta::cuda::bn
