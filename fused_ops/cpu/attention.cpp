// CPU fused attention core.
//
// Fusion over models: the B models' n sequences and H heads are B*n*H independent small problems
// (T = 32..128 tokens, dh = 64 for the transformers we train), so one parallel loop spreads all
// of them over the threads, whatever B is; each problem runs single-threaded GEMMs (cpu::sgemm,
// which stays on its thread inside a parallel region) straight on the strided head slices of qkv
// (leading dimension 3D), so nothing is transposed or copied. The [T, T] scores are computed into
// the saved probs block and turned into probabilities there, row by row, with the vectorizable
// exp_approx; scratch is one or two [T, T] blocks per thread (thread_local, grown once).
//
// Dropout: model b's mask is one sequential stream, so it cannot be drawn inside the per-problem
// loop (problems of one model run on several threads). A first parallel pass draws each model's
// whole mask, one model per thread, in the single-model order (s, h, t, t') straight into
// saved.dropout_mask; the problems then read it.
//
// Reference kept for later tuning: no timing was taken while this was written (a shared build
// machine); see benchmarks/op_bench for how to measure, and an AVX-512 micro kernel for the
// T x T x dh products is the next step if sgemm's per-call overhead shows at small T.
#include "fused_ops/attention.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "backend/cpu/runtime.h"
#include "core/parallel.h"
#include "fused_ops/cpu/exp_approx.h"

namespace hfta::cpu {

namespace {

struct Problem {
  const float *q, *k, *v;  // head slices, row stride 3D
  int64_t row0;            // first token row of the sequence in [B*n*T, ...] tensors
  int64_t probs0;          // first element of the head's [T, T] block
  int64_t s;               // sequence index (for the key padding mask)
};

Problem problem(const AttentionParams& p, const float* qkv, int64_t index) {
  const int64_t h = index % p.H, bs = index / p.H, s = bs % p.n;
  const int64_t row0 = bs * p.T;
  const float* q = qkv + row0 * 3 * p.D + h * p.head_dim();
  return {q, q + p.D, q + 2 * p.D, row0, index * p.T * p.T, s};
}

float* scratch(std::vector<float>& buffer, int64_t size) {
  if (static_cast<int64_t>(buffer.size()) < size) buffer.resize(static_cast<size_t>(size));
  return buffer.data();
}

// Turns one row of raw scores into probabilities in place. bias[u] is 0 or -inf (padded key);
// under causal masking only the first `keys` entries count. A row with no key left is all 0.
// NOLINTBEGIN(bugprone-easily-swappable-parameters): an internal helper called in this file only.
void softmax_row(float* row, const float* bias, int64_t T, int64_t keys) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  const float kMinusInf = -std::numeric_limits<float>::infinity();
  float m = kMinusInf;
  int has_nan = 0;
#pragma omp simd reduction(max : m) reduction(| : has_nan)
  for (int64_t u = 0; u < keys; ++u) {
    const float x = row[u] + bias[u];
    row[u] = x;
    m = x > m ? x : m;
    has_nan |= x != x;
  }
  for (int64_t u = keys; u < T; ++u) row[u] = 0.0f;
  if (m == kMinusInf && !has_nan) {  // every key masked: defined as 0
    std::fill(row, row + keys, 0.0f);
    return;
  }
  if (has_nan) m = std::numeric_limits<float>::quiet_NaN();  // the whole row becomes NaN
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t u = 0; u < keys; ++u) {
    const float e = exp_approx(row[u] - m);
    row[u] = e;
    sum += e;
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t u = 0; u < keys; ++u) row[u] *= inv;
}

// Model b's dropout mask over its [n, H, T, T] probs, in the single-model order.
void draw_masks(const AttentionParams& p, std::span<RngStream> streams, float* mask) {
  const int64_t per_model = p.n * p.H * p.T * p.T;
  const float drop = p.dropout_p, keep = p.keep_scale();
  parallel_for(p.B, [&](int64_t b) {
    RngStream& rng = streams[b];
    float* m = mask + b * per_model;
    for (int64_t i = 0; i < per_model; ++i) m[i] = rng.uniform();
#pragma omp simd
    for (int64_t i = 0; i < per_model; ++i) m[i] = m[i] >= drop ? keep : 0.0f;
  });
}

}  // namespace

