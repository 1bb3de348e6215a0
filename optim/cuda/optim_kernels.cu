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

__global__ void adam_step_kernel(const OptimChunk* __restrict__ chunks, int64_t num_chunks,
                                 const AdamStepConstants* __restrict__ constants,
                                 const uint8_t* __restrict__ skip, float* __restrict__ params,
                                 const float* __restrict__ grads, float* __restrict__ exp_avg,
                                 float* __restrict__ exp_avg_sq) {
  for (int64_t c = blockIdx.x; c < num_chunks; c += gridDim.x) {
    const OptimChunk chunk = chunks[c];
    if (skip[chunk.model]) continue;
    const AdamStepConstants k =
        optim_math::adam_chunk_constants(constants[chunk.model], chunk.decay != 0);
    for (int64_t i = chunk.begin + threadIdx.x; i < chunk.begin + chunk.size; i += blockDim.x)
      optim_math::adam_update_element(params[i], grads[i], exp_avg[i], exp_avg_sq[i], k);
  }
}

__global__ void sgd_step_kernel(const OptimChunk* __restrict__ chunks, int64_t num_chunks,
                                const SgdStepConstants* __restrict__ constants,
                                const uint8_t* __restrict__ skip, float* __restrict__ params,
                                const float* __restrict__ grads, float* __restrict__ buffer) {
  for (int64_t c = blockIdx.x; c < num_chunks; c += gridDim.x) {
    const OptimChunk chunk = chunks[c];
    if (skip[chunk.model]) continue;
    const SgdStepConstants k =
        optim_math::sgd_chunk_constants(constants[chunk.model], chunk.decay != 0);
    for (int64_t i = chunk.begin + threadIdx.x; i < chunk.begin + chunk.size; i += blockDim.x)
      optim_math::sgd_step_element(params[i], grads[i], k.momentum ? buffer + i : nullptr, k);
  }
}

}  // namespace

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

}  // namespace hfta::cuda::kernels
