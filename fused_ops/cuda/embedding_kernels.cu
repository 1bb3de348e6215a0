// The embedding's kernels: a gather per output element forward, and per (group of equal ids,
// model, feature) backward; the arithmetic is embedding_math.h's (no atomics).
#include "fused_ops/cuda/embedding_kernels.h"
#include "fused_ops/cuda/launch.cuh"

namespace hfta::cuda::kernels {

namespace {

__global__ void embedding_forward_kernel(embedding_math::EmbShape s, const float* weight,
                                         const int32_t* ids, float* y) {
  for_each_index(s.B * s.R * s.D,
                 [&](int64_t e) { embedding_math::forward_at(s, weight, ids, y, e); });
}

__global__ void embedding_dweight_kernel(embedding_math::EmbShape s, const int32_t* vocab,
                                         const int32_t* starts, const int32_t* order,
                                         const float* dy, float* dweight, int64_t n) {
  for_each_index(
      n, [&](int64_t i) { embedding_math::dweight_at(s, vocab, starts, order, dy, dweight, i); });
}

}  // namespace

cudaError_t embedding_forward(const embedding_math::EmbShape& s, const float* weight,
                              const int32_t* ids, float* y, cudaStream_t stream) {
  embedding_forward_kernel<<<grid_for(s.B * s.R * s.D), kThreads, 0, stream>>>(s, weight, ids, y);
  return cudaGetLastError();
}

cudaError_t embedding_backward(const embedding_math::EmbShape& s, const int32_t* groups_block,
                               int64_t groups, const float* dy, float* dweight,
                               cudaStream_t stream) {
  if (groups == 0) return cudaSuccess;  // every row is padding
  const int32_t* vocab = groups_block;
  const int32_t* starts = vocab + groups;
  const int32_t* order = starts + groups + 1;
  const int64_t n = groups * s.B * s.D;
  embedding_dweight_kernel<<<grid_for(n), kThreads, 0, stream>>>(s, vocab, starts, order, dy,
                                                                 dweight, n);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
