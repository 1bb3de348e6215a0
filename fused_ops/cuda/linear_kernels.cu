// The fused linear's bias kernels (fused_ops/cuda/linear.cpp runs the GEMMs).
#include <algorithm>

#include "fused_ops/cuda/kernels.h"
#include "fused_ops/cuda/launch.cuh"

namespace hfta::cuda::kernels {

namespace {

__global__ void fill_bias_kernel(const float* __restrict__ bias, float* __restrict__ y,
                                 int64_t rows, int64_t fo, int64_t total) {
  for_each_index(total, [&](int64_t i) {
    const int64_t o = i % fo, b = i / (rows * fo);
    y[i] = bias[b * fo + o];
  });
}

// Block (column tile, model b): threadIdx.x is a column, each of kLanes lanes sums rows lane,
// lane + kLanes, ... in order, then lane 0 adds the lanes' sums in lane order. Every sum is
// formed in the same order on every run: no atomics.
constexpr int kColumns = 32, kLanes = 8;

__global__ void bias_grad_kernel(const float* __restrict__ dy, float* __restrict__ dbias,
                                 int64_t rows, int64_t fo) {
  __shared__ double partial[kLanes][kColumns];
  const int64_t b = blockIdx.y, o = int64_t(blockIdx.x) * kColumns + threadIdx.x;
  double acc = 0.0;
  if (o < fo)
    for (int64_t n = threadIdx.y; n < rows; n += kLanes) acc += dy[(b * rows + n) * fo + o];
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && o < fo) {
    double sum = 0.0;
    for (int lane = 0; lane < kLanes; ++lane) sum += partial[lane][threadIdx.x];
    dbias[b * fo + o] += static_cast<float>(sum);
  }
}

}  // namespace

cudaError_t fill_bias(const float* bias, float* y, int64_t B, int64_t rows, int64_t fo,
                      cudaStream_t stream) {
  const int64_t total = B * rows * fo;
  fill_bias_kernel<<<grid_for(total), kThreads, 0, stream>>>(bias, y, rows, fo, total);
  return cudaGetLastError();
}

cudaError_t bias_grad(const float* dy, float* dbias, int64_t B, int64_t rows, int64_t fo,
                      cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((fo + kColumns - 1) / kColumns), static_cast<unsigned>(B));
  bias_grad_kernel<<<grid, dim3(kColumns, kLanes), 0, stream>>>(dy, dbias, rows, fo);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
