// CPU fused BatchNorm2d: our own OpenMP kernel over the B*C channels of plain NCHW.
//
// Parallelization: parallel_for over blocks of consecutive channels of the B*C channels (across
// models and channels at once; the fused layout makes them one flat list). A channel's
// statistics, its dgamma/dbeta and its normalization belong to one thread, so there are no races
// and no reduction buffers, and the result does not depend on the thread count or the block: each
// [H*W] row is a contiguous, vectorized loop (float partial sums per row, double across the N
// rows in sample order, so the statistics stay accurate for large N*H*W without giving up SIMD).
// Large planes take one channel at a time; small ones (MobileNetV2's and ResNet-18's 2x2 to 8x8)
// a block of channels walked sample by sample, each sample's part of the block one contiguous
// run, with the row loops unrolled for 8x8 (see channels_per_task); on 1x1, 2x2 and 4x4 planes,
// whose rows of 1 to 16 values leave vectors idle or end in a reduction across lanes, the loops
// run over the block's channels instead (visit_small_plane_rows), each row still summed alone.
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
// noise of it on planes of 14x14 and more. oneDNN also writes, not accumulates, diff_scale/shift
// and takes the variance, not rstd.
//
// A fused activation (ReLU, ReLU6, LeakyReLU) is applied as y is written, and backward takes the
// gradient through it in both its passes, deciding on the activation's input recomputed from x:
// the activation then costs no pass over memory of its own (three: its forward's read and write,
// and its backward's gradient rewritten). The kind is a template parameter, so the loops without
// one are the loops as they were.
//
// Statistics use two passes (mean, then squared deviations from it) rather than E[x^2]-mean^2,
// which loses all precision when |mean| >> std; the second pass re-reads a channel that is
// usually still in L2.
#include "fused_ops/batchnorm2d.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/parallel.h"
#include "fused_ops/cpu/norm_activation.h"

// With an activation, backward's sums and dx are the plain kernel's arithmetic on a select of dy
// instead of on dy, and the fused activation promises the two ops' bits: the fused and the plain
// instantiations must turn the same products into fused multiply-adds. GCC at -O3 does
// (tests/fused_ops/test_batchnorm2d.cpp checks it); at the sanitizer builds' -O1
// -fexpensive-optimizations it did not, so those builds compile this file without contraction.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace hfta::cpu {

namespace {

// kHw > 0: the plane size hw as a compile-time constant (small planes: the loops unroll),
// else hw at run time.
template <int kHw>
inline float row_sum(const float* x, int64_t hw) {
  if constexpr (kHw > 0) hw = kHw;
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < hw; ++i) s += x[i];
  return s;
}

// NOLINTBEGIN(bugprone-easily-swappable-parameters): an internal kernel helper called only in this
// file, at a few call sites that pass locals named like its parameters.
template <int kHw>
inline float row_sq_dev(const float* x, int64_t hw, float mean) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  if constexpr (kHw > 0) hw = kHw;
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < hw; ++i) {
    float d = x[i] - mean;
    s += d * d;
  }
  return s;
}

// Channels per task: a task takes a block of consecutive channels and walks the samples n in
// order, so on small planes (MobileNetV2's and ResNet-18's 2x2 to 8x8) each sample's part of the
// block is one contiguous run of at least kMinRunFloats floats instead of a few floats per channel
// and sample (which ran at a tenth of the cache's bandwidth: docs/benchmarks.md, "BatchNorm on
// small planes"); at least 4 tasks per thread while the channels allow. A channel's arithmetic is
// the same whatever the block (its row sums, in sample order), so the results do not depend on
// the block size or the thread count.
constexpr int64_t kMinRunFloats = 256;
int64_t channels_per_task(int64_t hw, int64_t channels) {
  const int64_t for_threads = (channels + 4 * num_threads() - 1) / (4 * num_threads());
  return std::clamp<int64_t>(std::min(kMinRunFloats / hw, for_threads), 1, channels);
}

