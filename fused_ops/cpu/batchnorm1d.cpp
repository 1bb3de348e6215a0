// CPU fused BatchNorm1d on the rows layout [B, R, C]: our own OpenMP kernel.
//
// A channel is a column with stride C, so every loop runs along a row, vectorized over the C
// channels, and keeps one accumulator per channel (C doubles, in L1/L2 for C <= 1024). PointNet's
// per-point layers have R = n*L = 80000 rows and C = 64..1024 channels per model: one model's
// statistics are far too much work for one thread, so the rows of each model are split into
// chunks and parallel_for runs over the (model, chunk) pairs. Each task writes its chunk's
// per-channel partial sums to its own slot of a scratch buffer, and the partials are then added
// up in chunk order: no atomics, and because the chunking depends only on (R, C), never on the
// thread count, the result is the same with any number of threads.
//
// A fused activation (fused_ops/batchnorm1d.h) is applied as y is written and its gradient taken
// in backward's two passes, as batchnorm2d's kernel does (fused_ops/cpu/norm_activation.h).
//
// Statistics use two passes (mean, then squared deviations from it), as batchnorm2d, since
// E[x^2] - mean^2 loses all precision when |mean| >> std. Accumulators are doubles: converting
// each float costs one instruction per 8 lanes, far below the memory traffic of streaming x, so
// the statistics are as accurate as the reference's at no visible cost.
//
// Scratch: one thread_local buffer of the calling thread, grown to the largest call and then
// reused (a few MB at most: B * 16 chunks * 2 * C doubles), so steady-state calls do not allocate.
#include "fused_ops/batchnorm1d.h"

#include <algorithm>
#include <cmath>
#include <vector>

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

// Rows per chunk: at least ~16K elements per task (enough work to pay for a thread), at most
// kMaxChunks per model (bounds the scratch and the combine step).
struct Chunking {
  int64_t per_model = 1;  // chunks per model
  int64_t rows = 1;       // rows per chunk (the last may have fewer)
};

Chunking chunking(int64_t R, int64_t C) {
  constexpr int64_t kMinElements = 1 << 14, kMaxChunks = 16;
  const int64_t want = std::clamp<int64_t>(R * C / kMinElements, 1, kMaxChunks);
  Chunking k;
  k.rows = (R + want - 1) / want;
  k.per_model = (R + k.rows - 1) / k.rows;
  return k;
}

struct Scratch {
  std::vector<double> d;
  std::vector<float> f;
};

struct ScratchSize {
  int64_t doubles = 0, floats = 0;
};

Scratch& scratch(ScratchSize size) {
  thread_local Scratch s;
  if (s.d.size() < size_t(size.doubles)) s.d.resize(size_t(size.doubles));
  if (s.f.size() < size_t(size.floats)) s.f.resize(size_t(size.floats));
  return s;
}

// One task's rows: model b's rows [r0, r1), whose partial sums go to slot b * per_model + chunk.
struct Chunk {
  int64_t b, r0, r1, slot;
};

// Runs task(chunk) for every chunk of every model.
template <typename F>
void for_each_chunk_of_rows(const BatchNorm1dParams& p, const Chunking& k, F&& task) {
  parallel_for(p.B * k.per_model, [&](int64_t t) {
    const int64_t b = t / k.per_model, r0 = (t % k.per_model) * k.rows;
    task(Chunk{.b = b, .r0 = r0, .r1 = std::min(p.R, r0 + k.rows), .slot = t});
  });
}

// One model's per-chunk partial sums: chunk j's C values start at data + j * stride.
struct Partials {
  const double* data;
  int64_t chunks, stride;
};

// sums[c] = sum over chunks of the partials, in chunk order.
void combine(const Partials& partial, int64_t C, double* sums) {
  std::fill(sums, sums + C, 0.0);
  for (int64_t j = 0; j < partial.chunks; ++j) {
    const double* pj = partial.data + j * partial.stride;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) sums[c] += pj[c];
  }
}

