#include "fused_ops/bmm.h"

namespace hfta::ref {

// The specification: for each model b, for each sample s, a plain matrix product with double
// accumulation, written element by element.

void bmm_forward(const BmmParams& p, const BmmForwardArgs& a) {
  check_bmm(p, a);
  const int64_t L = p.L, K = p.K, M = p.M;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t s = 0; s < p.N; ++s) {
      const int64_t problem = b * p.N + s;
      const float* x = a.x.data + problem * L * K;
      const float* t = a.t.data + problem * K * M;
      float* y = a.y.data + problem * L * M;
      for (int64_t l = 0; l < L; ++l)
        for (int64_t m = 0; m < M; ++m) {
          double sum = 0.0;
          for (int64_t k = 0; k < K; ++k) sum += double(x[l * K + k]) * t[k * M + m];
          y[l * M + m] = static_cast<float>(sum);
        }
    }
}

// dx[l, k] = sum_m dy[l, m] t[k, m];  dt[k, m] = sum_l x[l, k] dy[l, m].
void bmm_backward(const BmmParams& p, const BmmBackwardArgs& a) {
  check_bmm_backward(p, a);
  const int64_t L = p.L, K = p.K, M = p.M;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t s = 0; s < p.N; ++s) {
      const int64_t problem = b * p.N + s;
      const float* x = a.x.data + problem * L * K;
      const float* t = a.t.data + problem * K * M;
      const float* dy = a.dy.data + problem * L * M;
      if (!a.dx.empty()) {
        float* dx = a.dx.data + problem * L * K;
        for (int64_t l = 0; l < L; ++l)
          for (int64_t k = 0; k < K; ++k) {
            double sum = a.accumulate_dx ? double(dx[l * K + k]) : 0.0;
            for (int64_t m = 0; m < M; ++m) sum += double(dy[l * M + m]) * t[k * M + m];
            dx[l * K + k] = static_cast<float>(sum);
          }
      }
      if (!a.dt.empty()) {
        float* dt = a.dt.data + problem * K * M;
        for (int64_t k = 0; k < K; ++k)
          for (int64_t m = 0; m < M; ++m) {
            double sum = a.accumulate_dt ? double(dt[k * M + m]) : 0.0;
            for (int64_t l = 0; l < L; ++l) sum += double(x[l * K + k]) * dy[l * M + m];
            dt[k * M + m] = static_cast<float>(sum);
          }
      }
    }
}

}  // namespace hfta::ref
