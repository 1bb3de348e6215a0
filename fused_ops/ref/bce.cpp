#include "fused_ops/bce.h"

#include <cmath>

namespace hfta {
namespace ref {

namespace {

// sigmoid(x) in double, from exp(-|x|) so that neither branch overflows.
double sigmoid(double x) {
  const double e = std::exp(-std::fabs(x));
  return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

}  // namespace

// The specification: B independent single-model mean losses, each sample in double. NaN needs
// no special case: a NaN logit makes its term, and so its model's sums, NaN.
void bce_with_logits_forward(const BceWithLogitsParams& p, const BceWithLogitsForwardArgs& a) {
  check_bce_with_logits(p, a);
  for (int64_t b = 0; b < p.B; ++b) {
    double loss = 0.0, mean_sigmoid = 0.0;
    for (int64_t n = 0; n < p.N; ++n) {
      const double x = a.logits.data[b * p.N + n], t = a.targets.data[n];
      loss += std::fmax(x, 0.0) - x * t + std::log1p(std::exp(-std::fabs(x)));
      mean_sigmoid += sigmoid(x);
    }
    a.losses.data[b] = static_cast<float>(loss / p.N);
    if (!a.mean_sigmoid.empty()) a.mean_sigmoid.data[b] = static_cast<float>(mean_sigmoid / p.N);
  }
}

void bce_with_logits_backward(const BceWithLogitsParams& p, const BceWithLogitsBackwardArgs& a) {
  check_bce_with_logits_backward(p, a);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t n = 0; n < p.N; ++n) {
      const int64_t i = b * p.N + n;
      const double x = a.logits.data[i], t = a.targets.data[n];
      const float g = static_cast<float>(double(a.dlosses.data[b]) * (sigmoid(x) - t) / p.N);
      a.dlogits.data[i] = a.accumulate_dx ? a.dlogits.data[i] + g : g;
    }
}

}  // namespace ref
}  // namespace hfta
