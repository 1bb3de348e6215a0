// Channel scaling's kernels: one thread per element for y and dx, one per row for the scale
// gradient (a row is one sample's channel, HW elements), the arithmetic of scale_channels_math.h.
#include "fused_ops/cuda/kernels.h"
#include "fused_ops/cuda/launch.cuh"
#include "fused_ops/cuda/scale_channels_math.h"

namespace hfta::cuda::kernels {

namespace {

__global__ void scale_channels_forward_kernel(const float* x, const float* s, float* y, int64_t hw,
                                              int64_t n) {
  for_each_index(n, [&](int64_t e) { scale_channels_math::forward_at(x, s, y, hw, e); });
}

__global__ void scale_channels_dx_kernel(const float* dy, const float* s, float* dx, int64_t hw,
                                         int64_t n, bool accumulate) {
  for_each_index(n, [&](int64_t e) { scale_channels_math::dx_at(dy, s, dx, hw, accumulate, e); });
}

__global__ void scale_channels_ds_kernel(const float* x, const float* dy, float* ds, int64_t hw,
                                         int64_t rows, bool accumulate) {
  for_each_index(rows,
                 [&](int64_t r) { scale_channels_math::ds_at(x, dy, ds, hw, accumulate, r); });
}

}  // namespace

cudaError_t scale_channels_forward(const float* x, const float* s, float* y, int64_t rows,
                                   int64_t hw, cudaStream_t stream) {
  const int64_t n = rows * hw;
  scale_channels_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, s, y, hw, n);
  return cudaGetLastError();
}

cudaError_t scale_channels_backward(const float* x, const float* s, const float* dy, float* dx,
                                    float* ds, int64_t rows, int64_t hw, bool accumulate_dx,
                                    bool accumulate_ds, cudaStream_t stream) {
  // The scale gradient reads dy before dx (which may be dy) is written: launched first, on the
  // same stream.
  if (ds != nullptr)
    scale_channels_ds_kernel<<<grid_for(rows), kThreads, 0, stream>>>(x, dy, ds, hw, rows,
                                                                      accumulate_ds);
  if (dx != nullptr) {
    const int64_t n = rows * hw;
    scale_channels_dx_kernel<<<grid_for(n), kThreads, 0, stream>>>(dy, s, dx, hw, n, accumulate_dx);
  }
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
