// The CUDA BCE-with-logits' arithmetic (fused_ops/bce.h's contract), written once for the kernels
// (fused_ops/cuda/bce_kernels.cu) and the host mirror (tests/cuda/test_cuda_bce.cpp):
// `__host__ __device__` under nvcc, plain inline C++ elsewhere.
//
//   logits, dlogits [B, N]   targets [N] (shared)   losses, mean_sigmoid, dlosses [B]
//
// Forward: one block of `threads` threads per model. Thread t sums the terms of samples
// n = t, t + threads, ... in sample order in double (each term computed in float as the CPU op
// does: max(x, 0) - x t + log1p(exp(-|x|)), and sigmoid(x)); the block then adds the partials by a
// fixed tree (partial[t] += partial[t + stride], stride = threads/2, threads/4, ..., 1), and
// thread 0 writes float(sum / N). The order depends on N and the thread count alone, never on B:
// model b gets the same bits in an array as alone, and no atomics.
// Backward: one thread per logit, dlogits = float(dlosses[b] / N) * (sigmoid(x) - t), the CPU
// op's float arithmetic; written or added to.
// expf and log1pf are the device's (CUDA documents 2 ulp and 1 ulp) against glibc's on the CPU:
// the two agree within a few ulp per term, not bit for bit.
//
// No project header but backend/cuda/host_device.h: nvcc compiles this in C++17 and cannot
// include core/error.h (fmt 9).
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::bce_math {

// exp(-|x|): never overflows; NaN for NaN.
HFTA_HOST_DEVICE inline float exp_minus_abs(float x) { return exp_f(-(x < 0.0f ? -x : x)); }

// sigmoid(x) from e = exp(-|x|), which keeps x's sign without overflow.
HFTA_HOST_DEVICE inline float sigmoid_from(float x, float e) {
  return x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

// One sample's loss, max(x, 0) - x t + log1p(exp(-|x|)), in float. A NaN x makes x t and the
// log1p NaN (the max alone would drop it). The product is rounded on its own, as the CPU op's.
HFTA_HOST_DEVICE inline float loss_term(float x, float t, float e) {
  const float positive = x > 0.0f ? x : 0.0f;
  return positive - rounded_product(x, t) + log1p_f(e);
}

// Thread t's partial sums of model b's loss terms and sigmoids over samples t, t + threads, ...
struct Partial {
  double loss = 0.0, sigmoid = 0.0;
};

// NOLINTBEGIN(bugprone-easily-swappable-parameters): the kernel's and the mirror's one call
HFTA_HOST_DEVICE inline Partial model_partial(const float* logits, const float* targets, int64_t N,
                                              int64_t b, int t, int threads) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  Partial p;
  const float* x = logits + b * N;
  for (int64_t n = t; n < N; n += threads) {
    const float e = exp_minus_abs(x[n]);
    p.loss += double(loss_term(x[n], targets[n], e));
    p.sigmoid += double(sigmoid_from(x[n], e));
  }
  return p;
}

HFTA_HOST_DEVICE inline Partial combine(Partial a, Partial b) {
  return {a.loss + b.loss, a.sigmoid + b.sigmoid};
}

// The mean of a model's N terms, from their tree sum.
HFTA_HOST_DEVICE inline float mean_of(double sum, int64_t N) {
  return static_cast<float>(sum / double(N));
}

// dlogits[i] for flat index i of [B, N] (each thread reads its logit before writing).
// NOLINTBEGIN(bugprone-easily-swappable-parameters): the kernel's and the mirror's one call
HFTA_HOST_DEVICE inline void backward_at(const float* logits, const float* targets,
                                         const float* dlosses, float* dlogits, int64_t N,
                                         bool accumulate, int64_t i) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  const int64_t b = i / N, n = i % N;
  const float x = logits[i];
  const float scale = static_cast<float>(double(dlosses[b]) / double(N));
  const float g = rounded_product(scale, sigmoid_from(x, exp_minus_abs(x)) - targets[n]);
  dlogits[i] = accumulate ? dlogits[i] + g : g;
}

}  // namespace hfta::bce_math
