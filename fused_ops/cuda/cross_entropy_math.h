// The CUDA cross-entropy's arithmetic (fused_ops/cross_entropy.h's contract), written once for
// the kernels (fused_ops/cuda/cross_entropy_kernels.cu) and the host tests
// (tests/cuda/test_cuda_cross_entropy.cpp): `__host__ __device__` under nvcc, plain inline C++
// elsewhere.
//
//   logits, probs, dlogits  [B, N, K]    labels [N] int32 (shared)    losses, dlosses [B]
//
// Forward, as the CPU op (fused_ops/cpu/cross_entropy.cpp) does it, in three launches:
//   1. rows: one block of kThreads threads per row. Thread t takes the columns k = t (mod
//      kThreads): its partial maximum (NaN skipped, as the CPU's `x > m ? x : m`) and its partial
//      sum of e_k = exp(x_k - m) in double; the block combines the partials by a fixed tree
//      (stride kThreads/2, then /4, ...: partial[t] op= partial[t + stride]), so the sum's order is
//      fixed whatever the launch. probs = e_k * float(1 / sum). For a row whose label is not
//      ignored, the label's slot then holds the row's log-likelihood x_label - m - log(sum) as
//      float (the CPU's parking trick: no workspace).
//   2. models: one thread per model sums its parked log-likelihoods in row order in double
//      (exactly the CPU's pass 2), loss = -sum / M (0 when M = 0).
//   3. rows: each parked slot becomes float(exp(double(slot))), the label's probability.
// exp is taken in double and rounded to float (the CPU uses a float polynomial within 8.4e-8
// relative, so the two agree to a few ulp, not bitwise).
// Backward: one thread per element, dlogits = scale * probs (scale * (probs - 1) at the label),
// scale = float(dlosses[b] / M), 0 on ignored rows: the CPU's arithmetic, bit for bit. Each
// element reads only its own probability, so dlogits may be probs.
//
// No project header but backend/cuda/host_device.h: nvcc compiles this in C++17 and cannot
// include core/error.h (fmt 9).
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::ce_math {

// One problem: sizes, the number M of rows not ignored, and ignore_index when there is one.
struct CeShape {
  int64_t B, N, K, M;
  bool has_ignore_index;
  int32_t ignore_index;
};

HFTA_HOST_DEVICE inline bool ignored(const CeShape& s, int32_t label) {
  return s.has_ignore_index && label == s.ignore_index;
}

// Thread t's partial maximum of row x over k = t, t + threads, ... (-inf when it has none).
HFTA_HOST_DEVICE inline float row_max_partial(const float* x, int64_t K, int t, int threads) {
  float m = -__builtin_huge_valf();
  for (int64_t k = t; k < K; k += threads) m = x[k] > m ? x[k] : m;
  return m;
}

// The tree's combining steps: partial[t] = combine(partial[t], partial[t + stride]).
HFTA_HOST_DEVICE inline float combine_max(float a, float b) { return b > a ? b : a; }
HFTA_HOST_DEVICE inline double combine_sum(double a, double b) { return a + b; }

// Thread t's partial sum of e_k = exp(x_k - m), each e_k also written to probs[k].
HFTA_HOST_DEVICE inline double row_exp_partial(const float* x, float* probs, int64_t K, float m,
                                               int t, int threads) {
  double s = 0.0;
  for (int64_t k = t; k < K; k += threads) {
    const float e = static_cast<float>(exp_d(double(x[k] - m)));
    probs[k] = e;
    s += e;
  }
  return s;
}

// probs[k] *= float(1 / sum) over thread t's columns.
HFTA_HOST_DEVICE inline void row_scale(float* probs, int64_t K, double sum, int t, int threads) {
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t k = t; k < K; k += threads) probs[k] *= inv;
}

// The row's log-likelihood log softmax(x)[label], rounded to float to be parked in its slot.
HFTA_HOST_DEVICE inline float row_log_likelihood(float x_label, float m, double sum) {
  return static_cast<float>(double(x_label) - m - log_d(sum));
}

// losses[b]: model b's parked log-likelihoods summed in row order in double, over -M.
HFTA_HOST_DEVICE inline void model_loss_at(const CeShape& s, const float* probs,
                                           const int32_t* labels, float* losses, int64_t b) {
  double total = 0.0;
  for (int64_t n = 0; n < s.N; ++n) {
    const int32_t label = labels[n];
    if (!ignored(s, label)) total += double(probs[(b * s.N + n) * s.K + label]);
  }
  losses[b] = s.M == 0 ? 0.0f : static_cast<float>(-total / double(s.M));
}

// Row `row`'s parked log-likelihood back to the label's probability.
HFTA_HOST_DEVICE inline void restore_label_prob_at(const CeShape& s, float* probs,
                                                   const int32_t* labels, int64_t row) {
  const int32_t label = labels[row % s.N];
  if (ignored(s, label)) return;
  float& slot = probs[row * s.K + label];
  slot = static_cast<float>(exp_d(double(slot)));
}

// dlogits[i] for flat index i of [B, N, K].
HFTA_HOST_DEVICE inline void cross_entropy_backward_at(const CeShape& s, const float* probs,
                                                       const int32_t* labels, const float* dlosses,
                                                       float* dlogits, int64_t i) {
  const int64_t row = i / s.K, k = i % s.K;
  const int32_t label = labels[row % s.N];
  if (ignored(s, label)) {  // also every row when M = 0
    dlogits[i] = 0.0f;
    return;
  }
  const float scale = static_cast<float>(double(dlosses[row / s.N]) / double(s.M));
  const float p = probs[i];
  dlogits[i] = k == label ? scale * (p - 1.0f) : scale * p;
}

// count_correct's test for one row of K logits: its first maximum is `label` and no logit is NaN
// (the CPU op's rule; an ignored row is never counted, which the caller checks).
HFTA_HOST_DEVICE inline bool row_is_correct(const float* x, int64_t K, int32_t label) {
  int64_t first_max = 0;
  for (int64_t k = 0; k < K; ++k) {
    if (x[k] != x[k]) return false;
    if (x[k] > x[first_max]) first_max = k;
  }
  return first_max == label;
}

// Model b's count: its rows in order (integers: any order gives the same count).
HFTA_HOST_DEVICE inline int64_t correct_rows_partial(const CeShape& s, const float* logits,
                                                     const int32_t* labels, int64_t b, int t,
                                                     int threads) {
  int64_t count = 0;
  for (int64_t n = t; n < s.N; n += threads) {
    const int32_t label = labels[n];
    if (!ignored(s, label) && row_is_correct(logits + (b * s.N + n) * s.K, s.K, label)) ++count;
  }
  return count;
}

}  // namespace hfta::ce_math
