#include "fused_ops/cpu/conv2d_depthwise.h"

#include "fused_ops/cpu/simd.h"

// The tile kernels below: on AVX-512 (16 channels per vector) or AVX2 with FMA (8).
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#define HFTA_DEPTHWISE_TILES 1
#else
#define HFTA_DEPTHWISE_TILES 0
#endif

#if HFTA_DEPTHWISE_TILES
// A function pointer taking a vector pointer as a template argument (the std::array of dx_class
// instantiations) drops the vector's alignment attribute from the type's name only.
#pragma GCC diagnostic ignored "-Wignored-attributes"
#endif

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "core/determinism.h"
#include "core/parallel.h"

// NOLINTBEGIN(bugprone-easily-swappable-parameters): the raw-pointer kernel entry points below
// (called by the dispatcher and the kernel tests) and this file's internal helpers take
// adjacent pointers and sizes, passed at a few call sites from locals named like the parameters;
// the public op takes named arguments (Conv2dForwardArgs / Conv2dBackwardArgs).
namespace hfta::cpu {

bool depthwise_applies(const Conv2dParams& p) {
#if HFTA_DEPTHWISE_TILES
  return detail::depthwise_shape_applies(p);
#else
  (void)p;
  return false;
#endif
}

#if HFTA_DEPTHWISE_TILES

namespace {

// One vector of channels and the few operations the tiles use on it.
#if defined(__AVX512F__)
using Vec = __m512;
using LaneMask = __mmask16;
constexpr int64_t kLanes = 16;  // channels per tile: one AVX-512 vector
inline Vec vzero() { return _mm512_setzero_ps(); }
inline Vec vload(const float* p) { return _mm512_loadu_ps(p); }
// Lanes outside m read as zeros (and are not read from memory).
inline Vec vload(LaneMask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
inline void vstore(float* p, Vec v) { _mm512_storeu_ps(p, v); }
inline void vstore(float* p, LaneMask m, Vec v) { _mm512_mask_storeu_ps(p, m, v); }
inline Vec vadd(Vec a, Vec b) { return _mm512_add_ps(a, b); }
inline Vec vfmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
#else
using Vec = __m256;
using LaneMask = __m256i;
constexpr int64_t kLanes = 8;  // channels per tile: one AVX2 vector
inline Vec vzero() { return _mm256_setzero_ps(); }
inline Vec vload(const float* p) { return _mm256_loadu_ps(p); }
inline Vec vload(LaneMask m, const float* p) { return _mm256_maskload_ps(p, m); }
inline void vstore(float* p, Vec v) { _mm256_storeu_ps(p, v); }
inline void vstore(float* p, LaneMask m, Vec v) { _mm256_maskstore_ps(p, m, v); }
inline Vec vadd(Vec a, Vec b) { return _mm256_add_ps(a, b); }
inline Vec vfmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
#endif
// Columns a tile loop keeps in flight: accumulators and a 3x3 kernel's weights fit AVX-512's 32
// registers at 8 columns, AVX2's 16 at 4.
constexpr int kColumns3x3 = kLanes == 16 ? 8 : 4;
constexpr int kColumns5x5 = kLanes == 16 ? 4 : 2;

// A float buffer aligned to 64 bytes that only grows: one per thread (thread_local) for the
// tiles, kept between calls so a training step does not allocate.
struct Scratch {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float[], Free> data;
  int64_t capacity = 0;
  float* get(int64_t n) {
    if (n > capacity) {
      const int64_t bytes = (n * 4 + 63) / 64 * 64;
      data.reset(static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(bytes))));
      if (!data) throw std::bad_alloc();
      capacity = n;
    }
    return data.get();
  }
};

// The problem as the tiles see it.
struct Geometry {
  int64_t N, C;  // C: channels over all B models
  int64_t H, W, OH, OW, PH, PW, K, S;
  int64_t blocks;        // channel blocks of kLanes, the last one maybe partial
  int64_t model_blocks;  // the blocks one model alone would have
  int64_t Hp, Wp;        // x tile: [Hp][Wp][kLanes], x at (PH, PW), zeros around
  int64_t offh, offw;    // dy tile for the input gradient: [Hq][Wq][kLanes], dy at
  int64_t Hq, Wq;
  int64_t taps() const { return K * K; }
  int64_t channels_in(int64_t cb) const { return std::min(kLanes, C - cb * kLanes); }
};

Geometry make_geometry(const Conv2dParams& p) {
  Geometry g{};
  g.N = p.N, g.C = p.B * p.in_channels, g.H = p.H, g.W = p.W, g.OH = p.out_h(), g.OW = p.out_w();
  g.PH = p.pad_h, g.PW = p.pad_w, g.K = p.kernel_h, g.S = p.stride_h;
  g.blocks = (g.C + kLanes - 1) / kLanes;
  g.model_blocks = (p.in_channels + kLanes - 1) / kLanes;
  // (OH-1)*S + K <= H + 2*PH by the output-size formula, so the padded input holds every tap.
  g.Hp = g.H + 2 * g.PH, g.Wp = g.W + 2 * g.PW;
  // dx[i] sums w[k] * dy[(i + P - k) / S] over the taps k that divide exactly; those quotients
  // run from -floor((K-1)/S) to floor((size-1+P)/S), and the dy tile's zero border covers the
  // ones outside [0, OH).
  g.offh = (g.K - 1) / g.S, g.offw = (g.K - 1) / g.S;
  g.Hq = g.offh + std::max(g.OH, (g.H - 1 + g.PH) / g.S + 1);
  g.Wq = g.offw + std::max(g.OW, (g.W - 1 + g.PW) / g.S + 1);
  return g;
}

// out[j] lane i = r[i] lane j: a kLanes x kLanes transpose in registers.
#if defined(__AVX512F__)
// As dnnl_edges.cpp's transpose16x16.
inline void transpose_lanes(const Vec r[16], Vec out[16]) {
  Vec t[16], u[16];
  auto pd = [](Vec v) { return _mm512_castps_pd(v); };
  for (int64_t g = 0; g < 4; ++g) {
    t[4 * g + 0] = _mm512_unpacklo_ps(r[4 * g], r[4 * g + 1]);
    t[4 * g + 1] = _mm512_unpackhi_ps(r[4 * g], r[4 * g + 1]);
    t[4 * g + 2] = _mm512_unpacklo_ps(r[4 * g + 2], r[4 * g + 3]);
    t[4 * g + 3] = _mm512_unpackhi_ps(r[4 * g + 2], r[4 * g + 3]);
    u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t[4 * g]), pd(t[4 * g + 2])));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t[4 * g]), pd(t[4 * g + 2])));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t[4 * g + 1]), pd(t[4 * g + 3])));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t[4 * g + 1]), pd(t[4 * g + 3])));
  }
  for (int j = 0; j < 4; ++j) {
    const Vec v = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);
    const Vec w = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xdd);
    const Vec x = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
    const Vec y = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xdd);
    out[0 + j] = _mm512_shuffle_f32x4(v, x, 0x88);
    out[8 + j] = _mm512_shuffle_f32x4(v, x, 0xdd);
    out[4 + j] = _mm512_shuffle_f32x4(w, y, 0x88);
    out[12 + j] = _mm512_shuffle_f32x4(w, y, 0xdd);
  }
}
#else
inline void transpose_lanes(const Vec r[8], Vec out[8]) {
  Vec t[8], u[8];
  for (int g = 0; g < 2; ++g) {  // rows 4g..4g+3: columns j and j + 4 in one register
    t[4 * g + 0] = _mm256_unpacklo_ps(r[4 * g], r[4 * g + 1]);
    t[4 * g + 1] = _mm256_unpackhi_ps(r[4 * g], r[4 * g + 1]);
    t[4 * g + 2] = _mm256_unpacklo_ps(r[4 * g + 2], r[4 * g + 3]);
    t[4 * g + 3] = _mm256_unpackhi_ps(r[4 * g + 2], r[4 * g + 3]);
    u[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xee);
    u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xee);
  }
  for (int j = 0; j < 4; ++j) {
    out[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    out[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}
#endif

// Where a tile's pixels sit in its buffer: pixel (h, w) of an h x w plane at vector
// (h + top) * ld + w + left.
struct Placement {
  int64_t ld, top, left;
};

// nch channel planes of `plane` = rows x cols pixels (plain, planes `plane` floats apart from
// src) -> the tile buffer `dst`, one kLanes-channel vector per pixel; channels >= nch become zeros.
void to_tile(const float* src, int64_t rows, int64_t cols, int64_t nch, float* dst, Placement at) {
  const int64_t plane = rows * cols;
  const LaneMask cmask = first_lanes(nch);
  if (plane == 1) {  // the channels are contiguous
    vstore(dst + (at.top * at.ld + at.left) * kLanes, vload(cmask, src));
    return;
  }
  (void)rows;
  int64_t h = 0, w = 0;
  Vec r[kLanes], o[kLanes];
  for (int64_t p0 = 0; p0 < plane; p0 += kLanes) {
    const int64_t k = std::min(kLanes, plane - p0);
    const LaneMask m = first_lanes(k);
    for (int64_t c = 0; c < kLanes; ++c) {
      r[c] = c < nch ? vload(m, src + c * plane + p0) : vzero();
      _mm_prefetch(reinterpret_cast<const char*>(src + (kLanes + c) * plane + p0), _MM_HINT_T0);
    }
    transpose_lanes(r, o);
    for (int64_t i = 0; i < k; ++i) {
      vstore(dst + ((h + at.top) * at.ld + w + at.left) * kLanes, o[i]);
      if (++w == cols) w = 0, ++h;
    }
  }
}

// The inverse of to_tile: the tile's first nch channels -> the plain planes at dst, written (=)
// or added (+=).
void from_tile(const float* src, Placement at, int64_t rows, int64_t cols, int64_t nch, float* dst,
               bool add) {
  const int64_t plane = rows * cols;
  if (plane == 1) {
    const LaneMask cmask = first_lanes(nch);
    Vec v = vload(src + (at.top * at.ld + at.left) * kLanes);
    if (add) v = vadd(v, vload(cmask, dst));
    vstore(dst, cmask, v);
    return;
  }
  int64_t h = 0, w = 0;
  Vec r[kLanes], o[kLanes];
  for (int64_t p0 = 0; p0 < plane; p0 += kLanes) {
    const int64_t k = std::min(kLanes, plane - p0);
    const LaneMask m = first_lanes(k);
    for (int64_t i = 0; i < kLanes; ++i) {
      if (i < k) {
        r[i] = vload(src + ((h + at.top) * at.ld + w + at.left) * kLanes);
        if (++w == cols) w = 0, ++h;
      } else {
        r[i] = vzero();
      }
    }
    transpose_lanes(r, o);
    for (int64_t c = 0; c < nch; ++c) {
      float* d = dst + c * plane + p0;
      Vec v = o[c];
      if (add) v = vadd(v, vload(m, d));
      vstore(d, m, v);
      __builtin_prefetch(d + kLanes * plane, 1, 3);
    }
  }
}

// Zeros every vector of a rows x cols tile buffer outside the inner block at (top, left).
void zero_border(float* buf, int64_t rows, int64_t cols, int64_t top, int64_t left,
                 int64_t inner_rows, int64_t inner_cols) {
  const Vec z = vzero();
  for (int64_t r = 0; r < rows; ++r) {
    float* row = buf + r * cols * kLanes;
    const bool inside = r >= top && r < top + inner_rows;
    for (int64_t c = 0; c < cols; ++c)
      if (!inside || c < left || c >= left + inner_cols) vstore(row + c * kLanes, z);
  }
}

// The weights of all channel blocks as [blocks][taps][kLanes] (channels past C are zeros).
const float* transposed_weights(const Geometry& g, const float* w, Scratch& scratch) {
  const int64_t taps = g.taps();
  float* wt = scratch.get(g.blocks * taps * kLanes);
  for (int64_t cb = 0; cb < g.blocks; ++cb)
    for (int64_t t = 0; t < taps; ++t)
      for (int64_t l = 0; l < kLanes; ++l) {
        const int64_t c = cb * kLanes + l;
        wt[(cb * taps + t) * kLanes + l] = c < g.C ? w[c * taps + t] : 0.0f;
      }
  return wt;
}

// Runs body(begin, end) on each thread for its contiguous share of [0, tasks).
template <typename F>
void split_over_threads(int64_t tasks, F&& body) {
  const int64_t threads = std::min<int64_t>(num_threads(), tasks);
  if (threads <= 1) return body(int64_t{0}, tasks);
  parallel_for(threads, [&](int64_t t) { body(t * tasks / threads, (t + 1) * tasks / threads); });
}

// ---- forward: y[oh][ow] = bias + sum_{kh,kw} w[kh][kw] * xt[oh*S + kh][ow*S + kw] ----

template <int K, int S, int NB>
inline void forward_columns(const float* row0, int64_t ld, const Vec* wv, Vec bias, float* yrow,
                            int64_t ow) {
  Vec acc[NB];
  for (int b = 0; b < NB; ++b) acc[b] = bias;
  for (int kh = 0; kh < K; ++kh) {
    const float* r = row0 + kh * ld + ow * S * kLanes;
    for (int kw = 0; kw < K; ++kw)
      for (int b = 0; b < NB; ++b)
        acc[b] = vfmadd(wv[kh * K + kw], vload(r + (b * S + kw) * kLanes), acc[b]);
  }
  for (int b = 0; b < NB; ++b) vstore(yrow + (ow + b) * kLanes, acc[b]);
}

template <int K, int S>
void forward_tile(const Geometry& g, const float* xt, const float* wt, Vec bias, float* yt) {
  constexpr int NB = K == 3 ? kColumns3x3 : kColumns5x5;  // accumulators + weights in registers
  Vec wv[K * K];
  for (int t = 0; t < K * K; ++t) wv[t] = vload(wt + t * kLanes);
  const int64_t ld = g.Wp * kLanes;
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const float* row0 = xt + oh * S * ld;
    float* yrow = yt + oh * g.OW * kLanes;
    int64_t ow = 0;
    for (; ow + NB <= g.OW; ow += NB) forward_columns<K, S, NB>(row0, ld, wv, bias, yrow, ow);
    for (; ow + 4 <= g.OW; ow += 4) forward_columns<K, S, 4>(row0, ld, wv, bias, yrow, ow);
    for (; ow < g.OW; ++ow) forward_columns<K, S, 1>(row0, ld, wv, bias, yrow, ow);
  }
}

template <int K, int S>
void forward(const Geometry& g, const float* x, const float* w, const float* bias, float* y) {
  thread_local Scratch weight_scratch;
  const float* wt = transposed_weights(g, w, weight_scratch);
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW;
  split_over_threads(g.blocks * g.N, [&](int64_t begin, int64_t end) {
    thread_local Scratch x_scratch, y_scratch;
    float* xt = x_scratch.get(g.Hp * g.Wp * kLanes);
    float* yt = y_scratch.get(OHW * kLanes);
    zero_border(xt, g.Hp, g.Wp, g.PH, g.PW, g.H, g.W);
    for (int64_t task = begin; task < end; ++task) {  // image-major: x and y stream in order
      const int64_t n = task / g.blocks, cb = task % g.blocks, c0 = cb * kLanes;
      const int64_t nch = g.channels_in(cb);
      const Vec b = bias ? vload(first_lanes(nch), bias + c0) : vzero();
      to_tile(x + (n * g.C + c0) * HW, g.H, g.W, nch, xt, {g.Wp, g.PH, g.PW});
      forward_tile<K, S>(g, xt, wt + cb * g.taps() * kLanes, b, yt);
      from_tile(yt, {g.OW, 0, 0}, g.OH, g.OW, nch, y + (n * g.C + c0) * OHW, /*add=*/false);
    }
  });
}

// ---- weight and bias gradients: dw[kh][kw] += sum_{oh,ow} dy[oh][ow] * xt[oh*S+kh][ow*S+kw] ----

// acc: K*K weight-gradient vectors, then the bias gradient's.
template <int K, int S>
void weight_grad_tile(const Geometry& g, const float* xt, const float* dyt, float* acc) {
  Vec a[K * K];
  for (int t = 0; t < K * K; ++t) a[t] = vload(acc + t * kLanes);
  Vec db = vload(acc + int64_t{K} * K * kLanes);
  const int64_t ld = g.Wp * kLanes;
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const float* dyrow = dyt + ((oh + g.offh) * g.Wq + g.offw) * kLanes;
    const float* xrow = xt + oh * S * ld;
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const Vec d = vload(dyrow + ow * kLanes);
      db = vadd(db, d);
      const float* r = xrow + ow * S * kLanes;
      for (int kh = 0; kh < K; ++kh)
        for (int kw = 0; kw < K; ++kw)
          a[kh * K + kw] = vfmadd(d, vload(r + kh * ld + kw * kLanes), a[kh * K + kw]);
    }
  }
  for (int t = 0; t < K * K; ++t) vstore(acc + t * kLanes, a[t]);
  vstore(acc + int64_t{K} * K * kLanes, db);
}

