#include "fused_ops/batchnorm2d.h"

#include <cmath>

#include "fused_ops/ref/norm_activation.h"

namespace hfta {
namespace ref {

// The specification: B independent single-model BatchNorm2d layers, double accumulation.
// Model b's channel c of sample n is the plane x[n, b*C + c, :, :].

namespace {

struct Plane {
  const BatchNorm2dParams& p;
  int64_t b, c;
  int64_t hw() const { return p.H * p.W; }
  int64_t offset(int64_t n) const { return ((n * p.B + b) * p.C + c) * hw(); }
};

}  // namespace

void batchnorm2d_forward(const BatchNorm2dParams& p, const BatchNorm2dForwardArgs& a) {
  const TensorView &x = a.x, &gamma = a.gamma, &beta = a.beta, &running_mean = a.running_mean,
                   &running_var = a.running_var, &y = a.y;
  const BatchNorm2dSaved& saved = a.saved;
  check_batchnorm2d(p, a);
  const int64_t M = p.reduction_size();
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t c = 0; c < p.C; ++c) {
      const Plane plane{p, b, c};
      const int64_t k = b * p.C + c;  // index into the [B, C] tensors
      double mean, rstd;
      if (p.training) {
        double sum = 0.0;
        for (int64_t n = 0; n < p.N; ++n)
          for (int64_t i = 0; i < plane.hw(); ++i) sum += x.data[plane.offset(n) + i];
        mean = sum / M;
        double sq = 0.0;
        for (int64_t n = 0; n < p.N; ++n)
          for (int64_t i = 0; i < plane.hw(); ++i) {
            double d = x.data[plane.offset(n) + i] - mean;
            sq += d * d;
          }
        double var = sq / M;
        rstd = 1.0 / std::sqrt(var + p.eps);
        if (!running_mean.empty()) {
          double unbiased = sq / (M - 1);
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
      for (int64_t n = 0; n < p.N; ++n)
        for (int64_t i = 0; i < plane.hw(); ++i) {
          int64_t at = plane.offset(n) + i;
          y.data[at] =
              activate(p.activation, static_cast<float>((x.data[at] - mean) * rstd * g + s));
        }
    }
}

// With xhat = (x - mean) * rstd and g = gamma (1 without affine):
//   dbeta = sum dy,  dgamma = sum dy * xhat,
//   training: dx = g * rstd * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M)
//   eval:     dx = g * rstd * dy   (the statistics are constants)
// With a fused activation, dy is first taken back through it (from the output y).
void batchnorm2d_backward(const BatchNorm2dParams& p, const BatchNorm2dBackwardArgs& a) {
  const TensorView &x = a.x, &gamma = a.gamma, &dy = a.dy, &dx = a.dx, &dgamma = a.dgamma,
                   &dbeta = a.dbeta;
  const BatchNorm2dSaved& saved = a.saved;
  check_batchnorm2d_backward(p, a);
  const double M = double(p.reduction_size());
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t c = 0; c < p.C; ++c) {
      const Plane plane{p, b, c};
      const int64_t k = b * p.C + c;
      const double mean = saved.mean.data[k], rstd = saved.rstd.data[k];
      auto dz = [&](int64_t at) { return gradient_through(p.activation, a.y, dy, at); };
      double sum_dy = 0.0, sum_dy_xhat = 0.0;
      for (int64_t n = 0; n < p.N; ++n)
        for (int64_t i = 0; i < plane.hw(); ++i) {
          int64_t at = plane.offset(n) + i;
          sum_dy += dz(at);
          sum_dy_xhat += dz(at) * ((x.data[at] - mean) * rstd);
        }
      if (p.affine && !dgamma.empty()) dgamma.data[k] += static_cast<float>(sum_dy_xhat);
      if (p.affine && !dbeta.empty()) dbeta.data[k] += static_cast<float>(sum_dy);
      if (dx.empty()) continue;
      const double g = p.affine ? gamma.data[k] : 1.0;
      for (int64_t n = 0; n < p.N; ++n)
        for (int64_t i = 0; i < plane.hw(); ++i) {
          int64_t at = plane.offset(n) + i;
          double xhat = (x.data[at] - mean) * rstd;
          double d = p.training ? dz(at) - sum_dy / M - xhat * sum_dy_xhat / M : dz(at);
          const float grad = static_cast<float>(g * rstd * d);
          dx.data[at] = a.accumulate_dx ? dx.data[at] + grad : grad;
        }
    }
}

}  // namespace ref
}  // namespace hfta
