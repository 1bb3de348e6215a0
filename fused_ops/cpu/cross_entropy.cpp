// CPU fused softmax cross-entropy.
//
// Parallelization: the B*N rows are independent, so parallel_for spreads rows (not models) over
// the threads; one model with many rows uses every thread. Each row is three vectorized passes
// (max; exp and sum; scale). glibc's expf does not vectorize without -ffast-math, so the exp pass
// uses exp_approx (fused_ops/cpu/exp_approx.h, relative error 8.4e-8): several times to an order of
// magnitude faster than scalar exp loops (docs/benchmarks.md, 'Measurements behind code choices').
//
// Per-model losses need a sum over each model's rows, but no scratch memory is owned here and a
// per-thread partial sum would make the result depend on the thread count. So pass 1 parks each
// row's log-likelihood (as float) in its label slot of probs; pass 2, one model per thread, sums
// the model's N values in row order in double (the order of that model alone, whatever B or the
// thread count) and puts the label's probability back as exp(log-likelihood). That probability
// is off by at most |l| e^l 2^-24 <= 2^-24 / e (2.2e-8) absolute, from the float-rounded l.
#include "fused_ops/cross_entropy.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "fused_ops/cpu/exp_approx.h"

namespace hfta::cpu {

namespace {

// Writes softmax(x) to probs and returns log softmax(x)[label]. A NaN or +inf logit makes the
// sum of exponentials NaN (x - max is NaN there), and with it the whole row.
// The last K % 16 logits go through a 16-wide buffer padded with -inf (whose exp is 0), so every
// loop runs whole vectors: GCC's scalar remainder loops cost about 12 ns per element (K = 10:
// 170 ns a row with them, 85 ns padded; K = 1000: the same either way).
// NOLINTBEGIN(bugprone-easily-swappable-parameters): an internal kernel helper called only in this
// file, at a few call sites that pass locals named like its parameters.
double softmax_row(const float* x, float* probs, int64_t K, int32_t label) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  constexpr int64_t kWidth = 16;
  const float kMinusInf = -std::numeric_limits<float>::infinity();
  const int64_t body = K / kWidth * kWidth, tail = K - body;
  float tail_x[kWidth], tail_e[kWidth];
  for (int64_t k = 0; k < kWidth; ++k) tail_x[k] = k < tail ? x[body + k] : kMinusInf;
  const float x_label = x[label];
  float m = kMinusInf;
#pragma omp simd reduction(max : m)
  for (int64_t k = 0; k < body; ++k) m = x[k] > m ? x[k] : m;
  if (tail > 0) {
#pragma omp simd reduction(max : m)
    for (int64_t k = 0; k < kWidth; ++k) m = tail_x[k] > m ? tail_x[k] : m;
  }
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < body; ++k) {
    const float e = exp_approx(x[k] - m);
    probs[k] = e;
    s += e;
  }
  if (tail > 0) {
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < kWidth; ++k) {
      const float e = exp_approx(tail_x[k] - m);
      tail_e[k] = e;
      s += e;
    }
  }
  const float inv = static_cast<float>(1.0 / s);
#pragma omp simd
  for (int64_t k = 0; k < body; ++k) probs[k] *= inv;
  for (int64_t k = 0; k < tail; ++k) probs[body + k] = tail_e[k] * inv;
  return double(x_label) - m - std::log(s);
}

}  // namespace

void cross_entropy_forward(const CrossEntropyParams& p, const CrossEntropyForwardArgs& a) {
  const TensorView &logits = a.logits, &losses = a.losses;
  const IndexView& labels = a.labels;
  const CrossEntropySaved& saved = a.saved;
  const int64_t N = p.N, K = p.K, M = cross_entropy_target_rows(p, labels);
  float* probs = saved.probs.data;
  parallel_for(p.B * N, [&](int64_t row) {
    const int32_t label = labels.data[row % N];
    // An ignored row still gets its softmax (probs stays fully written); its label may be no
    // class index, so class 0 stands in and nothing is parked.
    const bool ignored = p.ignored(label);
    const double log_likelihood =
        softmax_row(logits.data + row * K, probs + row * K, K, ignored ? 0 : label);
    if (!ignored) probs[row * K + label] = static_cast<float>(log_likelihood);  // for pass 2
  });
  parallel_for(p.B, [&](int64_t b) {
    double total = 0.0;
    for (int64_t n = 0; n < N; ++n) {
      if (p.ignored(labels.data[n])) continue;
      float& slot = probs[(b * N + n) * K + labels.data[n]];
      const double log_likelihood = slot;
      total += log_likelihood;
      slot = static_cast<float>(std::exp(log_likelihood));
    }
    losses.data[b] = M == 0 ? 0.0f : static_cast<float>(-total / M);
  });
}

void cross_entropy_backward(const CrossEntropyParams& p, const CrossEntropyBackwardArgs& a) {
  const TensorView &dlosses = a.dlosses, &dlogits = a.dlogits;
  const IndexView& labels = a.labels;
  const CrossEntropySaved& saved = a.saved;
  const int64_t N = p.N, K = p.K, M = cross_entropy_target_rows(p, labels);
  parallel_for(p.B * N, [&](int64_t row) {
    const int32_t label = labels.data[row % N];
    float* d = dlogits.data + row * K;
    if (p.ignored(label)) {  // also every row when M = 0
      std::fill(d, d + K, 0.0f);
      return;
    }
    const float scale = static_cast<float>(double(dlosses.data[row / N]) / M);
    const float* probs = saved.probs.data + row * K;
    const float p_label = probs[label];  // read first: d may be probs
#pragma omp simd
    for (int64_t k = 0; k < K; ++k) d[k] = scale * probs[k];
    d[label] = scale * (p_label - 1.0f);
  });
}

void count_correct(const CrossEntropyParams& p, const CountCorrectArgs& a) {
  const TensorView& logits = a.logits;
  const IndexView& labels = a.labels;
  const std::span<int64_t> correct = a.correct;
  const int64_t N = p.N, K = p.K;
  for (int64_t b = 0; b < p.B; ++b) correct[b] = 0;
  // Integer counts: atomic increments give the same result in any order.
  parallel_for(p.B * N, [&](int64_t row) {
    const float* x = logits.data + row * K;
    const int32_t label = labels.data[row % N];
    if (p.ignored(label)) return;
    // Vectorized: the row maximum and whether any logit is NaN, then "the first maximum is the
    // label" as "x[label] is the maximum and no earlier logit equals it".
    float m = x[0];
    int has_nan = 0;
#pragma omp simd reduction(max : m) reduction(| : has_nan)
    for (int64_t k = 0; k < K; ++k) {
      m = x[k] > m ? x[k] : m;
      has_nan |= x[k] != x[k];
    }
    if (has_nan || x[label] != m) return;
    int earlier = 0;
#pragma omp simd reduction(| : earlier)
    for (int64_t k = 0; k < label; ++k) earlier |= x[k] == m;
    if (!earlier)
      std::atomic_ref<int64_t>(correct[row / N]).fetch_add(1, std::memory_order_relaxed);
  });
}

}  // namespace hfta::cpu