void bias_grad_tile(const Geometry& g, const float* dyt, float* acc_db) {
  Vec db = vload(acc_db);
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const float* dyrow = dyt + ((oh + g.offh) * g.Wq + g.offw) * kLanes;
    for (int64_t ow = 0; ow < g.OW; ++ow) db = vadd(db, vload(dyrow + ow * kLanes));
  }
  vstore(acc_db, db);
}

// ---- input gradient, gather form over the zero-bordered dy tile ----
// dx[ih][iw] = sum over the taps (kh, kw) with (ih + PH - kh) and (iw + PW - kw) divisible by S
// of w[kh][kw] * dyt[(ih + PH - kh)/S + offh][(iw + PW - kw)/S + offw]. With S = 2 the taps
// depend on the parities of ih and iw, so each row goes as S classes of columns iw = a + S*j,
// each with fixed taps, where the dy column is a fixed offset plus j.

// One row's class: NKH rows of dy (pointers already at the class's first column for each kw
// through col[]), NKW column offsets; writes dxrow[(a + S*j)] for j in [0, count).
template <int NKH, int NKW, int NB>
inline void dx_columns(const float* const* rows, const int64_t* col, const Vec* wv, float* out,
                       int64_t out_step, int64_t j) {
  Vec acc[NB];
  for (int b = 0; b < NB; ++b) acc[b] = vzero();
  for (int i = 0; i < NKH; ++i)
    for (int k = 0; k < NKW; ++k) {
      const float* src = rows[i] + col[k] + j * kLanes;
      for (int b = 0; b < NB; ++b)
        acc[b] = vfmadd(wv[i * NKW + k], vload(src + b * kLanes), acc[b]);
    }
  for (int b = 0; b < NB; ++b) vstore(out + (j + b) * out_step, acc[b]);
}

