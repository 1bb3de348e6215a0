// The fused optimizers' kernels: one block per chunk (grid-stride over the chunk table), the
// block's threads striding over the chunk's floats. A chunk belongs to one model and one segment,
// so its constants, skip flag and decay flag are read once per chunk and every thread of a block
// takes the same branches.
#include <algorithm>

#include "fused_ops/cuda/launch.cuh"
#include "optim/cuda/kernels.h"
#include "optim/cuda/update_math.h"

namespace hfta::cuda::kernels {

namespace {

// One block per chunk, at most 65536 blocks (each then takes several chunks).
unsigned grid_for_chunks(int64_t num_chunks) {
  return static_cast<unsigned>(std::clamp<int64_t>(num_chunks, 1, int64_t{1} << 16));
}

// Every thread of a block walks the same chunks (the loop depends on blockIdx only), so
// __syncthreads_or is reached by all of them. Blocks of one model may store 1 to the same flag
// at once: the same value, so the race is benign.
__global__ void flag_nonfinite_kernel(const OptimChunk* __restrict__ chunks, int64_t num_chunks,
                                      const float* __restrict__ grads, uint8_t* flags) {
  for (int64_t c = blockIdx.x; c < num_chunks; c += gridDim.x) {
    const OptimChunk chunk = chunks[c];
    int found = 0;
    for (int64_t i = threadIdx.x; i < chunk.size; i += blockDim.x)
      found |= optim_math::is_nonfinite(grads[chunk.begin + i]) ? 1 : 0;
    if (__syncthreads_or(found) && threadIdx.x == 0) flags[chunk.model] = 1;
  }
}

// Runs element(k, i) over every float i of every chunk whose model is not flagged in skip, with
// k = the model's constants for the chunk's decay flag: one block per chunk, its threads striding.
template <typename Constants, typename Element>
__device__ void step_chunks(const OptimChunk* __restrict__ chunks, int64_t num_chunks,
                            const Constants* __restrict__ constants,
                            const uint8_t* __restrict__ skip, Element element) {
  for (int64_t c = blockIdx.x; c < num_chunks; c += gridDim.x) {
    const OptimChunk chunk = chunks[c];
    if (skip[chunk.model]) continue;
    const Constants k = optim_math::decay_chunk_constants(constants[chunk.model], chunk.decay != 0);
    for (int64_t i = chunk.begin + threadIdx.x; i < chunk.begin + chunk.size; i += blockDim.x)
      element(k, i);
  }
}

__global__ void adam_step_kernel(const OptimChunk* __restrict__ chunks, int64_t num_chunks,
                                 const AdamStepConstants* __restrict__ constants,
                                 const uint8_t* __restrict__ skip, float* __restrict__ params,
                                 const float* __restrict__ grads, float* __restrict__ exp_avg,
                                 float* __restrict__ exp_avg_sq) {
  step_chunks(chunks, num_chunks, constants, skip, [&](const AdamStepConstants& k, int64_t i) {
    optim_math::adam_update_element(params[i], grads[i], exp_avg[i], exp_avg_sq[i], k);
  });
}

__global__ void sgd_step_kernel(const OptimChunk* __restrict__ chunks, int64_t num_chunks,
                                const SgdStepConstants* __restrict__ constants,
                                const uint8_t* __restrict__ skip, float* __restrict__ params,
                                const float* __restrict__ grads, float* __restrict__ buffer) {
  step_chunks(chunks, num_chunks, constants, skip, [&](const SgdStepConstants& k, int64_t i) {
    optim_math::sgd_step_element(params[i], grads[i], k.momentum ? buffer + i : nullptr, k);
  });
}

__global__ void rmsprop_step_kernel(const OptimChunk* __restrict__ chunks, int64_t num_chunks,
                                    const RmspropStepConstants* __restrict__ constants,
                                    const uint8_t* __restrict__ skip, float* __restrict__ params,
                                    const float* __restrict__ grads, float* __restrict__ square_avg,
                                    float* __restrict__ grad_avg,
                                    float* __restrict__ momentum_buffer) {
  step_chunks(chunks, num_chunks, constants, skip, [&](const RmspropStepConstants& k, int64_t i) {
    optim_math::rmsprop_update_element(params[i], grads[i], square_avg[i],
                                       k.centered ? grad_avg + i : nullptr,
                                       k.use_momentum ? momentum_buffer + i : nullptr, k);
  });
}

__global__ void adadelta_step_kernel(const OptimChunk* __restrict__ chunks, int64_t num_chunks,
                                     const AdadeltaStepConstants* __restrict__ constants,
                                     const uint8_t* __restrict__ skip, float* __restrict__ params,
                                     const float* __restrict__ grads,
                                     float* __restrict__ square_avg,
                                     float* __restrict__ acc_delta) {
  step_chunks(chunks, num_chunks, constants, skip, [&](const AdadeltaStepConstants& k, int64_t i) {
    optim_math::adadelta_update_element(params[i], grads[i], square_avg[i], acc_delta[i], k);
  });
}

// One block per chunk: its threads' sums of squares, then the fixed tree.
__global__ void clip_partials_kernel(const OptimChunk* __restrict__ chunks, int64_t num_chunks,
                                     const float* __restrict__ grads, double* partials) {
  __shared__ double partial[kThreads];
  for (int64_t c = blockIdx.x; c < num_chunks; c += gridDim.x) {
    const OptimChunk chunk = chunks[c];
    partial[threadIdx.x] =
        optim_math::clip_thread_sum(grads, chunk.begin, chunk.size, threadIdx.x, kThreads);
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
      optim_math::clip_tree_level(partial, threadIdx.x, stride);
      __syncthreads();
    }
    if (threadIdx.x == 0) partials[c] = partial[0];
    __syncthreads();  // partial is refilled for the block's next chunk
  }
}

// One thread per model: its chunks' sums in table order, its norm and factor.
__global__ void clip_norms_kernel(const OptimChunk* __restrict__ chunks, int64_t num_chunks,
                                  int64_t B, const double* __restrict__ partials,
                                  const float* __restrict__ max_norm, float* norms, float* coefs) {
  for_each_index(B, [&](int64_t b) {
    double sum = 0.0;
    for (int64_t c = 0; c < num_chunks; ++c)
      if (chunks[c].model == b) sum += partials[c];
    norms[b] = optim_math::clip_norm(sum);
    coefs[b] = optim_math::clip_coefficient(norms[b], max_norm[b]);
  });
}

__global__ void clip_scale_kernel(const OptimChunk* __restrict__ chunks, int64_t num_chunks,
                                  const float* __restrict__ coefs, float* __restrict__ grads) {
  for (int64_t c = blockIdx.x; c < num_chunks; c += gridDim.x) {
    const OptimChunk chunk = chunks[c];
    const float coef = coefs[chunk.model];
    if (coef >= 1.0f) continue;
    for (int64_t i = chunk.begin + threadIdx.x; i < chunk.begin + chunk.size; i += blockDim.x)
      grads[i] *= coef;
  }
}

}  // namespace

