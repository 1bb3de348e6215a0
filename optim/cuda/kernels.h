// The fused optimizers' kernels (optim/cuda/optim_kernels.cu) behind plain launchers: pointers,
// sizes and the stream in, the launch's status out. Like fused_ops/cuda/kernels.h, no project
// header but the plain structs of optim/step_constants.h: nvcc compiles this in C++17 and fmt 9
// (core/error.h) does not compile under it. The host side is optim/cuda/fused_step.cpp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "optim/step_constants.h"

namespace hfta::cuda::kernels {

// One chunk of the step: floats [begin, begin + size) of every arena (parameters, gradients,
// state) belong to model `model` and to one segment, whose weight decay flag is `decay` (0: the
// segment is exempt). optim/cuda/fused_step.h builds the table from a ParamTable.
struct OptimChunk {
  int64_t begin;
  int64_t size;
  int32_t model;
  int32_t decay;
};

// flags[b] = 1 where some chunk of model b has a NaN or Inf gradient, else 0 (all B flags are
// written: zeroed on the stream first).
cudaError_t flag_nonfinite_models(const OptimChunk* chunks, int64_t num_chunks, int64_t B,
                                  const float* grads, uint8_t* flags, cudaStream_t stream);

// One Adam/AdamW step over every chunk (optim/cuda/update_math.h's adam_update_element), with
// constants[b] for model b; chunks of models with skip[b] != 0 are left untouched.
cudaError_t adam_step(const OptimChunk* chunks, int64_t num_chunks,
                      const AdamStepConstants* constants, const uint8_t* skip, float* params,
                      const float* grads, float* exp_avg, float* exp_avg_sq, cudaStream_t stream);

// One SGD step, the same way (sgd_step_element). momentum_buffer may be null when no model has
// constants[b].momentum.
cudaError_t sgd_step(const OptimChunk* chunks, int64_t num_chunks,
                     const SgdStepConstants* constants, const uint8_t* skip, float* params,
                     const float* grads, float* momentum_buffer, cudaStream_t stream);

// One RMSprop step, the same way (rmsprop_update_element). grad_avg may be null when no model is
// centered, momentum_buffer when no model has momentum.
cudaError_t rmsprop_step(const OptimChunk* chunks, int64_t num_chunks,
                         const RmspropStepConstants* constants, const uint8_t* skip, float* params,
                         const float* grads, float* square_avg, float* grad_avg,
                         float* momentum_buffer, cudaStream_t stream);

// One Adadelta step, the same way (adadelta_update_element).
cudaError_t adadelta_step(const OptimChunk* chunks, int64_t num_chunks,
                          const AdadeltaStepConstants* constants, const uint8_t* skip,
                          float* params, const float* grads, float* square_avg, float* acc_delta,
                          cudaStream_t stream);

// Per-model gradient clipping (optim/cuda/update_math.h's clip_* functions), three launches on
// the stream: each chunk's sum of squares into partials[c] (num_chunks doubles); each model's
// norm into norms[b] and its scale factor into coefs[b] from max_norm[b] (B floats each); every
// gradient of a model whose factor is below 1 scaled by it.
cudaError_t clip_grad_norms(const OptimChunk* chunks, int64_t num_chunks, int64_t B,
                            const float* max_norm, float* grads, double* partials, float* norms,
                            float* coefs, cudaStream_t stream);

}  // namespace hfta::cuda::kernels