void attention_forward(const AttentionParams& p, const AttentionForwardArgs& a) {
  const int64_t T = p.T, D = p.D, dh = p.head_dim(), ld = 3 * D;
  const bool dropout = p.dropout_active();
  if (dropout) draw_masks(p, a.streams, a.saved.dropout_mask.data);
  const float kMinusInf = -std::numeric_limits<float>::infinity();
  parallel_for(p.B * p.n * p.H, [&](int64_t index) {
    const Problem pr = problem(p, a.qkv.data, index);
    thread_local std::vector<float> bias_buffer, dropped_buffer;
    float* bias = scratch(bias_buffer, T);
    for (int64_t u = 0; u < T; ++u) {
      const bool pad = !a.key_padding.empty()      ? a.key_padding.data[pr.s * T + u] != 0
                       : !a.key_padding_u8.empty() ? a.key_padding_u8.data[pr.s * T + u] != 0
                                                   : false;
      bias[u] = pad ? kMinusInf : 0.0f;
    }
    float* probs = a.saved.probs.data + pr.probs0;
    sgemm(false, true, T, T, dh, p.score_scale(), pr.q, ld, pr.k, ld, 0.0f, probs, T);
    for (int64_t t = 0; t < T; ++t) softmax_row(probs + t * T, bias, T, p.causal ? t + 1 : T);
    const float* weights = probs;
    if (dropout) {
      float* dropped = scratch(dropped_buffer, T * T);
      const float* mask = a.saved.dropout_mask.data + pr.probs0;
#pragma omp simd
      for (int64_t i = 0; i < T * T; ++i) dropped[i] = probs[i] * mask[i];
      weights = dropped;
    }
    sgemm(false, false, T, dh, T, 1.0f, weights, T, pr.v, ld, 0.0f,
          a.out.data + pr.row0 * D + (index % p.H) * dh, D);
  });
}

void attention_backward(const AttentionParams& p, const AttentionBackwardArgs& a) {
  const int64_t T = p.T, D = p.D, dh = p.head_dim(), ld = 3 * D;
  const bool dropout = p.dropout_active();
  const float beta = a.accumulate_dx ? 1.0f : 0.0f, scale = p.score_scale();
  parallel_for(p.B * p.n * p.H, [&](int64_t index) {
    const Problem pr = problem(p, a.qkv.data, index);
    const int64_t h = index % p.H;
    thread_local std::vector<float> ds_buffer, dropped_buffer;
    float* ds = scratch(ds_buffer, T * T);
    const float* probs = a.saved.probs.data + pr.probs0;
    const float* mask = dropout ? a.saved.dropout_mask.data + pr.probs0 : nullptr;
    const float* dout = a.dout.data + pr.row0 * D + h * dh;
    float* dq = a.dqkv.data + pr.row0 * ld + h * dh;
    float* dk = dq + D;
    float* dv = dq + 2 * D;
    // dV = (P M)^T dO
    const float* weights = probs;
    if (dropout) {
      float* dropped = scratch(dropped_buffer, T * T);
#pragma omp simd
      for (int64_t i = 0; i < T * T; ++i) dropped[i] = probs[i] * mask[i];
      weights = dropped;
    }
    sgemm(true, false, T, dh, T, 1.0f, weights, T, dout, D, beta, dv, ld);
    // dP = (dO V^T) M, then dS = P (dP - rowsum(P dP)) in place.
    sgemm(false, true, T, T, dh, 1.0f, dout, D, pr.v, ld, 0.0f, ds, T);
    for (int64_t t = 0; t < T; ++t) {
      float* row = ds + t * T;
      const float* pr_row = probs + t * T;
      if (dropout) {
        const float* m = mask + t * T;
#pragma omp simd
        for (int64_t u = 0; u < T; ++u) row[u] *= m[u];
      }
      float c = 0.0f;
#pragma omp simd reduction(+ : c)
      for (int64_t u = 0; u < T; ++u) c += pr_row[u] * row[u];
#pragma omp simd
      for (int64_t u = 0; u < T; ++u) row[u] = pr_row[u] * (row[u] - c);
    }
    // dQ = dS K / sqrt(dh), dK = dS^T Q / sqrt(dh)
    sgemm(false, false, T, dh, T, scale, ds, T, pr.k, ld, beta, dq, ld);
    sgemm(true, false, T, dh, T, scale, ds, T, pr.q, ld, beta, dk, ld);
  });
}

}  // namespace hfta::cpu
