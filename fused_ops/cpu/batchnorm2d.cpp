// CPU fused BatchNorm2d: our own OpenMP kernel over the B*C channels of plain NCHW.
//
// Parallelization: parallel_for over the B*C channels (across models and channels at once; the
// fused layout makes them one flat list). A channel's statistics, its dgamma/dbeta and its
// normalization belong to one thread, so there are no races and no reduction buffers, and the
// result does not depend on the thread count. Inside a channel, each [H*W] row is a contiguous,
// vectorized loop (float partial sums per row, double across the N rows, so the statistics stay
// accurate for large N*H*W without giving up SIMD).
//
// Why not oneDNN's batch_normalization over B*C channels: on our plain nchw layout oneDNN 2.6 runs
// its generic ncsp kernel, and its fast blocked (nChw16c) kernel needs a reorder in and out of
// every call, which costs more than BN itself (BN is memory-bound: a few flops per element).
// Measured (docs/benchmarks.md, "Measurements behind code choices"), this kernel runs 3-4x
// faster than oneDNN's nchw kernel and 2-3x faster than its blocked kernel with the reorders; on
// data already blocked oneDNN is about as fast as this kernel or faster.
// So only if the conv stack ever keeps oneDNN's blocked layout between layers would BN be worth
// running there instead.
// Variants of this kernel (software prefetch of the next row, groups of channels contiguous per
// sample, one-pass shifted statistics, parallel over samples with partial sums) were within
// noise of it. oneDNN also writes, not accumulates, diff_scale/shift and takes the variance, not
// rstd.
//
// Statistics use two passes (mean, then squared deviations from it) rather than E[x^2]-mean^2,
// which loses all precision when |mean| >> std; the second pass re-reads a channel that is
// usually still in L2.
#include "fused_ops/batchnorm2d.h"

#include <cmath>

#include "core/parallel.h"

namespace hfta::cpu {

namespace {

inline float row_sum(const float* x, int64_t hw) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < hw; ++i) s += x[i];
  return s;
}

// NOLINTBEGIN(bugprone-easily-swappable-parameters): an internal kernel helper called only in this
// file, at a few call sites that pass locals named like its parameters.
inline float row_sq_dev(const float* x, int64_t hw, float mean) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < hw; ++i) {
    float d = x[i] - mean;
    s += d * d;
  }
  return s;
}

}  // namespace

void batchnorm2d_forward(const BatchNorm2dParams& p, const BatchNorm2dForwardArgs& a) {
  const TensorView &x = a.x, &gamma = a.gamma, &beta = a.beta, &running_mean = a.running_mean,
                   &running_var = a.running_var, &y = a.y;
  const BatchNorm2dSaved& saved = a.saved;
  const int64_t hw = p.H * p.W, channels = p.B * p.C, row_stride = channels * hw;
  const double M = double(p.reduction_size());
  parallel_for(channels, [&](int64_t k) {  // k = b*C + c indexes the [B, C] tensors
    const float* xk = x.data + k * hw;
    float* yk = y.data + k * hw;
    float mean, rstd;
    if (p.training) {
      double sum = 0.0;
      for (int64_t n = 0; n < p.N; ++n) sum += row_sum(xk + n * row_stride, hw);
      mean = static_cast<float>(sum / M);
      double sq = 0.0;
      for (int64_t n = 0; n < p.N; ++n) sq += row_sq_dev(xk + n * row_stride, hw, mean);
      rstd = static_cast<float>(1.0 / std::sqrt(sq / M + p.eps));
      if (!running_mean.empty()) {
        const double m = p.momentum;
        running_mean.data[k] = static_cast<float>((1.0 - m) * running_mean.data[k] + m * mean);
        running_var.data[k] =
            static_cast<float>((1.0 - m) * running_var.data[k] + m * (sq / (M - 1.0)));
      }
    } else {
      mean = running_mean.data[k];
      rstd = static_cast<float>(1.0 / std::sqrt(double(running_var.data[k]) + p.eps));
    }
    saved.mean.data[k] = mean;
    saved.rstd.data[k] = rstd;
    const float scale = p.affine ? gamma.data[k] * rstd : rstd;
    const float shift = p.affine ? beta.data[k] : 0.0f;
    for (int64_t n = 0; n < p.N; ++n) {
      const float* xr = xk + n * row_stride;
      float* yr = yk + n * row_stride;
#pragma omp simd
      for (int64_t i = 0; i < hw; ++i) yr[i] = (xr[i] - mean) * scale + shift;
    }
  });
}

