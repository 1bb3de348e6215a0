#include "fused_ops/batchnorm1d.h"

#include <cmath>

#include "fused_ops/ref/norm_activation.h"

namespace hfta {
namespace ref {

// The specification: B independent single-model BatchNorm1d layers, double accumulation.
// Model b's channel c is the column x[b, :, c].

void batchnorm1d_forward(const BatchNorm1dParams& p, const BatchNorm1dForwardArgs& a) {
  const TensorView &x = a.x, &gamma = a.gamma, &beta = a.beta, &running_mean = a.running_mean,
                   &running_var = a.running_var, &y = a.y;
  const BatchNorm1dSaved& saved = a.saved;
  check_batchnorm1d(p, a);
  const int64_t R = p.R, C = p.C;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t k = b * C + c;  // index into the [B, C] tensors
      auto at = [&](int64_t r) { return (b * R + r) * C + c; };
      double mean, rstd;
      if (p.training) {
        double sum = 0.0;
        for (int64_t r = 0; r < R; ++r) sum += x.data[at(r)];
        mean = sum / R;
        double sq = 0.0;
        for (int64_t r = 0; r < R; ++r) {
          double d = x.data[at(r)] - mean;
          sq += d * d;
        }
        rstd = 1.0 / std::sqrt(sq / R + p.eps);
        if (!running_mean.empty()) {
          double unbiased = sq / (R - 1);
          running_mean.data[k] =
              static_cast<float>((1.0 - p.momentum) * running_mean.data[k] + p.momentum * mean);
          running_var.data[k] =
              static_cast<float>((1.0 - p.momentum) * running_var.data[k] + p.momentum * unbiased);
        }
      } else {
        mean = running_mean.data[k];
        rstd = 1.0 / std::sqrt(double(running_var.data[k]) + p.eps);
      }
      saved.mean.data[k] = static_cast<float>(mean);
      saved.rstd.data[k] = static_cast<float>(rstd);
      const double g = p.affine ? gamma.data[k] : 1.0;
      const double s = p.affine ? beta.data[k] : 0.0;
      for (int64_t r = 0; r < R; ++r)
        y.data[at(r)] =
            activate(p.activation, static_cast<float>((x.data[at(r)] - mean) * rstd * g + s));
    }
}

// With xhat = (x - mean) * rstd and g = gamma (1 without affine):
//   dbeta = sum dy,  dgamma = sum dy * xhat,
//   training: dx = g * rstd * (dy - sum(dy) / R - xhat * sum(dy * xhat) / R)
//   eval:     dx = g * rstd * dy   (the statistics are constants)
// With a fused activation, dy is first taken back through it (from the output y).
void batchnorm1d_backward(const BatchNorm1dParams& p, const BatchNorm1dBackwardArgs& a) {
  const TensorView &x = a.x, &gamma = a.gamma, &dy = a.dy, &dx = a.dx, &dgamma = a.dgamma,
                   &dbeta = a.dbeta;
  const BatchNorm1dSaved& saved = a.saved;
  check_batchnorm1d_backward(p, a);
  const int64_t R = p.R, C = p.C;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t k = b * C + c;
      auto at = [&](int64_t r) { return (b * R + r) * C + c; };
      const double mean = saved.mean.data[k], rstd = saved.rstd.data[k];
      auto dz = [&](int64_t r) { return gradient_through(p.activation, a.y, dy, at(r)); };
      double sum_dy = 0.0, sum_dy_xhat = 0.0;
      for (int64_t r = 0; r < R; ++r) {
        sum_dy += dz(r);
        sum_dy_xhat += dz(r) * ((x.data[at(r)] - mean) * rstd);
      }
      if (p.affine && !dgamma.empty()) dgamma.data[k] += static_cast<float>(sum_dy_xhat);
      if (p.affine && !dbeta.empty()) dbeta.data[k] += static_cast<float>(sum_dy);
      if (dx.empty()) continue;
      const double g = p.affine ? gamma.data[k] : 1.0;
      for (int64_t r = 0; r < R; ++r) {
        const double xhat = (x.data[at(r)] - mean) * rstd;
        const double d = p.training ? dz(r) - sum_dy / R - xhat * sum_dy_xhat / R : dz(r);
        const float grad = static_cast<float>(g * rstd * d);
        dx.data[at(r)] = a.accumulate_dx ? dx.data[at(r)] + grad : grad;
      }
    }
}

}  // namespace ref
}  // namespace hfta
