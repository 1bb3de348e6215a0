// LayerNorm's kernels (the arithmetic and the order of its sums: layernorm_math.h). A row's sums
// are one block's: per-thread partials, then a fixed tree in shared memory; no atomics.
#include "fused_ops/cuda/launch.cuh"
#include "fused_ops/cuda/layernorm_kernels.h"

namespace hfta::cuda::kernels {

namespace {

using layernorm_math::Sums;

// The block's partials added in layernorm_math.h's tree; every thread returns the total.
__device__ Sums block_total(Sums mine, Sums* part) {
  const int t = static_cast<int>(threadIdx.x);
  part[t] = mine;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (t < stride) part[t] = layernorm_math::combine(part[t], part[t + stride]);
    __syncthreads();
  }
  const Sums total = part[0];
  __syncthreads();  // part[0] read by every thread before the next tree overwrites it
  return total;
}

// One block per row, grid-stride over the rows (a block-uniform loop).
__global__ void layernorm_forward_kernel(layernorm_math::LnShape s, const float* x,
                                         const float* gamma, const float* beta, float* mean,
                                         float* rstd, float* y) {
  __shared__ Sums part[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  for (int64_t row = blockIdx.x; row < s.rows(); row += gridDim.x) {
    const double mu =
        block_total(layernorm_math::sum_partial(s, x, row, t, kThreads), part).a / double(s.F);
    const double r = layernorm_math::rstd_of(
        s, block_total(layernorm_math::square_partial(s, x, row, mu, t, kThreads), part).a);
    if (t == 0) {
      mean[row] = static_cast<float>(mu);
      rstd[row] = static_cast<float>(r);
    }
    for (int64_t f = t; f < s.F; f += kThreads)
      layernorm_math::y_at(s, x, gamma, beta, y, row, mu, r, f);
  }
}

__global__ void layernorm_dx_kernel(layernorm_math::LnShape s, const float* x, const float* gamma,
                                    const float* mean, const float* rstd, const float* dy,
                                    float* dx, bool accumulate) {
  __shared__ Sums part[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  for (int64_t row = blockIdx.x; row < s.rows(); row += gridDim.x) {
    const float m = mean[row], r = rstd[row];
    const Sums sums =
        block_total(layernorm_math::dx_partial(s, x, gamma, dy, m, r, row, t, kThreads), part);
    for (int64_t f = t; f < s.F; f += kThreads)
      layernorm_math::dx_at(s, x, gamma, dy, dx, m, r, sums, accumulate, row, f);
  }
}

__global__ void layernorm_param_grads_kernel(layernorm_math::LnShape s, const float* x,
                                             const float* dy, const float* mean, const float* rstd,
                                             float* dgamma, float* dbeta) {
  for_each_index(s.B * s.F, [&](int64_t j) {
    layernorm_math::param_grads_at(s, x, dy, mean, rstd, dgamma, dbeta, j);
  });
}

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(rows < (int64_t{1} << 16) ? rows : int64_t{1} << 16);
}

}  // namespace

cudaError_t layernorm_forward(const layernorm_math::LnShape& s, const float* x, const float* gamma,
                              const float* beta, float* mean, float* rstd, float* y,
                              cudaStream_t stream) {
  layernorm_forward_kernel<<<row_blocks(s.rows()), kThreads, 0, stream>>>(s, x, gamma, beta, mean,
                                                                          rstd, y);
  return cudaGetLastError();
}

cudaError_t layernorm_backward(const layernorm_math::LnShape& s, const float* x, const float* gamma,
                               const float* mean, const float* rstd, const float* dy, float* dx,
                               float* dgamma, float* dbeta, bool accumulate_dx,
                               cudaStream_t stream) {
  if (dgamma != nullptr || dbeta != nullptr)
    layernorm_param_grads_kernel<<<grid_for(s.B * s.F), kThreads, 0, stream>>>(s, x, dy, mean, rstd,
                                                                               dgamma, dbeta);
  if (dx != nullptr)
    layernorm_dx_kernel<<<row_blocks(s.rows()), kThreads, 0, stream>>>(s, x, gamma, mean, rstd, dy,
                                                                       dx, accumulate_dx);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
