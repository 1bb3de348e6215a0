// BatchNorm1d's kernels on the rows layout [B, R, C]: one block of bn::kThreads threads per
// channel (b*C + c), which reduces the channel's statistics or gradient sums in a fixed order
// (per-thread double sums, then a fixed tree in shared memory; no atomics) and then writes the
// channel's outputs. The arithmetic is batchnorm1d_math.h's and batchnorm2d_math.h's, shared with
// the host tests.
#include "fused_ops/cuda/batchnorm1d_math.h"
#include "fused_ops/cuda/kernels.h"

namespace hfta::cuda::kernels {

namespace {

// Sums `value` over the block's threads into partial[0], returned to every thread.
__device__ double block_sum_1d(double* partial, double value) {
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

__global__ void __launch_bounds__(bn::kThreads)
    batchnorm1d_forward_kernel(const float* x, const float* gamma, const float* beta,
                               float* running_mean, float* running_var, float* saved_mean,
                               float* saved_rstd, float* y, bn1::RowsGeometry g, double eps,
                               double momentum, bool training) {
  __shared__ double partial[bn::kThreads];
  const int64_t k = blockIdx.x;
  const int t = static_cast<int>(threadIdx.x);
  float mean, rstd;
  if (training) {
    mean = bn::mean_of(block_sum_1d(partial, bn1::partial_sum(x, g, k, t)), g.R);
    const double sq = block_sum_1d(partial, bn1::partial_sq_dev(x, g, k, t, mean));
    rstd = bn::rstd_of(sq, g.R, eps);
    if (t == 0 && running_mean != nullptr)
      bn::update_running(running_mean[k], running_var[k], mean, sq, g.R, momentum);
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
  for (int64_t r = t; r < g.R; r += bn::kThreads) {
    const int64_t o = g.offset(k, r);
    y[o] = bn::normalize(x[o], mean, scale, shift);
  }
}

__global__ void __launch_bounds__(bn::kThreads)
    batchnorm1d_backward_kernel(const float* x, const float* gamma, const float* saved_mean,
                                const float* saved_rstd, const float* dy, float* dx, float* dgamma,
                                float* dbeta, bn1::RowsGeometry g, bool training, bool need_sums,
                                bool accumulate) {
  __shared__ double partial[bn::kThreads];
  const int64_t k = blockIdx.x;
  const int t = static_cast<int>(threadIdx.x);
  const float mean = saved_mean[k], rstd = saved_rstd[k];
  double sum_dy = 0.0, sum_dy_xmu = 0.0;
  if (need_sums) {
    double my_dy, my_dy_xmu;
    bn1::partial_grad_sums(x, dy, g, k, t, mean, my_dy, my_dy_xmu);
    sum_dy = block_sum_1d(partial, my_dy);
    sum_dy_xmu = block_sum_1d(partial, my_dy_xmu);
  }
  if (t == 0) {
    if (dgamma != nullptr) dgamma[k] += static_cast<float>(sum_dy_xmu * rstd);
    if (dbeta != nullptr) dbeta[k] += static_cast<float>(sum_dy);
  }
  if (dx == nullptr) return;
  const bn::GradCoefficients c = bn::grad_coefficients(
      sum_dy, sum_dy_xmu, gamma != nullptr ? gamma[k] : 1.0f, rstd, g.R, training);
  for (int64_t r = t; r < g.R; r += bn::kThreads) {
    const int64_t o = g.offset(k, r);
    const float grad = bn::input_grad(c, x[o], mean, dy[o]);
    dx[o] = accumulate ? dx[o] + grad : grad;
  }
}

}  // namespace

cudaError_t batchnorm1d_forward(const float* x, const float* gamma, const float* beta,
                                float* running_mean, float* running_var, float* saved_mean,
                                float* saved_rstd, float* y, int64_t B, int64_t R, int64_t C,
                                double eps, double momentum, bool training, cudaStream_t stream) {
  batchnorm1d_forward_kernel<<<static_cast<unsigned>(B * C), bn::kThreads, 0, stream>>>(
      x, gamma, beta, running_mean, running_var, saved_mean, saved_rstd, y, bn1::RowsGeometry{R, C},
      eps, momentum, training);
  return cudaGetLastError();
}

cudaError_t batchnorm1d_backward(const float* x, const float* gamma, const float* saved_mean,
                                 const float* saved_rstd, const float* dy, float* dx, float* dgamma,
                                 float* dbeta, int64_t B, int64_t R, int64_t C, bool training,
                                 bool accumulate, cudaStream_t stream) {
  const bool need_sums = training || dgamma != nullptr || dbeta != nullptr;
  batchnorm1d_backward_kernel<<<static_cast<unsigned>(B * C), bn::kThreads, 0, stream>>>(
      x, gamma, saved_mean, saved_rstd, dy, dx, dgamma, dbeta, bn1::RowsGeometry{R, C}, training,
      need_sums, accumulate);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
