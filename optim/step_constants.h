// The per-model constants of one fused optimizer step, as plain structs with no project include:
// the CPU optimizers (optim/adam.cpp, optim/sgd.cpp, optim/rmsprop.cpp, optim/adadelta.cpp) compute
// them on the host once per step and model, and the CUDA backend's kernels (optim/cuda/, compiled
// by nvcc, which cannot include core/error.h) read the same structs from device memory.
#pragma once

namespace hfta {

// Adam/AdamW, one model, one step t:
//   g' = g + l2 * p;  m = beta1 * m + one_minus_beta1 * g';  v = beta2 * v + one_minus_beta2 * g'^2
//   p = p * shrink - step_size * m / (sqrt(v) * inv_bc2_sqrt + eps)
// Adam has l2 = weight_decay and shrink = 1, AdamW l2 = 0 and shrink = 1 - lr * weight_decay.
struct AdamStepConstants {
  float l2, shrink, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, inv_bc2_sqrt, eps;
};

// SGD, one model, one step: buf = keep * buf + take * d; d = dir_d * d + dir_buf * buf.
// On a model's first step keep = 0 and take = 1, so buf = d exactly (the buffer is zero).
struct SgdStepConstants {
  float lr, weight_decay, keep, take, dir_d, dir_buf;
  bool momentum;
};

// RMSprop, one model, one step (optim/rmsprop.h has the formula): centered and use_momentum
// choose the variant, momentum > 0 is use_momentum.
struct RmspropStepConstants {
  float lr, weight_decay, alpha, one_minus_alpha, eps, momentum;
  bool centered, use_momentum;
};

// Adadelta, one model, one step (optim/adadelta.h has the formula).
struct AdadeltaStepConstants {
  float lr, weight_decay, rho, one_minus_rho, eps;
};

}  // namespace hfta