// Calls visit(n, k) for every row (sample n, channel k in [k0, k1)), each channel's rows in
// sample order: channel by channel on large planes (a channel's running sums stay in registers),
// sample by sample on the small planes (kHw > 0: one contiguous run per sample).
template <int kHw, typename Visit>
inline void visit_rows(int64_t k0, int64_t k1, int64_t N, Visit&& visit) {
  if constexpr (kHw == 0) {
    for (int64_t k = k0; k < k1; ++k)
      for (int64_t n = 0; n < N; ++n) visit(n, k);
  } else {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = k0; k < k1; ++k) visit(n, k);
  }
}

// The smallest planes (kSmallPlane<kHw>: 1x1, 2x2 and 4x4): a sample's block of channels is one
// contiguous run of a few values per channel, so visit(j, i) for channel k0 + j of every sample
// n (its row starting at element i) runs as a loop over the channels, which vectorizes, where the
// row loops ran a value or four at a time, or reduced a vector's lanes per row (on MobileNetV2's
// planes: 2x2 2.5x faster, 1x1 2x, 4x4 1.2x; 8x8 rows, four vectors each, ran 2x slower so). Each
// row still sums in float, in its own order, then into its channel's double.
template <int kHw>
constexpr bool kSmallPlane = kHw == 1 || kHw == 4 || kHw == 16;

template <int kHw, typename Visit>
inline void visit_small_plane_rows(int64_t k0, int64_t count, int64_t N, int64_t row_stride,
                                   Visit&& visit) {
  for (int64_t n = 0; n < N; ++n) {
    const int64_t first = n * row_stride + k0 * kHw;
#pragma omp simd
    for (int64_t j = 0; j < count; ++j) visit(j, first + j * kHw);
  }
}

// Runs task(k0, k1, hw_constant) over blocks [k0, k1) of the channels, at most kMinRunFloats
// channels each; hw_constant is std::integral_constant<int, hw> for the small planes 1x1, 2x2,
// 4x4 and 8x8 (their per-row loops then unroll), else <int, 0>.
template <typename Task>
void for_each_channel_block(int64_t hw, int64_t channels, Task&& task) {
  const int64_t per_task = channels_per_task(hw, channels);
  auto run = [&](auto hw_constant) {
    parallel_for((channels + per_task - 1) / per_task, [&](int64_t t) {
      task(t * per_task, std::min(channels, (t + 1) * per_task), hw_constant);
    });
  };
  switch (hw) {
    case 1:
      return run(std::integral_constant<int, 1>());
    case 4:
      return run(std::integral_constant<int, 4>());
    case 16:
      return run(std::integral_constant<int, 16>());
    case 64:
      return run(std::integral_constant<int, 64>());
    default:
      return run(std::integral_constant<int, 0>());
  }
}

// The normalization's per-channel affine map, as forward applies it: y = act((x - mean) * scale
// + shift). Backward recomputes (x - mean) * scale + shift with the same floats and the same
// expression, so the activation's gradient is decided on the value forward activated.
inline float norm_scale(const BatchNorm2dParams& p, const TensorView& gamma, int64_t k,
                        float rstd) {
  return p.affine ? gamma.data[k] * rstd : rstd;
}
inline float norm_shift(const BatchNorm2dParams& p, const TensorView& beta, int64_t k) {
  return p.affine ? beta.data[k] : 0.0f;
}

