// BCE with logits' kernels (the arithmetic and the order of its sums: bce_math.h). Every sum has
// a fixed order (per-thread sample strides, then a fixed tree per model), no atomics.
#include "fused_ops/cuda/bce_kernels.h"
#include "fused_ops/cuda/bce_math.h"
#include "fused_ops/cuda/launch.cuh"

namespace hfta::cuda::kernels {

namespace {

// One block of kThreads threads per model, grid-stride over the models (block-uniform loop).
__global__ void bce_forward_kernel(const float* logits, const float* targets, float* losses,
                                   float* mean_sigmoid, int64_t B, int64_t N) {
  __shared__ double loss_part[kThreads];
  __shared__ double sigmoid_part[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  for (int64_t b = blockIdx.x; b < B; b += gridDim.x) {
    const bce_math::Partial p = bce_math::model_partial(logits, targets, N, b, t, kThreads);
    loss_part[t] = p.loss;
    sigmoid_part[t] = p.sigmoid;
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
      if (t < stride) {
        loss_part[t] += loss_part[t + stride];
        sigmoid_part[t] += sigmoid_part[t + stride];
      }
      __syncthreads();
    }
    if (t == 0) {
      losses[b] = bce_math::mean_of(loss_part[0], N);
      if (mean_sigmoid != nullptr) mean_sigmoid[b] = bce_math::mean_of(sigmoid_part[0], N);
    }
    __syncthreads();  // the sums read before the next model overwrites them
  }
}

__global__ void bce_backward_kernel(const float* logits, const float* targets, const float* dlosses,
                                    float* dlogits, int64_t B, int64_t N, bool accumulate) {
  for_each_index(B * N, [&](int64_t i) {
    bce_math::backward_at(logits, targets, dlosses, dlogits, N, accumulate, i);
  });
}

}  // namespace

cudaError_t bce_forward(const float* logits, const float* targets, float* losses,
                        float* mean_sigmoid, int64_t B, int64_t N, cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>(B < (int64_t{1} << 16) ? B : int64_t{1} << 16);
  bce_forward_kernel<<<grid, kThreads, 0, stream>>>(logits, targets, losses, mean_sigmoid, B, N);
  return cudaGetLastError();
}

cudaError_t bce_backward(const float* logits, const float* targets, const float* dlosses,
                         float* dlogits, int64_t B, int64_t N, bool accumulate,
                         cudaStream_t stream) {
  bce_backward_kernel<<<grid_for(B * N), kThreads, 0, stream>>>(logits, targets, dlosses, dlogits,
                                                                B, N, accumulate);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
