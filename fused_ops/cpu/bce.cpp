// CPU fused binary cross-entropy with logits.
//
// A GAN's loss has one logit per sample, so the op's whole input is B*N floats (8 x 128 in a
// DCGAN array): the time goes to calling it, not to arithmetic. So the loops are plain float
// code with glibc's expf/log1pf (within an ulp or two: no approximation of ours to
// budget for), each model summed in double in sample order; models go to the threads only when
// there are enough logits to pay for waking them. Each model's sums run in its own order
// whatever B or the thread count, so model b's loss is bit-identical alone and in an array.
#include "fused_ops/bce.h"

#include <cmath>

#include "core/parallel.h"

namespace hfta::cpu {

namespace {

// Below this many logits the loops stay on the calling thread.
constexpr int64_t kParallelLogits = 1 << 14;

template <typename F>
void for_each_model(const BceWithLogitsParams& p, F&& f) {
  if (p.B * p.N < kParallelLogits) {
    for (int64_t b = 0; b < p.B; ++b) f(b);
  } else {
    parallel_for(p.B, f);
  }
}

// sigmoid(x) from e = exp(-|x|), which neither overflows nor loses x's sign.
inline float sigmoid_from(float x, float e) {
  return x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

}  // namespace

void bce_with_logits_forward(const BceWithLogitsParams& p, const BceWithLogitsForwardArgs& a) {
  const float* targets = a.targets.data;
  for_each_model(p, [&](int64_t b) {
    const float* x = a.logits.data + b * p.N;
    double loss = 0.0, mean_sigmoid = 0.0;
    for (int64_t n = 0; n < p.N; ++n) {
      // A NaN x makes x * t and log1p(exp(-|x|)) NaN (the max alone would drop it).
      const float e = std::exp(-std::fabs(x[n]));
      const float positive = x[n] > 0.0f ? x[n] : 0.0f;
      loss += double(positive - x[n] * targets[n] + std::log1p(e));
      mean_sigmoid += double(sigmoid_from(x[n], e));
    }
    a.losses.data[b] = static_cast<float>(loss / double(p.N));
    if (!a.mean_sigmoid.empty())
      a.mean_sigmoid.data[b] = static_cast<float>(mean_sigmoid / double(p.N));
  });
}

void bce_with_logits_backward(const BceWithLogitsParams& p, const BceWithLogitsBackwardArgs& a) {
  const float* targets = a.targets.data;
  for_each_model(p, [&](int64_t b) {
    const float* x = a.logits.data + b * p.N;
    float* d = a.dlogits.data + b * p.N;
    const float scale = static_cast<float>(double(a.dlosses.data[b]) / double(p.N));
    for (int64_t n = 0; n < p.N; ++n) {
      const float g = scale * (sigmoid_from(x[n], std::exp(-std::fabs(x[n]))) - targets[n]);
      d[n] = a.accumulate_dx ? d[n] + g : g;
    }
  });
}

}  // namespace hfta::cpu