template <Fused kAct>
void forward_with(const BatchNorm2dParams& p, const BatchNorm2dForwardArgs& a) {
  const TensorView &x = a.x, &gamma = a.gamma, &beta = a.beta, &running_mean = a.running_mean,
                   &running_var = a.running_var, &y = a.y;
  const BatchNorm2dSaved& saved = a.saved;
  const int64_t hw_all = p.H * p.W, channels = p.B * p.C, row_stride = channels * hw_all;
  const double M = double(p.reduction_size());
  const float slope = p.activation ? p.activation->negative_slope : 0.0f;
  // k = b*C + c indexes the [B, C] tensors; row (n, k) starts at n * row_stride + k * hw.
  for_each_channel_block(hw_all, channels, [&](int64_t k0, int64_t k1, auto hw_constant) {
    constexpr int kHw = decltype(hw_constant)::value;
    const int64_t hw = kHw > 0 ? kHw : hw_all;
    const int64_t count = k1 - k0;
    double sum[kMinRunFloats], sq[kMinRunFloats];
    float mean[kMinRunFloats], scale[kMinRunFloats], shift[kMinRunFloats];
    if (p.training) {
      std::fill(sum, sum + count, 0.0);
      if constexpr (kSmallPlane<kHw>) {
        visit_small_plane_rows<kHw>(k0, count, p.N, row_stride, [&](int64_t j, int64_t i) {
          float row = 0.0f;
          for (int q = 0; q < kHw; ++q) row += x.data[i + q];
          sum[j] += row;
        });
      } else {
        visit_rows<kHw>(k0, k1, p.N, [&](int64_t n, int64_t k) {
          sum[k - k0] += row_sum<kHw>(x.data + n * row_stride + k * hw, hw);
        });
      }
      for (int64_t j = 0; j < count; ++j) mean[j] = static_cast<float>(sum[j] / M);
      std::fill(sq, sq + count, 0.0);
      if constexpr (kSmallPlane<kHw>) {
        visit_small_plane_rows<kHw>(k0, count, p.N, row_stride, [&](int64_t j, int64_t i) {
          float row = 0.0f;
          for (int q = 0; q < kHw; ++q) {
            const float d = x.data[i + q] - mean[j];
            row += d * d;
          }
          sq[j] += row;
        });
      } else {
        visit_rows<kHw>(k0, k1, p.N, [&](int64_t n, int64_t k) {
          sq[k - k0] += row_sq_dev<kHw>(x.data + n * row_stride + k * hw, hw, mean[k - k0]);
        });
      }
    }
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t j = k - k0;
      float rstd;
      if (p.training) {
        rstd = static_cast<float>(1.0 / std::sqrt(sq[j] / M + p.eps));
        if (!running_mean.empty()) {
          const double m = p.momentum;
          running_mean.data[k] = static_cast<float>((1.0 - m) * running_mean.data[k] + m * mean[j]);
          running_var.data[k] =
              static_cast<float>((1.0 - m) * running_var.data[k] + m * (sq[j] / (M - 1.0)));
        }
      } else {
        mean[j] = running_mean.data[k];
        rstd = static_cast<float>(1.0 / std::sqrt(double(running_var.data[k]) + p.eps));
      }
      saved.mean.data[k] = mean[j];
      saved.rstd.data[k] = rstd;
      scale[j] = norm_scale(p, gamma, k, rstd);
      shift[j] = norm_shift(p, beta, k);
    }
    if constexpr (kSmallPlane<kHw>) {
      visit_small_plane_rows<kHw>(k0, count, p.N, row_stride, [&](int64_t j, int64_t i) {
        for (int q = 0; q < kHw; ++q)
          y.data[i + q] = activate<kAct>((x.data[i + q] - mean[j]) * scale[j] + shift[j], slope);
      });
      return;
    }
    visit_rows<kHw>(k0, k1, p.N, [&](int64_t n, int64_t k) {
      const int64_t j = k - k0;
      const float* xr = x.data + n * row_stride + k * hw;
      float* yr = y.data + n * row_stride + k * hw;
      const float mu = mean[j], sc = scale[j], sh = shift[j];
#pragma omp simd
      for (int64_t i = 0; i < hw; ++i) yr[i] = activate<kAct>((xr[i] - mu) * sc + sh, slope);
    });
  });
}

// Planes larger than kSmallPlane sum each row in chunks of kRowSumChunk elements through
// add_row_sums, whatever the fused activation.
constexpr int64_t kRowSumChunk = 256;

