// The fused optimizers' per-element arithmetic, written once for the CUDA kernels
// (optim/cuda/optim_kernels.cu) and the host tests that check it (tests/cuda/test_cuda_optim.cpp):
// `__host__ __device__` under nvcc, plain inline C++ elsewhere. The formulas are the CPU
// optimizers' loops (optim/adam.cpp adam_update, optim/sgd.cpp sgd_update and
// sgd_momentum_update), term for term and in the same order, so any difference between a device
// step and a CPU step is rounding (FMA contraction), never a different formula.
//
// No project header but optim/step_constants.h (plain structs) and backend/cuda/host_device.h:
// nvcc compiles this in C++17 and cannot include core/error.h (fmt 9).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cuda/host_device.h"
#include "optim/step_constants.h"

namespace hfta::optim_math {

// IEEE-rounded square root on both sides (nvcc's default -prec-sqrt=true).
HFTA_HOST_DEVICE inline float sqrt_rn(float x) {
#if defined(__CUDA_ARCH__)
  return sqrtf(x);
#else
  return std::sqrt(x);
#endif
}

// Exponent bits all ones: Inf or NaN, as the CPU optimizer's has_nonfinite tests it.
HFTA_HOST_DEVICE inline bool is_nonfinite(float x) {
#if defined(__CUDA_ARCH__)
  const uint32_t bits = __float_as_uint(x);
#else
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
#endif
  return (bits & 0x7f800000u) == 0x7f800000u;
}

// A chunk of a segment exempt from weight decay updates with weight decay 0 (FusedAdam's
// update_chunk): no L2 term, no shrink. Both are exact in fp32 (x + 0 * p, p * 1).
HFTA_HOST_DEVICE inline AdamStepConstants adam_chunk_constants(AdamStepConstants k, bool decay) {
  if (!decay) {
    k.l2 = 0.0f;
    k.shrink = 1.0f;
  }
  return k;
}

// One element of Adam/AdamW (optim/step_constants.h has the formula).
HFTA_HOST_DEVICE inline void adam_update_element(float& p, float g, float& m, float& v,
                                                 const AdamStepConstants& k) {
  const float gi = g + k.l2 * p;
  const float mi = k.beta1 * m + k.one_minus_beta1 * gi;
  const float vi = k.beta2 * v + k.one_minus_beta2 * gi * gi;
  m = mi;
  v = vi;
  p = p * k.shrink - k.step_size * (mi / (sqrt_rn(vi) * k.inv_bc2_sqrt + k.eps));
}

// An exempt chunk of SGD: weight decay 0 (FusedSgd's update_chunk).
HFTA_HOST_DEVICE inline SgdStepConstants sgd_chunk_constants(SgdStepConstants k, bool decay) {
  if (!decay) k.weight_decay = 0.0f;
  return k;
}

// One element of SGD without momentum: p -= lr * (g + wd * p).
HFTA_HOST_DEVICE inline void sgd_update_element(float& p, float g, const SgdStepConstants& k) {
  p -= k.lr * (g + k.weight_decay * p);
}

// One element of SGD with momentum (dampening and Nesterov through keep, take, dir_d, dir_buf).
HFTA_HOST_DEVICE inline void sgd_momentum_update_element(float& p, float g, float& buf,
                                                         const SgdStepConstants& k) {
  const float d = g + k.weight_decay * p;
  const float bi = k.keep * buf + k.take * d;
  buf = bi;
  p -= k.lr * (k.dir_d * d + k.dir_buf * bi);
}

// Model b's SGD step, element by element: the momentum path when the model has momentum (the
// choice is per model, so uniform across a chunk).
HFTA_HOST_DEVICE inline void sgd_step_element(float& p, float g, float* buf,
                                              const SgdStepConstants& k) {
  if (k.momentum)
    sgd_momentum_update_element(p, g, *buf, k);
  else
    sgd_update_element(p, g, k);
}

}  // namespace hfta::optim_math
