// Position encodings' kernels: one thread per element for y and dx, one per (model, position,
// feature) for the table gradient (its sum over sequences in order: no atomics). The arithmetic
// is positions_math.h's.
#include "fused_ops/cuda/launch.cuh"
#include "fused_ops/cuda/positions_kernels.h"

namespace hfta::cuda::kernels {

namespace {

__global__ void positions_forward_kernel(positions_math::PosShape s, const float* x,
                                         const float* table, float* y) {
  for_each_index(s.elements(), [&](int64_t e) { positions_math::forward_at(s, x, table, y, e); });
}

__global__ void positions_dx_kernel(positions_math::PosShape s, const float* dy, float* dx,
                                    bool accumulate) {
  for_each_index(s.elements(), [&](int64_t e) { positions_math::dx_at(s, dy, dx, accumulate, e); });
}

__global__ void positions_dtable_kernel(positions_math::PosShape s, const float* dy,
                                        float* dtable) {
  for_each_index(s.B * s.T * s.D, [&](int64_t i) { positions_math::dtable_at(s, dy, dtable, i); });
}

}  // namespace

cudaError_t positions_forward(const positions_math::PosShape& s, const float* x, const float* table,
                              float* y, cudaStream_t stream) {
  positions_forward_kernel<<<grid_for(s.elements()), kThreads, 0, stream>>>(s, x, table, y);
  return cudaGetLastError();
}

cudaError_t positions_backward(const positions_math::PosShape& s, const float* dy, float* dx,
                               float* dtable, bool accumulate_dx, cudaStream_t stream) {
  // dtable reads dy before dx (which may be dy's buffer) is written: launched first, same stream.
  if (dtable != nullptr)
    positions_dtable_kernel<<<grid_for(s.B * s.T * s.D), kThreads, 0, stream>>>(s, dy, dtable);
  if (dx != nullptr)
    positions_dx_kernel<<<grid_for(s.elements()), kThreads, 0, stream>>>(s, dy, dx, accumulate_dx);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
