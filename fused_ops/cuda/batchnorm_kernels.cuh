// The BatchNorm kernels of both layouts (batchnorm2d_kernels.cu: [N, B*C, H*W];
// batchnorm1d_kernels.cu: rows [B, R, C]), templated on the geometry: one block of bn::kThreads
// threads per channel, which reduces the channel's statistics or gradient sums in a fixed order
// (per-thread double sums, then a fixed tree in shared memory; no atomics) and then writes the
// channel's outputs. A geometry gives count() and offset(k, j) (the channel's j-th element), and
// its namespace the per-thread partial sums (partial_sum, partial_sq_dev, partial_grad_sums,
// found by argument-dependent lookup); the rest of the arithmetic is batchnorm2d_math.h's,
// shared with the host tests. nvcc only.
#pragma once

#include "fused_ops/cuda/batchnorm2d_math.h"

namespace hfta::cuda::kernels::bn_kernels {

// Sums `value` over the block's threads into partial[0], returned to every thread.
inline __device__ double block_sum(double* partial, double value) {
  const int t = static_cast<int>(threadIdx.x);
  partial[t] = value;
  __syncthreads();
  for (int stride = bn::kThreads / 2; stride > 0; stride /= 2) {
    bn::tree_level(partial, t, stride);
    __syncthreads();
  }
  const double total = partial[0];
  __syncthreads();  // partial is reused by the next sum
  return total;
}

template <typename Geometry>
__global__ void __launch_bounds__(bn::kThreads)
    batchnorm_forward_kernel(const float* x, const float* gamma, const float* beta,
                             float* running_mean, float* running_var, float* saved_mean,
                             float* saved_rstd, float* y, Geometry g, double eps, double momentum,
                             bool training) {
  __shared__ double partial[bn::kThreads];
  const int64_t k = blockIdx.x;
  const int t = static_cast<int>(threadIdx.x);
  float mean, rstd;
  if (training) {
    mean = bn::mean_of(block_sum(partial, partial_sum(x, g, k, t)), g.count());
    const double sq = block_sum(partial, partial_sq_dev(x, g, k, t, mean));
    rstd = bn::rstd_of(sq, g.count(), eps);
    if (t == 0 && running_mean != nullptr)
      bn::update_running(running_mean[k], running_var[k], mean, sq, g.count(), momentum);
  } else {
    mean = running_mean[k];
    rstd = bn::eval_rstd(running_var[k], eps);
  }
  if (t == 0) {
    saved_mean[k] = mean;
    saved_rstd[k] = rstd;
  }
  const float scale = gamma != nullptr ? gamma[k] * rstd : rstd;
  const float shift = beta != nullptr ? beta[k] : 0.0f;
  for (int64_t j = t; j < g.count(); j += bn::kThreads) {
    const int64_t o = g.offset(k, j);
    y[o] = bn::normalize(x[o], mean, scale, shift);
  }
}

template <typename Geometry>
__global__ void __launch_bounds__(bn::kThreads)
    batchnorm_backward_kernel(const float* x, const float* gamma, const float* saved_mean,
                              const float* saved_rstd, const float* dy, float* dx, float* dgamma,
                              float* dbeta, Geometry g, bool training, bool need_sums,
                              bool accumulate) {
  __shared__ double partial[bn::kThreads];
  const int64_t k = blockIdx.x;
  const int t = static_cast<int>(threadIdx.x);
  const float mean = saved_mean[k], rstd = saved_rstd[k];
  double sum_dy = 0.0, sum_dy_xmu = 0.0;
  if (need_sums) {
    double my_dy, my_dy_xmu;
    partial_grad_sums(x, dy, g, k, t, mean, my_dy, my_dy_xmu);
    sum_dy = block_sum(partial, my_dy);
    sum_dy_xmu = block_sum(partial, my_dy_xmu);
  }
  if (t == 0) {
    if (dgamma != nullptr) dgamma[k] += static_cast<float>(sum_dy_xmu * rstd);
    if (dbeta != nullptr) dbeta[k] += static_cast<float>(sum_dy);
  }
  if (dx == nullptr) return;
  const bn::GradCoefficients c = bn::grad_coefficients(
      sum_dy, sum_dy_xmu, gamma != nullptr ? gamma[k] : 1.0f, rstd, g.count(), training);
  for (int64_t j = t; j < g.count(); j += bn::kThreads) {
    const int64_t o = g.offset(k, j);
    const float grad = bn::input_grad(c, x[o], mean, dy[o]);
    dx[o] = accumulate ? dx[o] + grad : grad;
  }
}

}  // namespace hfta::cuda::kernels::bn_kernels
