#include "fused_ops/transform_regularizer.h"

#include <cmath>
#include <vector>

namespace hfta::ref {

// The specification, model by model and sample by sample, in double throughout: M = A A^T - I,
// loss = scale / N * sum_s ||M||_F; da = 2 g M A with g = dloss * scale / N / ||M|| (0 at M = 0).

namespace {

// M of the k x k matrix a, and its Frobenius norm.
double deviation(const float* a, int64_t k, std::vector<double>& m) {
  m.assign(static_cast<size_t>(k * k), 0.0);
  double sq = 0.0;
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j) {
      double acc = i == j ? -1.0 : 0.0;
      for (int64_t l = 0; l < k; ++l) acc += double(a[i * k + l]) * double(a[j * k + l]);
      m[static_cast<size_t>(i * k + j)] = acc;
      sq += acc * acc;
    }
  return std::sqrt(sq);
}

}  // namespace

void transform_regularizer_forward(const TransformRegularizerParams& p,
                                   const TransformRegularizerForwardArgs& a) {
  check_transform_regularizer(p, a);
  const int64_t kk = p.k * p.k;
  std::vector<double> m;
  for (int64_t b = 0; b < p.B; ++b) {
    double sum = 0.0;
    for (int64_t s = 0; s < p.N; ++s) sum += deviation(a.a.data + (b * p.N + s) * kk, p.k, m);
    a.loss.data[b] = static_cast<float>(double(p.scale) * sum / double(p.N));
  }
}

void transform_regularizer_backward(const TransformRegularizerParams& p,
                                    const TransformRegularizerBackwardArgs& a) {
  check_transform_regularizer_backward(p, a);
  if (a.da.empty()) return;
  const int64_t k = p.k, kk = k * k;
  std::vector<double> m;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t s = 0; s < p.N; ++s) {
      const float* ab = a.a.data + (b * p.N + s) * kk;
      float* dab = a.da.data + (b * p.N + s) * kk;
      const double norm = deviation(ab, k, m);
      const double g =
          norm > 0.0 ? double(a.dloss.data[b]) * double(p.scale) / double(p.N) / norm : 0.0;
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < k; ++j) {
          double acc = 0.0;
          for (int64_t l = 0; l < k; ++l) acc += m[static_cast<size_t>(i * k + l)] * ab[l * k + j];
          const float v = static_cast<float>(2.0 * g * acc);
          float& d = dab[i * k + j];
          d = a.accumulate_dx ? d + v : v;
        }
    }
}

}  // namespace hfta::ref
