// The fused optimizers' per-element arithmetic, written once for the CUDA kernels
// (optim/cuda/optim_kernels.cu) and the host tests that check it (tests/cuda/test_cuda_optim.cpp):
// `__host__ __device__` under nvcc, plain inline C++ elsewhere. The formulas are the CPU
// optimizers' loops (optim/adam.cpp adam_update, optim/sgd.cpp sgd_update and
// sgd_momentum_update, optim/rmsprop.cpp rmsprop_update, optim/adadelta.cpp adadelta_update), term
// for term and in the same order, so any difference between a device
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

// A chunk of a segment exempt from weight decay updates with weight decay 0 (each optimizer's
// update_chunk): SGD, RMSprop and Adadelta set their weight_decay to 0 ...
template <typename Constants>
HFTA_HOST_DEVICE inline Constants decay_chunk_constants(Constants k, bool decay) {
  if (!decay) k.weight_decay = 0.0f;
  return k;
}

// ... and Adam/AdamW drop both the L2 term and the shrink. Both are exact in fp32 (x + 0 * p,
// p * 1).
HFTA_HOST_DEVICE inline AdamStepConstants decay_chunk_constants(AdamStepConstants k, bool decay) {
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

// One element of RMSprop (optim/rmsprop.cpp rmsprop_update): grad_avg is read and written only
// when k.centered, buf only when k.use_momentum. max(x, 0) as std::max(x, 0.0f) has it: a NaN
// stays NaN.
HFTA_HOST_DEVICE inline void rmsprop_update_element(float& p, float g, float& v, float* grad_avg,
                                                    float* buf, const RmspropStepConstants& k) {
  const float gi = g + k.weight_decay * p;
  const float vi = k.alpha * v + k.one_minus_alpha * gi * gi;
  v = vi;
  float denom;
  if (k.centered) {
    const float ai = k.alpha * *grad_avg + k.one_minus_alpha * gi;
    *grad_avg = ai;
    const float centered = vi - ai * ai;
    denom = sqrt_rn(centered < 0.0f ? 0.0f : centered) + k.eps;
  } else {
    denom = sqrt_rn(vi) + k.eps;
  }
  if (k.use_momentum) {
    const float bi = k.momentum * *buf + gi / denom;
    *buf = bi;
    p -= k.lr * bi;
  } else {
    p -= k.lr * (gi / denom);
  }
}

// One element of Adadelta (optim/adadelta.cpp adadelta_update), in PyTorch's order:
// delta = sqrt(u + eps) / sqrt(v + eps) * g.
HFTA_HOST_DEVICE inline void adadelta_update_element(float& p, float g, float& v, float& u,
                                                     const AdadeltaStepConstants& k) {
  const float gi = g + k.weight_decay * p;
  const float vi = k.rho * v + k.one_minus_rho * gi * gi;
  const float delta = sqrt_rn(u + k.eps) / sqrt_rn(vi + k.eps) * gi;
  v = vi;
  u = k.rho * u + k.one_minus_rho * delta * delta;
  p -= k.lr * delta;
}

// Per-model gradient clipping (optim/clip.h). Each chunk's sum of squares is formed by a block:
// thread t of `threads` sums the chunk's floats t, t + threads, ... in order, in double, and the
// block adds the threads' sums in a fixed tree (clip_tree_level, strides threads/2, threads/4, ...,
// 1); a model's sum of squares is its chunks' sums in chunk-table order. The order differs from
// the CPU's (a vectorized sum over each segment), so the norms may differ from the CPU's in the
// last bits; the result does not depend on the device or the run.
HFTA_HOST_DEVICE inline double clip_thread_sum(const float* grads, int64_t begin, int64_t size,
                                               int t, int threads) {
  double sum = 0.0;
  for (int64_t i = t; i < size; i += threads) {
    const double g = grads[begin + i];
    sum += g * g;
  }
  return sum;
}

HFTA_HOST_DEVICE inline void clip_tree_level(double* partial, int t, int stride) {
  if (t < stride) partial[t] += partial[t + stride];
}

// Model b's norm from its sum of squares, and the factor its gradients are scaled by: max_norm /
// (norm + 1e-6) when that is below 1 and the norm is finite, else 1 (left as they are), as
// clip_grad_norm_models decides.
HFTA_HOST_DEVICE inline float clip_norm(double sum_of_squares) {
  return static_cast<float>(sqrt_d(sum_of_squares));  // IEEE-rounded in double, as the host's
}
HFTA_HOST_DEVICE inline float clip_coefficient(float norm, float max_norm) {
  const float coef = max_norm / (norm + 1e-6f);
  return is_nonfinite(norm) || coef >= 1.0f ? 1.0f : coef;
}

}  // namespace hfta::optim_math