template <Fused kAct>
void forward_with(const BatchNorm1dParams& p, const BatchNorm1dForwardArgs& a) {
  const TensorView &x = a.x, &gamma = a.gamma, &beta = a.beta, &running_mean = a.running_mean,
                   &running_var = a.running_var, &y = a.y;
  const int64_t R = p.R, C = p.C, BC = p.B * C;
  const Chunking k = chunking(R, C);
  const int64_t slots = p.B * k.per_model;
  // Doubles: partial sums [slots, C], then per (b, c) the mean and the squared deviations.
  // Floats: per (b, c) the float mean, scale and shift of the normalization.
  Scratch& s = scratch({.doubles = slots * C + 2 * BC, .floats = 3 * BC});
  double* partial = s.d.data();
  double* mean_d = partial + slots * C;
  double* sq = mean_d + BC;
  float* mean_f = s.f.data();
  float* scale = mean_f + BC;
  float* shift = scale + BC;

  if (p.training) {
    for_each_chunk_of_rows(p, k, [&](const Chunk& ch) {
      const auto [b, r0, r1, slot] = ch;
      double* acc = partial + slot * C;
      std::fill(acc, acc + C, 0.0);
      for (int64_t r = r0; r < r1; ++r) {
        const float* xr = x.data + (b * R + r) * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) acc[c] += xr[c];
      }
    });
    for (int64_t b = 0; b < p.B; ++b) {
      combine({partial + b * k.per_model * C, k.per_model, C}, C, mean_d + b * C);
      for (int64_t c = 0; c < C; ++c) mean_d[b * C + c] /= double(R);
    }
    for_each_chunk_of_rows(p, k, [&](const Chunk& ch) {
      const auto [b, r0, r1, slot] = ch;
      double* acc = partial + slot * C;
      const double* m = mean_d + b * C;
      std::fill(acc, acc + C, 0.0);
      for (int64_t r = r0; r < r1; ++r) {
        const float* xr = x.data + (b * R + r) * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) {
          const double d = double(xr[c]) - m[c];
          acc[c] += d * d;
        }
      }
    });
    for (int64_t b = 0; b < p.B; ++b)
      combine({partial + b * k.per_model * C, k.per_model, C}, C, sq + b * C);
  }

  const double momentum = p.momentum;
  for (int64_t i = 0; i < BC; ++i) {  // i = b*C + c indexes the [B, C] tensors
    double mean, rstd;
    if (p.training) {
      mean = mean_d[i];
      rstd = 1.0 / std::sqrt(sq[i] / double(R) + p.eps);
      if (!running_mean.empty()) {
        running_mean.data[i] =
            static_cast<float>((1.0 - momentum) * running_mean.data[i] + momentum * mean);
        running_var.data[i] = static_cast<float>((1.0 - momentum) * running_var.data[i] +
                                                 momentum * (sq[i] / double(R - 1)));
      }
    } else {
      mean = running_mean.data[i];
      rstd = 1.0 / std::sqrt(double(running_var.data[i]) + p.eps);
    }
    // The scale from the saved float rstd, which backward recomputes it from for the activation.
    const float rstd_f = static_cast<float>(rstd);
    a.saved.mean.data[i] = mean_f[i] = static_cast<float>(mean);
    a.saved.rstd.data[i] = rstd_f;
    scale[i] = p.affine ? gamma.data[i] * rstd_f : rstd_f;
    shift[i] = p.affine ? beta.data[i] : 0.0f;
  }
  const float slope = p.activation ? p.activation->negative_slope : 0.0f;

  for_each_chunk_of_rows(p, k, [&](const Chunk& ch) {
    const auto [b, r0, r1, slot] = ch;
    const float *m = mean_f + b * C, *sc = scale + b * C, *sh = shift + b * C;
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x.data + (b * R + r) * C;
      float* yr = y.data + (b * R + r) * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) yr[c] = activate<kAct>((xr[c] - m[c]) * sc[c] + sh[c], slope);
    }
  });
}