template <int NKH, int NKW>
void dx_class(const float* const* rows, const int64_t* col, const Vec* wv, float* out,
              int64_t out_step, int64_t count) {
  constexpr int NB = NKH * NKW > 9 ? kColumns5x5 : kColumns3x3;
  int64_t j = 0;
  for (; j + NB <= count; j += NB) dx_columns<NKH, NKW, NB>(rows, col, wv, out, out_step, j);
  for (; j < count; ++j) dx_columns<NKH, NKW, 1>(rows, col, wv, out, out_step, j);
}

using DxClassFn = void (*)(const float* const*, const int64_t*, const Vec*, float*, int64_t,
                           int64_t);

template <int NKH, int... NKW>
constexpr std::array<DxClassFn, sizeof...(NKW)> dx_class_row(std::integer_sequence<int, NKW...>) {
  return {&dx_class<NKH, NKW + 1>...};
}

template <int... NKH>
constexpr std::array<std::array<DxClassFn, 5>, sizeof...(NKH)> dx_class_table(
    std::integer_sequence<int, NKH...>) {
  return {dx_class_row<NKH + 1>(std::make_integer_sequence<int, 5>())...};
}

// dx_class<nkh, nkw> for tap counts 1..5.
constexpr auto kDxClass = dx_class_table(std::make_integer_sequence<int, 5>());