// s += sum of g[i], t += sum of g[i] * (x[i] - mean), over n <= kRowSumChunk elements. One
// out-of-line function for BatchNorm alone and with every fused activation: GCC vectorizes a
// reduction loop its own way in each loop it sits in (the remainder after the full vectors
// differed on AVX2), and the order of the additions decides the bits, so the fused backward
// sums dz through the code BatchNorm alone runs on the activation op's dz.
[[gnu::noinline]] void add_row_sums(const float* g, const float* x, float mean, int64_t n, float& s,
                                    float& t) {
  float row_s = 0.0f, row_t = 0.0f;
#pragma omp simd reduction(+ : row_s, row_t)
  for (int64_t i = 0; i < n; ++i) {
    row_s += g[i];
    row_t += g[i] * (x[i] - mean);
  }
  s += row_s;
  t += row_t;
}

// dx = g*rstd * (dy - mean(dy) - xhat * mean(dy*xhat)) in training, g*rstd*dy in eval, written
// as dx = a*dy + k1*(x - mean) + k0 so the inner loop is two multiply-adds. With an activation,
// dy there is dz, the gradient taken back through it (gradient_through), in both passes.
template <Fused kAct>
void backward_with(const BatchNorm2dParams& p, const BatchNorm2dBackwardArgs& a) {
  const TensorView &x = a.x, &gamma = a.gamma, &beta = a.beta, &dy = a.dy, &dx = a.dx,
                   &dgamma = a.dgamma, &dbeta = a.dbeta;
  const BatchNorm2dSaved& saved = a.saved;
  const int64_t hw_all = p.H * p.W, channels = p.B * p.C, row_stride = channels * hw_all;
  const double M = double(p.reduction_size());
  const float slope = p.activation ? p.activation->negative_slope : 0.0f;
  const bool want_dgamma = p.affine && !dgamma.empty(), want_dbeta = p.affine && !dbeta.empty();
  const bool need_sums = p.training || want_dgamma || want_dbeta;
  for_each_channel_block(hw_all, channels, [&](int64_t k0, int64_t k1, auto hw_constant) {
    constexpr int kHw = decltype(hw_constant)::value;
    const int64_t hw = kHw > 0 ? kHw : hw_all;
    const int64_t count = k1 - k0;
    double sum_dy[kMinRunFloats], sum_dy_xmu[kMinRunFloats];  // sum dz, sum dz * (x - mean)
    float af[kMinRunFloats], c1[kMinRunFloats], c0[kMinRunFloats];
    float scale[kMinRunFloats], shift[kMinRunFloats];  // forward's, for the activation's input
    for (int64_t k = k0; k < k1; ++k) {
      scale[k - k0] = kAct == Fused::kNone ? 0.0f : norm_scale(p, gamma, k, saved.rstd.data[k]);
      shift[k - k0] = kAct == Fused::kNone ? 0.0f : norm_shift(p, beta, k);
    }
    std::fill(sum_dy, sum_dy + count, 0.0);
    std::fill(sum_dy_xmu, sum_dy_xmu + count, 0.0);
    const float* means = saved.mean.data + k0;
    if (need_sums && kSmallPlane<kHw>) {
      visit_small_plane_rows<kHw>(k0, count, p.N, row_stride, [&](int64_t j, int64_t i) {
        float row_dz = 0.0f, row_dz_xm = 0.0f;
        for (int q = 0; q < kHw; ++q) {
          const float xm = x.data[i + q] - means[j];
          const float dz = gradient_through<kAct>(xm * scale[j] + shift[j], dy.data[i + q], slope);
          row_dz += dz;
          row_dz_xm += dz * xm;
        }
        sum_dy[j] += row_dz;
        sum_dy_xmu[j] += row_dz_xm;
      });
    } else if (need_sums) {
      visit_rows<kHw>(k0, k1, p.N, [&](int64_t n, int64_t k) {
        const float mean = saved.mean.data[k], sc = scale[k - k0], sh = shift[k - k0];
        const float* xr = x.data + n * row_stride + k * hw;
        const float* dyr = dy.data + n * row_stride + k * hw;
        float s = 0.0f, t = 0.0f;
        float dz[kRowSumChunk];
        for (int64_t c = 0; c < hw; c += kRowSumChunk) {
          const int64_t m = std::min(kRowSumChunk, hw - c);
          const float* g = dyr + c;
          if constexpr (kAct != Fused::kNone) {
            for (int64_t i = 0; i < m; ++i)
              dz[i] = gradient_through<kAct>((xr[c + i] - mean) * sc + sh, dyr[c + i], slope);
            g = dz;
          }
          add_row_sums(g, xr + c, mean, m, s, t);
        }
        sum_dy[k - k0] += s;
        sum_dy_xmu[k - k0] += t;
      });
    }
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t j = k - k0;
      const float rstd = saved.rstd.data[k];
      const double sum_dy_xhat = sum_dy_xmu[j] * rstd;
      if (want_dgamma) dgamma.data[k] += static_cast<float>(sum_dy_xhat);
      if (want_dbeta) dbeta.data[k] += static_cast<float>(sum_dy[j]);
      const double ga = (p.affine ? gamma.data[k] : 1.0f) * double(rstd);
      af[j] = static_cast<float>(ga);
      c1[j] = p.training ? static_cast<float>(-ga * rstd * sum_dy_xhat / M) : 0.0f;
      c0[j] = p.training ? static_cast<float>(-ga * sum_dy[j] / M) : 0.0f;
    }
    if (dx.empty()) return;
    if constexpr (kSmallPlane<kHw>) {
      const float* xs = x.data;
      const float* dys = dy.data;
      float* dxs = dx.data;
      auto gradient = [&](int64_t j, int64_t i) {
        const float xm = xs[i] - means[j];
        const float dz = gradient_through<kAct>(xm * scale[j] + shift[j], dys[i], slope);
        return af[j] * dz + c1[j] * xm + c0[j];
      };
      if (a.accumulate_dx) {
        visit_small_plane_rows<kHw>(k0, count, p.N, row_stride, [&](int64_t j, int64_t i) {
          for (int q = 0; q < kHw; ++q) dxs[i + q] += gradient(j, i + q);
        });
      } else {
        visit_small_plane_rows<kHw>(k0, count, p.N, row_stride, [&](int64_t j, int64_t i) {
          for (int q = 0; q < kHw; ++q) dxs[i + q] = gradient(j, i + q);
        });
      }
      return;
    }
    visit_rows<kHw>(k0, k1, p.N, [&](int64_t n, int64_t k) {
      const int64_t j = k - k0;
      const float mean = saved.mean.data[k], a_j = af[j], k1_j = c1[j], k0_j = c0[j];
      const float sc = scale[j], sh = shift[j];
      const float* xr = x.data + n * row_stride + k * hw;
      const float* dyr = dy.data + n * row_stride + k * hw;
      float* dxr = dx.data + n * row_stride + k * hw;
      // NOLINTBEGIN(bugprone-branch-clone): the branches differ (+= vs =); the check ignores
      // the body of an `omp simd` loop.
      if (a.accumulate_dx) {
#pragma omp simd
        for (int64_t i = 0; i < hw; ++i) {
          const float dz = gradient_through<kAct>((xr[i] - mean) * sc + sh, dyr[i], slope);
          dxr[i] += a_j * dz + k1_j * (xr[i] - mean) + k0_j;
        }
      } else {
#pragma omp simd
        for (int64_t i = 0; i < hw; ++i) {
          const float dz = gradient_through<kAct>((xr[i] - mean) * sc + sh, dyr[i], slope);
          dxr[i] = a_j * dz + k1_j * (xr[i] - mean) + k0_j;
        }
      }
      // NOLINTEND(bugprone-branch-clone)
    });
  });
}

}  // namespace

void batchnorm2d_forward(const BatchNorm2dParams& p, const BatchNorm2dForwardArgs& a) {
  with_activation(p.activation, [&](auto act) { forward_with<decltype(act)::value>(p, a); });
}

void batchnorm2d_backward(const BatchNorm2dParams& p, const BatchNorm2dBackwardArgs& a) {
  with_activation(p.activation, [&](auto act) { backward_with<decltype(act)::value>(p, a); });
}

}  // namespace hfta::cpu
