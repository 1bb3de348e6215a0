#include "optim/clip.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"

namespace hfta {

void clip_grad_norm_per_model(std::span<const TensorView> grads, int64_t B,
                              std::span<const float> max_norm, std::span<float> norms) {
  clip_grad_norm_models(grads, B, max_norm, 0, B, norms);
}

void clip_grad_norm_models(std::span<const TensorView> grads, int64_t B,
                           std::span<const float> max_norm, int64_t first, int64_t count,
                           std::span<float> norms) {
  check_clip_limits(max_norm, B, norms);
  for (const TensorView& g : grads)
    HFTA_CHECK(g.shape.rank() >= 1 && g.shape[0] == B,
               "gradient clipping: a gradient of shape {} is not [{}, ...]", g.shape.str(), B);
  HFTA_CHECK(first >= 0 && count >= 1 && first + count <= B,
             "gradient clipping of models [{}, {}): the array has models 0..{}", first,
             first + count, B - 1);
  std::vector<double> sq(static_cast<size_t>(count), 0.0);
  // One model per iteration: each sums its own slices, so the order of additions is fixed (the
  // simd lanes' partial sums included: it does not depend on B, the plan or the threads).
  parallel_for(count, [&](int64_t i) {
    const int64_t b = first + i;
    double s = 0.0;
    for (const TensorView& g : grads) {
      const int64_t n = g.numel() / B;
      const float* p = g.data + b * n;
#pragma omp simd reduction(+ : s)
      for (int64_t k = 0; k < n; ++k) s += static_cast<double>(p[k]) * p[k];
    }
    sq[static_cast<size_t>(i)] = s;
  });
  for (int64_t b = first; b < first + count; ++b) {
    const float norm = static_cast<float>(std::sqrt(sq[static_cast<size_t>(b - first)]));
    if (!norms.empty()) norms[static_cast<size_t>(b)] = norm;
    const float limit = max_norm[max_norm.size() == 1 ? 0 : static_cast<size_t>(b)];
    const float coef = limit / (norm + 1e-6f);
    if (!std::isfinite(norm) || coef >= 1.0f) continue;
    for (const TensorView& g : grads) {
      const int64_t n = g.numel() / B;
      float* p = g.data + b * n;
      for (int64_t i = 0; i < n; ++i) p[i] *= coef;
    }
  }
}

}  // namespace hfta