template <int K, int S>
void input_grad_tile(const Geometry& g, const float* dyt, const float* wt, float* dxt) {
  const float* rows[K];
  int64_t col[K];
  Vec wv[K * K];
  int khs[K], kws[K];
  for (int64_t ih = 0; ih < g.H; ++ih) {
    int nkh = 0;
    for (int kh = 0; kh < K; ++kh) {
      const int64_t t = ih + g.PH - kh;
      if (((t % S) + S) % S != 0) continue;
      khs[nkh] = kh;
      rows[nkh++] = dyt + (t / S + g.offh) * g.Wq * kLanes;
    }
    for (int64_t a = 0; a < S && a < g.W; ++a) {
      int nkw = 0;
      for (int kw = 0; kw < K; ++kw) {
        const int64_t t = a + g.PW - kw;
        if (((t % S) + S) % S != 0) continue;
        kws[nkw] = kw;
        col[nkw++] = (t / S + g.offw) * kLanes;
      }
      for (int i = 0; i < nkh; ++i)
        for (int k = 0; k < nkw; ++k) wv[i * nkw + k] = vload(wt + (khs[i] * K + kws[k]) * kLanes);
      const int64_t count = (g.W - a + S - 1) / S;
      kDxClass[nkh - 1][nkw - 1](rows, col, wv, dxt + (ih * g.W + a) * kLanes, S * kLanes, count);
    }
  }
}