// dx = g*rstd * (dy - mean(dy) - xhat * mean(dy*xhat)) in training, g*rstd*dy in eval, written
// per channel as dx = a*dy + k1*(x - mean) + k0 so the inner loop is two multiply-adds. With an
// activation, dy there is dz, the gradient taken back through it, decided on the activation's
// input recomputed as forward computed it.
template <Fused kAct>
void backward_with(const BatchNorm1dParams& p, const BatchNorm1dBackwardArgs& a) {
  const TensorView &x = a.x, &gamma = a.gamma, &beta = a.beta, &dy = a.dy, &dx = a.dx,
                   &dgamma = a.dgamma, &dbeta = a.dbeta;
  const int64_t R = p.R, C = p.C, BC = p.B * C;
  const Chunking k = chunking(R, C);
  const int64_t slots = p.B * k.per_model;
  const bool want_dgamma = p.affine && !dgamma.empty(), want_dbeta = p.affine && !dbeta.empty();
  const bool need_sums = p.training || want_dgamma || want_dbeta;
  // Doubles: partial sums [slots, 2, C] (sum dy, sum dy*(x - mean)), then their totals [B, 2, C].
  // Floats: per (b, c) the coefficients a, k1, k0, and forward's scale and shift.
  Scratch& s = scratch({.doubles = 2 * slots * C + 2 * BC, .floats = 5 * BC});
  double* partial = s.d.data();
  double* sums = partial + 2 * slots * C;
  float* af = s.f.data();
  float* k1 = af + BC;
  float* k0 = k1 + BC;
  float* scale = k0 + BC;
  float* shift = scale + BC;
  const float* mean = a.saved.mean.data;
  const float* rstd = a.saved.rstd.data;
  const float slope = p.activation ? p.activation->negative_slope : 0.0f;
  if constexpr (kAct != Fused::kNone)
    for (int64_t i = 0; i < BC; ++i) {
      scale[i] = p.affine ? gamma.data[i] * rstd[i] : rstd[i];
      shift[i] = p.affine ? beta.data[i] : 0.0f;
    }

  if (need_sums) {
    for_each_chunk_of_rows(p, k, [&](const Chunk& ch) {
      const auto [b, r0, r1, slot] = ch;
      double* acc_dy = partial + 2 * slot * C;
      double* acc_dy_xmu = acc_dy + C;
      const float *m = mean + b * C, *sc = scale + b * C, *sh = shift + b * C;
      std::fill(acc_dy, acc_dy + 2 * C, 0.0);
      for (int64_t r = r0; r < r1; ++r) {
        const float* xr = x.data + (b * R + r) * C;
        const float* dyr = dy.data + (b * R + r) * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) {
          const float dz = gradient_through<kAct>((xr[c] - m[c]) * sc[c] + sh[c], dyr[c], slope);
          acc_dy[c] += dz;
          acc_dy_xmu[c] += double(dz) * (double(xr[c]) - m[c]);
        }
      }
    });
    for (int64_t b = 0; b < p.B; ++b) {
      const double* from = partial + 2 * b * k.per_model * C;
      combine({from, k.per_model, 2 * C}, C, sums + 2 * b * C);
      combine({from + C, k.per_model, 2 * C}, C, sums + 2 * b * C + C);
    }
  }

  for (int64_t i = 0; i < BC; ++i) {
    const int64_t b = i / C, c = i % C;
    const double sum_dy = need_sums ? sums[2 * b * C + c] : 0.0;
    const double sum_dy_xhat = need_sums ? sums[2 * b * C + C + c] * rstd[i] : 0.0;
    if (want_dgamma) dgamma.data[i] += static_cast<float>(sum_dy_xhat);
    if (want_dbeta) dbeta.data[i] += static_cast<float>(sum_dy);
    const double ga = (p.affine ? gamma.data[i] : 1.0f) * double(rstd[i]);
    af[i] = static_cast<float>(ga);
    k1[i] = p.training ? static_cast<float>(-ga * rstd[i] * sum_dy_xhat / double(R)) : 0.0f;
    k0[i] = p.training ? static_cast<float>(-ga * sum_dy / double(R)) : 0.0f;
  }
  if (dx.empty()) return;

  const bool accumulate = a.accumulate_dx;
  for_each_chunk_of_rows(p, k, [&](const Chunk& ch) {
    const auto [b, r0, r1, slot] = ch;
    const float *m = mean + b * C, *ab = af + b * C, *k1b = k1 + b * C, *k0b = k0 + b * C;
    const float *sc = scale + b * C, *sh = shift + b * C;
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x.data + (b * R + r) * C;
      const float* dyr = dy.data + (b * R + r) * C;
      float* dxr = dx.data + (b * R + r) * C;
      // NOLINTBEGIN(bugprone-branch-clone): the branches differ (+= vs =); the check ignores the
      // body of an `omp simd` loop.
      if (accumulate) {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) {
          const float dz = gradient_through<kAct>((xr[c] - m[c]) * sc[c] + sh[c], dyr[c], slope);
          dxr[c] += ab[c] * dz + k1b[c] * (xr[c] - m[c]) + k0b[c];
        }
      } else {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) {
          const float dz = gradient_through<kAct>((xr[c] - m[c]) * sc[c] + sh[c], dyr[c], slope);
          dxr[c] = ab[c] * dz + k1b[c] * (xr[c] - m[c]) + k0b[c];
        }
      }
      // NOLINTEND(bugprone-branch-clone)
    }
  });
}

}  // namespace

void batchnorm1d_forward(const BatchNorm1dParams& p, const BatchNorm1dForwardArgs& a) {
  with_activation(p.activation, [&](auto act) { forward_with<decltype(act)::value>(p, a); });
}

void batchnorm1d_backward(const BatchNorm1dParams& p, const BatchNorm1dBackwardArgs& a) {
  with_activation(p.activation, [&](auto act) { backward_with<decltype(act)::value>(p, a); });
}

}  // namespace hfta::cpu
