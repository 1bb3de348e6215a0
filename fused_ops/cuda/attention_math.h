// The CUDA attention's softmax arithmetic (fused_ops/attention.h's contract), written once for the
// kernels (fused_ops/cuda/attention_kernels.cu) and the host test
// (tests/cuda/test_cuda_attention.cpp). No project header but backend/cuda/host_device.h (nvcc
// compiles this in C++17).
//
//   probs, weights, ds [B*n, H, T, T]: rows r = ((bs * H) + h) * T + t of T keys
//   key padding [n, T] (int32 or uint8, nonzero = padded; both null: none)
//
// One warp of 32 lanes per row: lane l takes the keys l, l + 32, ... in order (its partial), and
// the lanes' partials are added in a fixed tree (partial[l] += partial[l + stride] for stride =
// 16, ..., 1; lane 0's result, as __shfl_down_sync leaves it). Keys that are padded, or later
// than the query under causal masking, are masked: probability 0. The maximum is taken over the
// unmasked scores (a NaN score makes it NaN, so the row's unmasked probabilities are NaN, as the
// reference's); exp and the sums are in double, each probability rounded once: within a rounding
// or two of the double reference (the scores themselves come from float GEMMs). A row whose keys
// are all masked is all 0 (the contract's definition). Backward, per row: dp = dP * mask,
// c = sum P dp, dS = P (dp - c), in double, in the same lanes and tree.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::attention_math {

inline constexpr int kLanes = 32;

struct SoftmaxShape {
  int64_t rows = 0;  // B*n*H*T
  int64_t n = 1, H = 1, T = 1;
  bool causal = false;
  const int32_t* pad32 = nullptr;
  const uint8_t* pad8 = nullptr;
  HFTA_HOST_DEVICE bool masked(int64_t r, int64_t u) const {
    const int64_t t = r % T, s = (r / (T * H)) % n;
    if (causal && u > t) return true;
    if (pad32 != nullptr) return pad32[s * T + u] != 0;
    if (pad8 != nullptr) return pad8[s * T + u] != 0;
    return false;
  }
};

// The larger of two maxima; NaN wins.
HFTA_HOST_DEVICE inline float max_of(float a, float b) {
  return (a != a || b != b) ? a + b : (a > b ? a : b);
}

// Lane `lane`'s maximum over its unmasked scores of row r (-inf: none).
HFTA_HOST_DEVICE inline float max_partial(const SoftmaxShape& s, const float* scores, int64_t r,
                                          int lane) {
  const float* row = scores + r * s.T;
  float m = -INFINITY;
  for (int64_t u = lane; u < s.T; u += kLanes)
    if (!s.masked(r, u)) m = max_of(m, row[u]);
  return m;
}

// Lane `lane`'s sum of exp(score - m) over its unmasked scores.
HFTA_HOST_DEVICE inline double exp_partial(const SoftmaxShape& s, const float* scores, int64_t r,
                                           float m, int lane) {
  const float* row = scores + r * s.T;
  double sum = 0.0;
  for (int64_t u = lane; u < s.T; u += kLanes)
    if (!s.masked(r, u)) sum += exp(double(row[u]) - double(m));
  return sum;
}

// Lane `lane`'s probabilities, written over its scores (in place).
HFTA_HOST_DEVICE inline void write_probs(const SoftmaxShape& s, float* scores, int64_t r, float m,
                                         double sum, int lane) {
  float* row = scores + r * s.T;
  const bool none = m == -INFINITY;  // every key masked: the row is 0
  for (int64_t u = lane; u < s.T; u += kLanes)
    row[u] =
        (none || s.masked(r, u)) ? 0.0f : static_cast<float>(exp(double(row[u]) - double(m)) / sum);
}

// dp = dP * mask (mask null: no dropout), a product of floats, exact in double.
HFTA_HOST_DEVICE inline double dp_at(const float* dprobs, const float* mask, int64_t i) {
  return mask != nullptr ? double(dprobs[i]) * double(mask[i]) : double(dprobs[i]);
}

// Lane `lane`'s part of c = sum over keys of P * dp.
HFTA_HOST_DEVICE inline double dot_partial(int64_t T, const float* probs, const float* dprobs,
                                           const float* mask, int64_t r, int lane) {
  double c = 0.0;
  for (int64_t u = lane; u < T; u += kLanes) {
    const int64_t i = r * T + u;
    c = fma(double(probs[i]), dp_at(dprobs, mask, i), c);
  }
  return c;
}

// dS = P (dp - c), written over dP (in place).
HFTA_HOST_DEVICE inline void write_ds(int64_t T, const float* probs, float* dprobs,
                                      const float* mask, int64_t r, double c, int lane) {
  for (int64_t u = lane; u < T; u += kLanes) {
    const int64_t i = r * T + u;
    dprobs[i] = static_cast<float>(double(probs[i]) * (dp_at(dprobs, mask, i) - c));
  }
}

// weights = probs * mask (the CPU op's float product), one element.
HFTA_HOST_DEVICE inline void weight_at(const float* probs, const float* mask, float* weights,
                                       int64_t i) {
  weights[i] = rounded_product(probs[i], mask[i]);
}

}  // namespace hfta::attention_math