// Deterministic mode's weight-gradient cut: the minibatch in this many image ranges (or N).
constexpr int64_t kDeterministicSplits = 8;

template <int K, int S>
void backward(const Geometry& g, const float* x, const float* w, const float* dy, float* dx,
              float* dw, float* db, bool accumulate_dx) {
  const bool want_params = dw != nullptr || db != nullptr;
  if (dx == nullptr && !want_params) return;
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW, taps = g.taps();
  const int64_t acc_floats = (taps + 1) * kLanes;  // one task's dw and db sums
  thread_local Scratch weight_scratch, partial_scratch;
  const float* wt = transposed_weights(g, w, weight_scratch);
  // Tasks: a channel block and a range of images (`splits` ranges per block). The parameter
  // gradients want few ranges (each adds its sums once at the end); the input gradient alone, or
  // few channel blocks on many threads, want more to spread the work.
  // A channel's sums are its lane's alone, in the same order whatever block holds it, so a
  // model's bits depend only on the image ranges: in deterministic mode they depend on N alone
  // (kDeterministicSplits of them), the same on any thread count and at any B; otherwise on the
  // thread count and one model's channel blocks, not B, so that a model of an array sums as it
  // does alone on the same threads.
  const int threads = num_threads();
  int64_t splits = g.N;
  if (want_params && deterministic())
    splits = std::min<int64_t>(kDeterministicSplits, g.N);
  else if (want_params)
    splits = threads <= 1
                 ? 1
                 : std::clamp<int64_t>((4 * int64_t{threads} + g.model_blocks - 1) / g.model_blocks,
                                       1, g.N);
  const int64_t tasks = g.blocks * splits;
  float* partial = want_params ? partial_scratch.get(tasks * acc_floats) : nullptr;
  split_over_threads(tasks, [&](int64_t begin, int64_t end) {
    thread_local Scratch x_scratch, dy_scratch, dx_scratch;
    float* xt = dw ? x_scratch.get(g.Hp * g.Wp * kLanes) : nullptr;
    float* dyt = dy_scratch.get(g.Hq * g.Wq * kLanes);
    float* dxt = dx ? dx_scratch.get(HW * kLanes) : nullptr;
    if (xt) zero_border(xt, g.Hp, g.Wp, g.PH, g.PW, g.H, g.W);
    zero_border(dyt, g.Hq, g.Wq, g.offh, g.offw, g.OH, g.OW);
    // Tasks are split-major (task = split * blocks + cb), and a thread's consecutive tasks of
    // one image range run image by image, each image's channel blocks in order: the thread
    // streams through contiguous memory rather than jumping an image's size per tile (which
    // took much longer at B=8 once the tensors were out of cache; see docs/benchmarks.md,
    // 'Measurements behind code choices').
    for (int64_t task = begin; task < end;) {
      const int64_t split = task / g.blocks, cb_begin = task % g.blocks;
      const int64_t run_end = std::min(end, (split + 1) * g.blocks);
      const int64_t cb_end = cb_begin + (run_end - task);
      if (partial) std::fill(partial + task * acc_floats, partial + run_end * acc_floats, 0.0f);
      for (int64_t n = split * g.N / splits; n < (split + 1) * g.N / splits; ++n)
        for (int64_t cb = cb_begin; cb < cb_end; ++cb) {
          const int64_t c0 = cb * kLanes, nch = g.channels_in(cb), plane = n * g.C + c0;
          float* acc = partial ? partial + (split * g.blocks + cb) * acc_floats : nullptr;
          to_tile(dy + plane * OHW, g.OH, g.OW, nch, dyt, {g.Wq, g.offh, g.offw});
          if (dw) {
            to_tile(x + plane * HW, g.H, g.W, nch, xt, {g.Wp, g.PH, g.PW});
            weight_grad_tile<K, S>(g, xt, dyt, acc);
          } else if (db) {
            bias_grad_tile(g, dyt, acc + taps * kLanes);
          }
          if (dx) {
            input_grad_tile<K, S>(g, dyt, wt + cb * taps * kLanes, dxt);
            from_tile(dxt, {g.W, 0, 0}, g.H, g.W, nch, dx + plane * HW, accumulate_dx);
          }
        }
      task = run_end;
    }
  });
  if (!want_params) return;
  // Each channel block's sums over its image ranges, in order, added to the caller's gradients.
  parallel_for(g.blocks, [&](int64_t cb) {
    const int64_t c0 = cb * kLanes, nch = g.channels_in(cb);
    alignas(64) float sum[kLanes];
    for (int64_t t = 0; t <= taps; ++t) {
      if (t < taps ? dw == nullptr : db == nullptr) continue;
      Vec s = vzero();
      for (int64_t split = 0; split < splits; ++split)
        s = vadd(s, vload(partial + (split * g.blocks + cb) * acc_floats + t * kLanes));
      vstore(sum, s);
      for (int64_t l = 0; l < nch; ++l) {
        if (t < taps)
          dw[(c0 + l) * taps + t] += sum[l];
        else
          db[c0 + l] += sum[l];
      }
    }
  });
}

