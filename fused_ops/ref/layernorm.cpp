#include "fused_ops/layernorm.h"

#include <cmath>

namespace hfta {
namespace ref {

// The specification: B independent single-model LayerNorm layers, double accumulation.
void layernorm_forward(const LayerNormParams& p, const LayerNormForwardArgs& a) {
  const TensorView &x = a.x, &gamma = a.gamma, &beta = a.beta, &y = a.y;
  const LayerNormSaved& saved = a.saved;
  check_layernorm(p, a);
  const int64_t F = p.F;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t n = 0; n < p.N; ++n) {
      const int64_t row = b * p.N + n;
      const float* xr = x.data + row * F;
      double sum = 0.0;
      for (int64_t f = 0; f < F; ++f) sum += xr[f];
      const double mean = sum / F;
      double sq = 0.0;
      for (int64_t f = 0; f < F; ++f) sq += (xr[f] - mean) * (xr[f] - mean);
      const double rstd = 1.0 / std::sqrt(sq / F + p.eps);
      saved.mean.data[row] = static_cast<float>(mean);
      saved.rstd.data[row] = static_cast<float>(rstd);
      for (int64_t f = 0; f < F; ++f) {
        double g = p.affine ? gamma.data[b * F + f] : 1.0;
        double s = p.affine ? beta.data[b * F + f] : 0.0;
        y.data[row * F + f] = static_cast<float>((xr[f] - mean) * rstd * g + s);
      }
    }
}

// With xhat = (x - mean) * rstd and gdy = dy * gamma (dy without affine), per row:
//   dx = rstd * (gdy - sum(gdy) / F - xhat * sum(gdy * xhat) / F)
// and over the rows of one model: dgamma = sum dy * xhat, dbeta = sum dy.
void layernorm_backward(const LayerNormParams& p, const LayerNormBackwardArgs& a) {
  const TensorView &x = a.x, &gamma = a.gamma, &dy = a.dy, &dx = a.dx, &dgamma = a.dgamma,
                   &dbeta = a.dbeta;
  const LayerNormSaved& saved = a.saved;
  check_layernorm_backward(p, a);
  const int64_t F = p.F;
  for (int64_t b = 0; b < p.B; ++b) {
    if (p.affine)
      for (int64_t f = 0; f < F; ++f) {
        double sum_dy = 0.0, sum_dy_xhat = 0.0;
        for (int64_t n = 0; n < p.N; ++n) {
          const int64_t row = b * p.N + n;
          double xhat = (x.data[row * F + f] - double(saved.mean.data[row])) * saved.rstd.data[row];
          sum_dy += dy.data[row * F + f];
          sum_dy_xhat += dy.data[row * F + f] * xhat;
        }
        if (!dgamma.empty()) dgamma.data[b * F + f] += static_cast<float>(sum_dy_xhat);
        if (!dbeta.empty()) dbeta.data[b * F + f] += static_cast<float>(sum_dy);
      }
    if (dx.empty()) continue;
    for (int64_t n = 0; n < p.N; ++n) {
      const int64_t row = b * p.N + n;
      const double mean = saved.mean.data[row], rstd = saved.rstd.data[row];
      auto xhat = [&](int64_t f) { return (x.data[row * F + f] - mean) * rstd; };
      auto gdy = [&](int64_t f) {
        return double(dy.data[row * F + f]) * (p.affine ? gamma.data[b * F + f] : 1.0f);
      };
      double sum_gdy = 0.0, sum_gdy_xhat = 0.0;
      for (int64_t f = 0; f < F; ++f) {
        sum_gdy += gdy(f);
        sum_gdy_xhat += gdy(f) * xhat(f);
      }
      for (int64_t f = 0; f < F; ++f) {
        const float grad =
            static_cast<float>(rstd * (gdy(f) - sum_gdy / F - xhat(f) * sum_gdy_xhat / F));
        float& out = dx.data[row * F + f];
        out = a.accumulate_dx ? out + grad : grad;
      }
    }
  }
}

}  // namespace ref
}  // namespace hfta
