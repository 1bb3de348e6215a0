// The fused conv2d's kernels (fused_ops/cuda/conv2d.cpp runs the plan of conv2d_gemms.h): each
// element's value comes from conv2d_math.h, which the host test runs over the same indices.
#include "fused_ops/cuda/conv2d_math.h"
#include "fused_ops/cuda/kernels.h"
#include "fused_ops/cuda/launch.cuh"

namespace hfta::cuda::kernels {

namespace {

__global__ void conv_fill_bias_kernel(const float* __restrict__ bias, float* __restrict__ y,
                                      int64_t BC, int64_t P, int64_t total) {
  for_each_index(total, [&](int64_t i) { y[i] = bias[conv_math::bias_channel(i, BC, P)]; });
}

// One block per channel c: thread t sums elements t, t + kThreads, ... of the channel's N*P in
// order, then the block adds the threads' sums as a fixed tree. The same order on every run: no
// atomics.
__global__ void conv_bias_grad_kernel(const float* __restrict__ dy, float* __restrict__ dbias,
                                      int64_t N, int64_t BC, int64_t P) {
  __shared__ double partial[kThreads];
  const int64_t c = blockIdx.x;
  partial[threadIdx.x] = conv_math::bias_grad_thread_sum(dy, N, BC, P, c, threadIdx.x, kThreads);
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) dbias[c] += static_cast<float>(partial[0]);
}

__global__ void im2col_kernel(conv_math::ConvGeometry g, const float* __restrict__ x,
                              float* __restrict__ col, int64_t total) {
  for_each_index(total, [&](int64_t i) { col[i] = conv_math::im2col_value(g, x, i); });
}

__global__ void col2im_kernel(conv_math::ConvGeometry g, const float* __restrict__ dcol,
                              float* __restrict__ dx, int64_t total, bool accumulate) {
  for_each_index(total, [&](int64_t i) {
    dx[i] = conv_math::col2im_value(g, dcol, i, accumulate ? dx[i] : 0.0f, accumulate);
  });
}

}  // namespace

cudaError_t conv_fill_bias(const float* bias, float* y, int64_t N, int64_t BC, int64_t P,
                           cudaStream_t stream) {
  const int64_t total = N * BC * P;
  conv_fill_bias_kernel<<<grid_for(total), kThreads, 0, stream>>>(bias, y, BC, P, total);
  return cudaGetLastError();
}

cudaError_t conv_bias_grad(const float* dy, float* dbias, int64_t N, int64_t BC, int64_t P,
                           cudaStream_t stream) {
  conv_bias_grad_kernel<<<static_cast<unsigned>(BC), kThreads, 0, stream>>>(dy, dbias, N, BC, P);
  return cudaGetLastError();
}

cudaError_t im2col(const conv_math::ConvGeometry& g, const float* x, float* col, int64_t images,
                   cudaStream_t stream) {
  const int64_t total = images * g.col_rows() * g.positions();
  im2col_kernel<<<grid_for(total), kThreads, 0, stream>>>(g, x, col, total);
  return cudaGetLastError();
}

cudaError_t col2im(const conv_math::ConvGeometry& g, const float* dcol, float* dx, int64_t images,
                   bool accumulate, cudaStream_t stream) {
  const int64_t total = images * g.x_image();
  col2im_kernel<<<grid_for(total), kThreads, 0, stream>>>(g, dcol, dx, total, accumulate);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