cudaError_t clip_grad_norms(const OptimChunk* chunks, int64_t num_chunks, int64_t B,
                            const float* max_norm, float* grads, double* partials, float* norms,
                            float* coefs, cudaStream_t stream) {
  const unsigned grid = grid_for_chunks(num_chunks);
  clip_partials_kernel<<<grid, kThreads, 0, stream>>>(chunks, num_chunks, grads, partials);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  clip_norms_kernel<<<grid_for(B), kThreads, 0, stream>>>(chunks, num_chunks, B, partials, max_norm,
                                                          norms, coefs);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  clip_scale_kernel<<<grid, kThreads, 0, stream>>>(chunks, num_chunks, coefs, grads);
  return cudaGetLastError();
}

cudaError_t flag_nonfinite_models(const OptimChunk* chunks, int64_t num_chunks, int64_t B,
                                  const float* grads, uint8_t* flags, cudaStream_t stream) {
  const cudaError_t zeroed = cudaMemsetAsync(flags, 0, static_cast<size_t>(B), stream);
  if (zeroed != cudaSuccess) return zeroed;
  flag_nonfinite_kernel<<<grid_for_chunks(num_chunks), kThreads, 0, stream>>>(chunks, num_chunks,
                                                                              grads, flags);
  return cudaGetLastError();
}

cudaError_t adam_step(const OptimChunk* chunks, int64_t num_chunks,
                      const AdamStepConstants* constants, const uint8_t* skip, float* params,
                      const float* grads, float* exp_avg, float* exp_avg_sq, cudaStream_t stream) {
  adam_step_kernel<<<grid_for_chunks(num_chunks), kThreads, 0, stream>>>(
      chunks, num_chunks, constants, skip, params, grads, exp_avg, exp_avg_sq);
  return cudaGetLastError();
}

cudaError_t sgd_step(const OptimChunk* chunks, int64_t num_chunks,
                     const SgdStepConstants* constants, const uint8_t* skip, float* params,
                     const float* grads, float* momentum_buffer, cudaStream_t stream) {
  sgd_step_kernel<<<grid_for_chunks(num_chunks), kThreads, 0, stream>>>(
      chunks, num_chunks, constants, skip, params, grads, momentum_buffer);
  return cudaGetLastError();
}

cudaError_t rmsprop_step(const OptimChunk* chunks, int64_t num_chunks,
                         const RmspropStepConstants* constants, const uint8_t* skip, float* params,
                         const float* grads, float* square_avg, float* grad_avg,
                         float* momentum_buffer, cudaStream_t stream) {
  rmsprop_step_kernel<<<grid_for_chunks(num_chunks), kThreads, 0, stream>>>(
      chunks, num_chunks, constants, skip, params, grads, square_avg, grad_avg, momentum_buffer);
  return cudaGetLastError();
}

cudaError_t adadelta_step(const OptimChunk* chunks, int64_t num_chunks,
                          const AdadeltaStepConstants* constants, const uint8_t* skip,
                          float* params, const float* grads, float* square_avg, float* acc_delta,
                          cudaStream_t stream) {
  adadelta_step_kernel<<<grid_for_chunks(num_chunks), kThreads, 0, stream>>>(
      chunks, num_chunks, constants, skip, params, grads, square_avg, acc_delta);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
