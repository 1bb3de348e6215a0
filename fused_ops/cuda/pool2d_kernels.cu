// Pooling's kernels: one thread per output (forward) or per input element (backward, gather: no
// atomics), grid-stride, each running one function of pool2d_math.h.
#include "fused_ops/cuda/kernels.h"
#include "fused_ops/cuda/launch.cuh"
#include "fused_ops/cuda/pool2d_math.h"

namespace hfta::cuda::kernels {

namespace {

using pool_math::AdaptiveGeometry;
using pool_math::PoolGeometry;

__global__ void max_pool_forward_kernel(PoolGeometry g, const float* x, float* y, int32_t* argmax,
                                        int64_t n) {
  for_each_index(n, [&](int64_t i) { pool_math::max_pool_forward_at(g, x, y, argmax, i); });
}

__global__ void avg_pool_forward_kernel(PoolGeometry g, const float* x, float* y, int64_t n) {
  for_each_index(n, [&](int64_t i) { pool_math::avg_pool_forward_at(g, x, y, i); });
}

__global__ void max_pool_backward_kernel(PoolGeometry g, const int32_t* argmax, const float* dy,
                                         float* dx, bool accumulate, int64_t n) {
  for_each_index(
      n, [&](int64_t i) { pool_math::max_pool_backward_at(g, argmax, dy, dx, accumulate, i); });
}

__global__ void avg_pool_backward_kernel(PoolGeometry g, const float* dy, float* dx,
                                         bool accumulate, int64_t n) {
  for_each_index(n, [&](int64_t i) { pool_math::avg_pool_backward_at(g, dy, dx, accumulate, i); });
}

__global__ void adaptive_avg_forward_kernel(AdaptiveGeometry g, const float* x, float* y,
                                            int64_t n) {
  for_each_index(n, [&](int64_t i) { pool_math::adaptive_avg_forward_at(g, x, y, i); });
}

__global__ void adaptive_avg_backward_kernel(AdaptiveGeometry g, const float* dy, float* dx,
                                             bool accumulate, int64_t n) {
  for_each_index(n,
                 [&](int64_t i) { pool_math::adaptive_avg_backward_at(g, dy, dx, accumulate, i); });
}

}  // namespace

cudaError_t max_pool_forward(const PoolGeometry& g, const float* x, float* y, int32_t* argmax,
                             cudaStream_t stream) {
  const int64_t n = g.planes * g.OH * g.OW;
  max_pool_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, x, y, argmax, n);
  return cudaGetLastError();
}

cudaError_t avg_pool_forward(const PoolGeometry& g, const float* x, float* y, cudaStream_t stream) {
  const int64_t n = g.planes * g.OH * g.OW;
  avg_pool_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, x, y, n);
  return cudaGetLastError();
}

cudaError_t max_pool_backward(const PoolGeometry& g, const int32_t* argmax, const float* dy,
                              float* dx, bool accumulate, cudaStream_t stream) {
  const int64_t n = g.planes * g.H * g.W;
  max_pool_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, argmax, dy, dx, accumulate, n);
  return cudaGetLastError();
}

cudaError_t avg_pool_backward(const PoolGeometry& g, const float* dy, float* dx, bool accumulate,
                              cudaStream_t stream) {
  const int64_t n = g.planes * g.H * g.W;
  avg_pool_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, dy, dx, accumulate, n);
  return cudaGetLastError();
}

cudaError_t adaptive_avg_pool_forward(const AdaptiveGeometry& g, const float* x, float* y,
                                      cudaStream_t stream) {
  const int64_t n = g.planes * g.OH * g.OW;
  adaptive_avg_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, x, y, n);
  return cudaGetLastError();
}

cudaError_t adaptive_avg_pool_backward(const AdaptiveGeometry& g, const float* dy, float* dx,
                                       bool accumulate, cudaStream_t stream) {
  const int64_t n = g.planes * g.H * g.W;
  adaptive_avg_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, dy, dx, accumulate, n);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