template <typename F>
void dispatch_kernel(const Geometry& g, F&& f) {
  if (g.K == 3 && g.S == 1)
    return f(std::integral_constant<int, 3>(), std::integral_constant<int, 1>());
  if (g.K == 3 && g.S == 2)
    return f(std::integral_constant<int, 3>(), std::integral_constant<int, 2>());
  if (g.K == 5 && g.S == 1)
    return f(std::integral_constant<int, 5>(), std::integral_constant<int, 1>());
  return f(std::integral_constant<int, 5>(), std::integral_constant<int, 2>());
}

}  // namespace

void depthwise_conv2d_forward(const Conv2dParams& p, const float* x, const float* w,
                              const float* bias, float* y) {
  const Geometry g = make_geometry(p);
  dispatch_kernel(g, [&](auto K, auto S) {
    forward<decltype(K)::value, decltype(S)::value>(g, x, w, bias, y);
  });
}

void depthwise_conv2d_backward(const Conv2dParams& p, const float* x, const float* w,
                               const float* dy, float* dx, float* dw, float* db,
                               bool accumulate_dx) {
  const Geometry g = make_geometry(p);
  dispatch_kernel(g, [&](auto K, auto S) {
    backward<decltype(K)::value, decltype(S)::value>(g, x, w, dy, dx, dw, db, accumulate_dx);
  });
}

#else  // neither AVX-512 nor AVX2 with FMA: the portable loops

void depthwise_conv2d_forward(const Conv2dParams& p, const float* x, const float* w,
                              const float* bias, float* y) {
  detail::depthwise_conv2d_forward_portable(p, x, w, bias, y);
}

void depthwise_conv2d_backward(const Conv2dParams& p, const float* x, const float* w,
                               const float* dy, float* dx, float* dw, float* db,
                               bool accumulate_dx) {
  detail::depthwise_conv2d_backward_portable(p, x, w, dy, dx, dw, db, accumulate_dx);
}

#endif

}  // namespace hfta::cpu
// NOLINTEND(bugprone-easily-swappable-parameters)