// dx = g*rstd * (dy - mean(dy) - xhat * mean(dy*xhat)) in training, g*rstd*dy in eval, written
// as dx = a*dy + k1*(x - mean) + k0 so the inner loop is two multiply-adds.
void batchnorm2d_backward(const BatchNorm2dParams& p, const BatchNorm2dBackwardArgs& a) {
  const TensorView &x = a.x, &gamma = a.gamma, &dy = a.dy, &dx = a.dx, &dgamma = a.dgamma,
                   &dbeta = a.dbeta;
  const BatchNorm2dSaved& saved = a.saved;
  const int64_t hw = p.H * p.W, channels = p.B * p.C, row_stride = channels * hw;
  const double M = double(p.reduction_size());
  const bool want_dgamma = p.affine && !dgamma.empty(), want_dbeta = p.affine && !dbeta.empty();
  const bool need_sums = p.training || want_dgamma || want_dbeta;
  parallel_for(channels, [&](int64_t k) {
    const float mean = saved.mean.data[k], rstd = saved.rstd.data[k];
    const float* xk = x.data + k * hw;
    const float* dyk = dy.data + k * hw;
    double sum_dy = 0.0, sum_dy_xmu = 0.0;  // sum dy, sum dy * (x - mean)
    if (need_sums)
      for (int64_t n = 0; n < p.N; ++n) {
        const float* xr = xk + n * row_stride;
        const float* dyr = dyk + n * row_stride;
        float s = 0.0f, t = 0.0f;
#pragma omp simd reduction(+ : s, t)
        for (int64_t i = 0; i < hw; ++i) {
          s += dyr[i];
          t += dyr[i] * (xr[i] - mean);
        }
        sum_dy += s;
        sum_dy_xmu += t;
      }
    const double sum_dy_xhat = sum_dy_xmu * rstd;
    if (want_dgamma) dgamma.data[k] += static_cast<float>(sum_dy_xhat);
    if (want_dbeta) dbeta.data[k] += static_cast<float>(sum_dy);
    if (dx.empty()) return;
    const double ga = (p.affine ? gamma.data[k] : 1.0f) * double(rstd);
    const float af = static_cast<float>(ga);
    const float k1 = p.training ? static_cast<float>(-ga * rstd * sum_dy_xhat / M) : 0.0f;
    const float k0 = p.training ? static_cast<float>(-ga * sum_dy / M) : 0.0f;
    float* dxk = dx.data + k * hw;
    for (int64_t n = 0; n < p.N; ++n) {
      const float* xr = xk + n * row_stride;
      const float* dyr = dyk + n * row_stride;
      float* dxr = dxk + n * row_stride;
      // NOLINTBEGIN(bugprone-branch-clone): the branches differ (+= vs =); the check ignores the
      // body of an `omp simd` loop.
      if (a.accumulate_dx) {
#pragma omp simd
        for (int64_t i = 0; i < hw; ++i) dxr[i] += af * dyr[i] + k1 * (xr[i] - mean) + k0;
      } else {
#pragma omp simd
        for (int64_t i = 0; i < hw; ++i) dxr[i] = af * dyr[i] + k1 * (xr[i] - mean) + k0;
      }
      // NOLINTEND(bugprone-branch-clone)
    }
  });
}

}  // namespace hfta::cpu
