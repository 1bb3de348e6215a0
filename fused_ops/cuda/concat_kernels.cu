// The concatenation's kernels: one launch per input, one thread per element of that input (or of
// its gradient), concat_math.h's index map. The inputs' slices of y are disjoint, so the launches
// never write one element twice.
#include "fused_ops/cuda/concat_kernels.h"
#include "fused_ops/cuda/launch.cuh"

namespace hfta::cuda::kernels {

namespace {

__global__ void concat_forward_kernel(const float* x, float* y, concat_math::Slice s, int64_t n) {
  for_each_index(n, [&](int64_t e) { concat_math::forward_at(x, y, s, e); });
}

__global__ void concat_backward_kernel(const float* dy, float* dx, concat_math::Slice s,
                                       bool accumulate, int64_t n) {
  for_each_index(n, [&](int64_t e) { concat_math::backward_at(dy, dx, s, accumulate, e); });
}

}  // namespace

cudaError_t concat_forward_input(const float* x, float* y, const concat_math::Slice& s,
                                 int64_t blocks, cudaStream_t stream) {
  const int64_t n = blocks * s.run;
  concat_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, s, n);
  return cudaGetLastError();
}

cudaError_t concat_backward_input(const float* dy, float* dx, const concat_math::Slice& s,
                                  int64_t blocks, bool accumulate, cudaStream_t stream) {
  const int64_t n = blocks * s.run;
  concat_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(dy, dx, s, accumulate, n);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
