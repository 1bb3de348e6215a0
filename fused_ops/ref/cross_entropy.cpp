#include "fused_ops/cross_entropy.h"

#include <cmath>

namespace hfta {
namespace ref {

// The specification: B independent single-model losses, each row in double. NaN needs no
// special case: a NaN (or +inf) logit makes the row's sum of exponentials NaN. Ignored rows get
// their softmax but no part of the loss, whose mean is over the M = target rows (0 when M = 0).
void cross_entropy_forward(const CrossEntropyParams& p, const CrossEntropyForwardArgs& a) {
  const TensorView &logits = a.logits, &losses = a.losses;
  const IndexView& labels = a.labels;
  const CrossEntropySaved& saved = a.saved;
  check_cross_entropy(p, a);
  const int64_t K = p.K, M = cross_entropy_target_rows(p, labels);
  for (int64_t b = 0; b < p.B; ++b) {
    double total = 0.0;
    for (int64_t n = 0; n < p.N; ++n) {
      const float* x = logits.data + (b * p.N + n) * K;
      float* probs = saved.probs.data + (b * p.N + n) * K;
      double m = x[0];
      for (int64_t k = 1; k < K; ++k) m = x[k] > m ? x[k] : m;
      double s = 0.0;
      for (int64_t k = 0; k < K; ++k) s += std::exp(x[k] - m);
      for (int64_t k = 0; k < K; ++k) probs[k] = static_cast<float>(std::exp(x[k] - m) / s);
      if (!p.ignored(labels.data[n])) total += x[labels.data[n]] - m - std::log(s);
    }
    losses.data[b] = M == 0 ? 0.0f : static_cast<float>(-total / M);
  }
}

void cross_entropy_backward(const CrossEntropyParams& p, const CrossEntropyBackwardArgs& a) {
  const TensorView &dlosses = a.dlosses, &dlogits = a.dlogits;
  const IndexView& labels = a.labels;
  const CrossEntropySaved& saved = a.saved;
  check_cross_entropy_backward(p, a);
  const int64_t K = p.K, M = cross_entropy_target_rows(p, labels);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t n = 0; n < p.N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const int64_t at = (b * p.N + n) * K + k;
        if (p.ignored(labels.data[n])) {
          dlogits.data[at] = 0.0f;
          continue;
        }
        const double onehot = k == labels.data[n] ? 1.0 : 0.0;
        dlogits.data[at] =
            static_cast<float>(double(dlosses.data[b]) * (saved.probs.data[at] - onehot) / M);
      }
}

void count_correct(const CrossEntropyParams& p, const CountCorrectArgs& a) {
  const TensorView& logits = a.logits;
  const IndexView& labels = a.labels;
  const std::span<int64_t> correct = a.correct;
  check_count_correct(p, a);
  for (int64_t b = 0; b < p.B; ++b) {
    correct[b] = 0;
    for (int64_t n = 0; n < p.N; ++n) {
      const float* x = logits.data + (b * p.N + n) * p.K;
      int64_t best = 0;
      bool has_nan = false;
      for (int64_t k = 0; k < p.K; ++k) {
        has_nan = has_nan || std::isnan(x[k]);
        if (x[k] > x[best]) best = k;  // strict: the first maximum wins ties
      }
      correct[b] += !has_nan && best == labels.data[n] && !p.ignored(labels.data[n]);
    }
  }
}

}  // namespace ref
}  // namespace hfta
