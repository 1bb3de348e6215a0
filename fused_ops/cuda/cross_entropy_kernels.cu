// Cross-entropy's kernels (the arithmetic and the order of its sums: cross_entropy_math.h).
// Every sum has a fixed order (per-thread column strides, then a fixed tree; a model's rows in
// order), no atomics: the results do not depend on the grid.
#include "fused_ops/cuda/cross_entropy_math.h"
#include "fused_ops/cuda/kernels.h"
#include "fused_ops/cuda/launch.cuh"

namespace hfta::cuda::kernels {

namespace {

using ce_math::CeShape;

// One block of kThreads threads per row, grid-stride over the rows (the loop is block-uniform).
__global__ void ce_rows_kernel(CeShape s, const float* logits, const int32_t* labels,
                               float* probs) {
  __shared__ float max_part[kThreads];
  __shared__ double sum_part[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  for (int64_t row = blockIdx.x; row < s.B * s.N; row += gridDim.x) {
    const float* x = logits + row * s.K;
    float* p = probs + row * s.K;
    max_part[t] = ce_math::row_max_partial(x, s.K, t, kThreads);
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
      if (t < stride) max_part[t] = ce_math::combine_max(max_part[t], max_part[t + stride]);
      __syncthreads();
    }
    const float m = max_part[0];
    sum_part[t] = ce_math::row_exp_partial(x, p, s.K, m, t, kThreads);
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
      if (t < stride) sum_part[t] = ce_math::combine_sum(sum_part[t], sum_part[t + stride]);
      __syncthreads();
    }
    const double sum = sum_part[0];
    ce_math::row_scale(p, s.K, sum, t, kThreads);
    __syncthreads();  // every column scaled before the label's slot is overwritten
    if (t == 0) {
      const int32_t label = labels[row % s.N];
      if (!ce_math::ignored(s, label)) p[label] = ce_math::row_log_likelihood(x[label], m, sum);
    }
    __syncthreads();  // max_part[0] and sum_part[0] read by all before the next row
  }
}

__global__ void ce_model_loss_kernel(CeShape s, const float* probs, const int32_t* labels,
                                     float* losses) {
  for_each_index(s.B, [&](int64_t b) { ce_math::model_loss_at(s, probs, labels, losses, b); });
}

__global__ void ce_restore_kernel(CeShape s, float* probs, const int32_t* labels) {
  for_each_index(s.B * s.N,
                 [&](int64_t row) { ce_math::restore_label_prob_at(s, probs, labels, row); });
}

__global__ void ce_backward_kernel(CeShape s, const float* probs, const int32_t* labels,
                                   const float* dlosses, float* dlogits) {
  const int64_t n = s.B * s.N * s.K;
  for_each_index(n, [&](int64_t i) {
    ce_math::cross_entropy_backward_at(s, probs, labels, dlosses, dlogits, i);
  });
}

// One block per model: each thread counts its rows, the block adds the counts.
__global__ void count_correct_kernel(CeShape s, const float* logits, const int32_t* labels,
                                     int64_t* correct) {
  __shared__ int64_t part[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  const int64_t b = blockIdx.x;
  part[t] = ce_math::correct_rows_partial(s, logits, labels, b, t, kThreads);
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (t < stride) part[t] += part[t + stride];
    __syncthreads();
  }
  if (t == 0) correct[b] = part[0];
}

}  // namespace

cudaError_t count_correct(const CeShape& s, const float* logits, const int32_t* labels,
                          int64_t* correct, cudaStream_t stream) {
  count_correct_kernel<<<static_cast<unsigned>(s.B), kThreads, 0, stream>>>(s, logits, labels,
                                                                            correct);
  return cudaGetLastError();
}

cudaError_t cross_entropy_forward(const CeShape& s, const float* logits, const int32_t* labels,
                                  float* probs, float* losses, cudaStream_t stream) {
  const int64_t rows = s.B * s.N;
  const unsigned row_blocks =
      static_cast<unsigned>(rows < (int64_t{1} << 16) ? rows : (int64_t{1} << 16));
  ce_rows_kernel<<<row_blocks, kThreads, 0, stream>>>(s, logits, labels, probs);
  ce_model_loss_kernel<<<grid_for(s.B), kThreads, 0, stream>>>(s, probs, labels, losses);
  ce_restore_kernel<<<grid_for(rows), kThreads, 0, stream>>>(s, probs, labels);
  return cudaGetLastError();
}

cudaError_t cross_entropy_backward(const CeShape& s, const float* probs, const int32_t* labels,
                                   const float* dlosses, float* dlogits, cudaStream_t stream) {
  ce_backward_kernel<<<grid_for(s.B * s.N * s.K), kThreads, 0, stream>>>(s, probs, labels, dlosses,
                                                                         dlogits);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
