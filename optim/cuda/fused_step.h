// The CUDA backend's fused optimizer step: FusedAdam / FusedAdamW / FusedSgd / FusedRmsprop /
// FusedAdadelta's update (optim/adam.h, optim/sgd.h, optim/rmsprop.h, optim/adadelta.h) for
// parameter, gradient and state arenas in device memory, as one kernel launch per step over a table
// of chunks (optim/cuda/kernels.h), each chunk at most Optimizer::kChunkFloats floats of one
// model's slice of one segment, as on the CPU.
//
// Optimizer::step calls this for a parameter table on the device (optim/device_update.cpp), so a
// device model trains through the CPU optimizers' interface; nothing here has run on a GPU yet
// (docs/cuda.md). A step, mirroring Optimizer::step:
//
//   DeviceOptimizerStep device(table);                      // once: uploads the chunk table
//   std::vector<uint8_t> skipped = device.find_nonfinite_models(grads);   // waits for B bytes
//   for each model b not skipped: ++t[b]; constants[b] = adam_step_constants(hyper, b, lr[b],
//                                                                        t[b], decay);
//   device.adam_step(constants, params, grads, exp_avg, exp_avg_sq);      // skips flagged models
//
// Every pointer is device memory holding table().total_floats floats at the table's offsets.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "optim/cuda/kernels.h"
#include "optim/optimizer.h"
#include "optim/step_constants.h"

namespace hfta::cuda {

// The chunk table of `table` (checked): for each segment, each model b, its slice cut into chunks
// of at most `chunk_floats` floats, in the CPU optimizer's order. Host-only, so it is tested
// without a GPU. Throws hfta::Error for chunk_floats < 1 or a table beyond the kernels' 32-bit
// model index.
std::vector<kernels::OptimChunk> device_chunk_table(const ParamTable& table,
                                                    int64_t chunk_floats = Optimizer::kChunkFloats);

class DeviceOptimizerStep {
 public:
  // Checks `table`, uploads its chunk table and allocates the per-model constants and skip flags
  // in device memory (zeroed: no model skipped until find_nonfinite_models says so). Throws
  // hfta::Error without a CUDA device.
  explicit DeviceOptimizerStep(ParamTable table);

  // Flags on the device the models whose gradients hold NaN or Inf, for the next adam_step /
  // sgd_step to skip, and returns the flags (1 = skip), waiting for the stream: the caller needs
  // them to advance the step counts of the models that update, as Optimizer::step does.
  std::vector<uint8_t> find_nonfinite_models(const float* grads);

  // One Adam/AdamW step: `constants` holds B values (adam_step_constants; a flagged model's are
  // not read). Enqueued on the calling thread's stream; returns without waiting.
  void adam_step(std::span<const AdamStepConstants> constants, float* params, const float* grads,
                 float* exp_avg, float* exp_avg_sq);
  // One SGD step: B constants (sgd_step_constants). momentum_buffer may be null only when no
  // model has momentum.
  void sgd_step(std::span<const SgdStepConstants> constants, float* params, const float* grads,
                float* momentum_buffer);
  // One RMSprop step: B constants (rmsprop_step_constants). grad_avg may be null only when no
  // model is centered, momentum_buffer only when no model has momentum.
  void rmsprop_step(std::span<const RmspropStepConstants> constants, float* params,
                    const float* grads, float* square_avg, float* grad_avg, float* momentum_buffer);
  // One Adadelta step: B constants (adadelta_step_constants).
  void adadelta_step(std::span<const AdadeltaStepConstants> constants, float* params,
                     const float* grads, float* square_avg, float* acc_delta);

  // Per-model gradient clipping (optim/clip.h's clip_grad_norm_per_model on device gradients):
  // max_norm holds 1 (shared) or B positive values; each model's norm before clipping goes to
  // norms[b] when norms is not empty (B entries: a B-float copy back, waiting for the stream),
  // else the call returns without waiting.
  void clip_grad_norm(std::span<const float> max_norm, float* grads, std::span<float> norms = {});

  const ParamTable& table() const { return table_; }
  const std::vector<kernels::OptimChunk>& chunks() const { return chunks_; }

 private:
  ParamTable table_;
  std::vector<kernels::OptimChunk> chunks_;
  DeviceArena memory_;
  kernels::OptimChunk* chunks_device_ = nullptr;
  AdamStepConstants* adam_constants_device_ = nullptr;
  SgdStepConstants* sgd_constants_device_ = nullptr;
  RmspropStepConstants* rmsprop_constants_device_ = nullptr;
  AdadeltaStepConstants* adadelta_constants_device_ = nullptr;
  uint8_t* skip_device_ = nullptr;
  double* clip_partials_device_ = nullptr;  // one per chunk
  float* clip_max_norm_device_ = nullptr;   // B each
  float* clip_norms_device_ = nullptr;
  float* clip_coefs_device_ = nullptr;
};

}  // namespace hfta::cuda
