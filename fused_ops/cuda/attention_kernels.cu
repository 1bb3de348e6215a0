// The attention's softmax kernels (the arithmetic and the order of its sums: attention_math.h):
// one warp per row, the lanes' partials added by __shfl_down_sync in a fixed tree (lane 0's
// total, then broadcast), no atomics, no shared memory.
#include "fused_ops/cuda/attention_kernels.h"
#include "fused_ops/cuda/launch.cuh"

namespace hfta::cuda::kernels {

namespace {

using attention_math::kLanes;
constexpr int kRowsPerBlock = kThreads / kLanes;
constexpr unsigned kFullWarp = 0xffffffffu;

__device__ double warp_sum(double v) {
  for (int stride = kLanes / 2; stride > 0; stride /= 2)
    v += __shfl_down_sync(kFullWarp, v, stride);
  return __shfl_sync(kFullWarp, v, 0);
}

__device__ float warp_max(float v) {
  for (int stride = kLanes / 2; stride > 0; stride /= 2)
    v = attention_math::max_of(v, __shfl_down_sync(kFullWarp, v, stride));
  return __shfl_sync(kFullWarp, v, 0);
}

// Warp w of the grid takes rows w, w + warps, ... (a warp-uniform loop: every lane shuffles).
__global__ void softmax_forward_kernel(attention_math::SoftmaxShape s, float* probs) {
  const int lane = static_cast<int>(threadIdx.x) % kLanes;
  const int64_t warps = int64_t(gridDim.x) * kRowsPerBlock;
  for (int64_t r = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / kLanes; r < s.rows;
       r += warps) {
    const float m = warp_max(attention_math::max_partial(s, probs, r, lane));
    const double sum = warp_sum(attention_math::exp_partial(s, probs, r, m, lane));
    attention_math::write_probs(s, probs, r, m, sum, lane);
  }
}

__global__ void softmax_backward_kernel(int64_t rows, int64_t T, const float* probs,
                                        const float* mask, float* ds) {
  const int lane = static_cast<int>(threadIdx.x) % kLanes;
  const int64_t warps = int64_t(gridDim.x) * kRowsPerBlock;
  for (int64_t r = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / kLanes; r < rows;
       r += warps) {
    const double c = warp_sum(attention_math::dot_partial(T, probs, ds, mask, r, lane));
    attention_math::write_ds(T, probs, ds, mask, r, c, lane);
  }
}

__global__ void apply_mask_kernel(const float* probs, const float* mask, float* weights,
                                  int64_t n) {
  for_each_index(n, [&](int64_t i) { attention_math::weight_at(probs, mask, weights, i); });
}

unsigned row_grid(int64_t rows) {
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  return static_cast<unsigned>(blocks < (int64_t{1} << 16) ? (blocks > 0 ? blocks : 1)
                                                           : int64_t{1} << 16);
}

}  // namespace

cudaError_t attention_softmax_forward(const attention_math::SoftmaxShape& s, float* probs,
                                      cudaStream_t stream) {
  softmax_forward_kernel<<<row_grid(s.rows), kThreads, 0, stream>>>(s, probs);
  return cudaGetLastError();
}

cudaError_t attention_apply_mask(const float* probs, const float* mask, float* weights, int64_t n,
                                 cudaStream_t stream) {
  apply_mask_kernel<<<grid_for(n), kThreads, 0, stream>>>(probs, mask, weights, n);
  return cudaGetLastError();
}

cudaError_t attention_softmax_backward(int64_t rows, int64_t T, const float* probs,
                                       const float* mask, float* ds, cudaStream_t stream) {
  softmax_backward_kernel<<<row_grid(rows), kThreads, 0, stream>>>(rows, T, probs, mask, ds);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
