// CPU T-Net regularizer: one task per matrix (b, s) over the threads, each computing its M in a
// per-thread buffer, then its norm (forward) or its gradient (backward); the models' losses sum
// their norms in sample order afterwards. The arithmetic is
// fused_ops/cuda/transform_regularizer_math.h's, which the CUDA kernels run too.
#include "fused_ops/transform_regularizer.h"

#include <vector>

#include "core/parallel.h"
#include "fused_ops/cuda/transform_regularizer_math.h"

namespace hfta::cpu {

namespace math = transform_regularizer_math;

namespace {

// Matrix a's M (k x k, double) into the calling thread's buffer, grown once per thread.
const double* deviations(const float* a, int64_t k) {
  thread_local std::vector<double> m;
  m.resize(static_cast<size_t>(k * k));
  for (int64_t e = 0; e < k * k; ++e) math::deviation_at(a, m.data(), k, e);
  return m.data();
}

}  // namespace

void transform_regularizer_forward(const TransformRegularizerParams& p,
                                   const TransformRegularizerForwardArgs& a) {
  const int64_t k = p.k, kk = k * k;
  std::vector<double> norms(static_cast<size_t>(p.B * p.N));
  parallel_for(p.B * p.N, [&](int64_t bs) {
    norms[static_cast<size_t>(bs)] = math::frobenius(deviations(a.a.data + bs * kk, k), kk);
  });
  for (int64_t b = 0; b < p.B; ++b) math::loss_at(norms.data(), a.loss.data, p.N, p.scale, b);
}

void transform_regularizer_backward(const TransformRegularizerParams& p,
                                    const TransformRegularizerBackwardArgs& a) {
  const int64_t k = p.k, kk = k * k;
  parallel_for(p.B * p.N, [&](int64_t bs) {
    const float* ab = a.a.data + bs * kk;
    const double* m = deviations(ab, k);
    const double g =
        math::gradient_scale(a.dloss.data[bs / p.N], p.scale, p.N, math::frobenius(m, kk));
    float* dab = a.da.data + bs * kk;
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j) {
        const float v = math::gradient(m, ab, k, g, i, j);
        float& d = dab[i * k + j];
        d = a.accumulate_dx ? d + v : v;
      }
  });
}

}  // namespace hfta::cpu
