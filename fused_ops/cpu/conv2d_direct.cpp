#include "fused_ops/cpu/conv2d_direct.h"

#include "fused_ops/cpu/simd.h"

// The kernels are written once over the vector layer below: AVX-512 (16 lanes, 32 registers) or
// AVX2 with FMA (8 lanes, 16 registers), where oneDNN's kernels for this layer are slowest
// (docs/benchmarks.md, 'Measurements behind code choices').
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#define HFTA_DIRECT_CONV 1
#else
#define HFTA_DIRECT_CONV 0
#endif

#if HFTA_DIRECT_CONV
// A vector type as a template argument (std::vector<Vec>, std::array of kernel pointers) drops its
// alignment attribute from the type's name only; the vector's allocator still aligns it.
#pragma GCC diagnostic ignored "-Wignored-attributes"
#endif

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/determinism.h"
#include "core/error.h"
#include "core/parallel.h"

namespace hfta::cpu {

namespace {

constexpr int64_t kMaxInChannels = 4;  // beyond this oneDNN's kernels do better
// Deterministic mode's weight-gradient cut: the minibatch in at most this many blocks of images
// whatever the thread count (enough blocks for a few threads, few partial sums to add).
constexpr int64_t kDeterministicSlices = 8;

#if defined(__AVX512F__)
constexpr int64_t kLanes = 16;
using Vec = __m512;
using Mask = __mmask16;
inline Vec load(const float* p) { return _mm512_loadu_ps(p); }
inline Vec load_aligned(const float* p) { return _mm512_load_ps(p); }
inline Vec load_first(Mask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
inline void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
inline void store_first(float* p, Mask m, Vec v) { _mm512_mask_storeu_ps(p, m, v); }
inline Vec splat(float x) { return _mm512_set1_ps(x); }
inline Vec zero() { return _mm512_setzero_ps(); }
inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
inline float sum_lanes(Vec v) { return _mm512_reduce_add_ps(v); }
#elif HFTA_DIRECT_CONV
constexpr int64_t kLanes = 8;
using Vec = __m256;
using Mask = __m256i;  // all bits set in the lanes masked moves touch
inline Vec load(const float* p) { return _mm256_loadu_ps(p); }
inline Vec load_aligned(const float* p) { return _mm256_load_ps(p); }
inline Vec load_first(Mask m, const float* p) { return _mm256_maskload_ps(p, m); }
inline void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
inline void store_first(float* p, Mask m, Vec v) { _mm256_maskstore_ps(p, m, v); }
inline Vec splat(float x) { return _mm256_set1_ps(x); }
inline Vec zero() { return _mm256_setzero_ps(); }
inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
inline float sum_lanes(Vec v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
#else
constexpr int64_t kLanes = 8;  // no kernels: only conv2d_direct_applies reads it
#endif
constexpr int64_t kMaxRowVectors = 64 / kLanes;  // output rows of up to 64 pixels

}  // namespace

bool conv2d_direct_applies(const Conv2dParams& p) {
#if HFTA_DIRECT_CONV
  return p.shared_input && p.groups == 1 && p.in_channels <= kMaxInChannels && p.stride_h == 1 &&
         p.stride_w == 1 && p.dilation_h == 1 && p.dilation_w == 1 &&
         p.out_w() <= kMaxRowVectors * kLanes;
#else
  (void)p;
  return false;
#endif
}

#if HFTA_DIRECT_CONV

namespace {

// The problem as the kernels see it. The shared input is copied once per call into a padded
// buffer xp [N, C_in, Hp, row]: zero borders, and rows long enough (row >= V*kLanes + KW - 1) that
// every vector load of a kernel tap stays inside its row.
struct Geometry {
  int64_t N, C_in, H, W, KH, KW, PH, PW, OH, OW;
  int64_t BC;       // output channels over all B models
  int64_t Hp, row;  // padded input rows, floats per padded row
  int64_t V;        // vectors per output row
  Mask tail;        // lanes of the last vector that hold output pixels
  int64_t K;        // output pixels per channel, OH * OW
  int64_t Kv;       // vectors per output channel plane
  int64_t Kp;       // floats per column row: K rounded up to whole vectors
  Mask K_tail;      // lanes of a plane's last vector that hold pixels
  int64_t taps() const { return C_in * KH * KW; }
  int64_t image_floats() const { return C_in * Hp * row; }
  // Offset of tap t's input row start within a padded image, for output row 0.
  int64_t tap_offset(int64_t t) const {
    const int64_t ci = t / (KH * KW), kh = (t / KW) % KH, kw = t % KW;
    return (ci * Hp + kh) * row + kw;
  }
};

Geometry make_geometry(const Conv2dParams& p) {
  Geometry g{};
  g.N = p.N, g.C_in = p.in_channels, g.H = p.H, g.W = p.W;
  g.KH = p.kernel_h, g.KW = p.kernel_w, g.PH = p.pad_h, g.PW = p.pad_w;
  g.OH = p.out_h(), g.OW = p.out_w();
  g.BC = p.B * p.out_channels;
  g.V = (g.OW + kLanes - 1) / kLanes;
  g.Hp = g.H + 2 * g.PH;
  g.row = std::max(g.W + 2 * g.PW, g.V * kLanes + g.KW - 1);
  const int64_t last = g.OW - (g.V - 1) * kLanes;
  g.tail = first_lanes(last);
  g.K = g.OH * g.OW;
  g.Kv = (g.K + kLanes - 1) / kLanes;
  g.Kp = g.Kv * kLanes;
  g.K_tail = first_lanes(g.K - (g.Kv - 1) * kLanes);
  return g;
}

// dst[0, n) = src[0, n) in vector moves, the last one masked: the rows here are a few dozen
// floats, and a library copy per row (a call each) took as long as the GEMM the rows feed.
inline void copy_floats(const float* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store(dst + i, load(src + i));
  if (i < n) {
    const Mask m = first_lanes(n - i);
    store_first(dst + i, m, load_first(m, src + i));
  }
}

// The padded copy of the shared input, one buffer per calling thread, kept between calls so a
// training step does not allocate.
const float* padded_input(const Geometry& g, const float* x) {
  thread_local std::vector<float> buffer;
  const int64_t plane = g.Hp * g.row;
  buffer.resize(static_cast<size_t>(g.N * g.C_in * plane));
  float* xp = buffer.data();
  parallel_for(g.N * g.C_in, [&](int64_t i) {
    float* dst = xp + i * plane;
    std::fill(dst, dst + plane, 0.0f);
    for (int64_t h = 0; h < g.H; ++h)
      copy_floats(x + (i * g.H + h) * g.W, dst + (h + g.PH) * g.row + g.PW, g.W);
  });
  return xp;
}

// y rows of output channels [oc0, oc0 + OCB) of one image. xp_n: the image's padded input;
// y_n: the image's [BC, OH, OW] output; w: [BC, taps]; bias: [BC] or null.
template <int V, int OCB>
// NOLINTBEGIN(bugprone-easily-swappable-parameters): an internal kernel helper called only in this
// file, at a few call sites that pass locals named like its parameters.
void forward_block(const Geometry& g, const float* xp_n, const float* w, const float* bias,
                   float* y_n, int64_t oc0) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  const int64_t taps = g.taps();
  const float* wb = w + oc0 * taps;
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    Vec acc[OCB][V];
    for (int o = 0; o < OCB; ++o)
      for (int v = 0; v < V; ++v) acc[o][v] = bias ? splat(bias[oc0 + o]) : zero();
    int64_t t = 0;
    for (int64_t ci = 0; ci < g.C_in; ++ci)
      for (int64_t kh = 0; kh < g.KH; ++kh) {
        const float* in_row = xp_n + (ci * g.Hp + oh + kh) * g.row;
        for (int64_t kw = 0; kw < g.KW; ++kw, ++t) {
          Vec xv[V];
          for (int v = 0; v < V; ++v) xv[v] = load(in_row + kw + v * kLanes);
          for (int o = 0; o < OCB; ++o) {
            const Vec wv = splat(wb[o * taps + t]);
            for (int v = 0; v < V; ++v) acc[o][v] = fmadd(wv, xv[v], acc[o][v]);
          }
        }
      }
    for (int o = 0; o < OCB; ++o) {
      float* out = y_n + ((oc0 + o) * g.OH + oh) * g.OW;
      for (int v = 0; v < V - 1; ++v) store(out + v * kLanes, acc[o][v]);
      store_first(out + (V - 1) * kLanes, g.tail, acc[o][V - 1]);
    }
  }
}

// Output channels per forward block: OCB x V accumulators, V input vectors and a weight in
// registers (16 accumulators of 32 with AVX-512; 8-12 of 16 with AVX2).
#if defined(__AVX512F__)
template <int V>
constexpr int kForwardBlock = V == 1   ? 16
                              : V == 2 ? 8
                                       : 4;
#else
template <int V>
constexpr int kForwardBlock = V == 1   ? 12
                              : V == 2 ? 6
                              : V == 3 ? 3
                              : V == 4 ? 2
                                       : 1;
#endif

template <int V>
// NOLINTBEGIN(bugprone-easily-swappable-parameters): an internal kernel helper called only in this
// file, at a few call sites that pass locals named like its parameters.
void forward_all(const Geometry& g, const float* xp, const float* w, const float* bias, float* y) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  constexpr int OCB = kForwardBlock<V>;
  const int64_t full_blocks = g.BC / OCB, blocks = full_blocks + (g.BC % OCB != 0);
  parallel_for(g.N * blocks, [&](int64_t i) {
    const int64_t n = i / blocks, blk = i % blocks;
    const float* xp_n = xp + n * g.image_floats();
    float* y_n = y + n * g.BC * g.OH * g.OW;
    if (blk < full_blocks)
      forward_block<V, OCB>(g, xp_n, w, bias, y_n, blk * OCB);
    else
      for (int64_t oc = full_blocks * OCB; oc < g.BC; ++oc)
        forward_block<V, 1>(g, xp_n, w, bias, y_n, oc);
  });
}

// forward_all<g.V>: V a compile-time constant up to kMaxRowVectors.
template <int V>
void forward_for_row_vectors(const Geometry& g, const float* xp, const float* w, const float* bias,
                             float* y) {
  if constexpr (V < kMaxRowVectors)
    if (g.V > V) return forward_for_row_vectors<V + 1>(g, xp, w, bias, y);
  forward_all<V>(g, xp, w, bias, y);
}

// The columns of one image for the weight gradients: row t < taps is tap t's input pixel under
// every output pixel, cols[t][oh * OW + ow] = xp[ci][oh + kh][ow + kw]; row `taps` is all ones,
// so the bias gradient (the sum of dy) comes out as that row's "weight gradient". Rows are Kp
// floats, 64-byte aligned, zero past K.
void build_columns(const Geometry& g, const float* xp_n, float* cols) {
  const int64_t taps = g.taps();
  for (int64_t t = 0; t < taps; ++t) {
    float* dst = cols + t * g.Kp;
    const float* src = xp_n + g.tap_offset(t);
    for (int64_t oh = 0; oh < g.OH; ++oh) copy_floats(src + oh * g.row, dst + oh * g.OW, g.OW);
    std::fill(dst + g.K, dst + g.Kp, 0.0f);
  }
  float* ones = cols + taps * g.Kp;
  std::fill(ones, ones + g.K, 1.0f);
  std::fill(ones + g.K, ones + g.Kp, 0.0f);
}

// One image's contribution to the gradients of output channels [oc, oc + OCB) for column rows
// [r, r + TB): lane-wise partial sums over the image's pixels, added to acc_out
// (acc_out[o * slots + t]).
// dy_n: the image's [BC, K] planes from channel oc on; cols: rows r.. of the image's columns.
// Every column vector is loaded once for OCB channels, and every dy vector once for TB rows.
template <int OCB, int TB>
// NOLINTBEGIN(bugprone-easily-swappable-parameters): an internal kernel helper called only in this
// file, at a few call sites that pass locals named like its parameters.
void weight_grad_tile(const Geometry& g, const float* dy_n, const float* cols, Vec* acc_out,
                      int64_t slots) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  Vec acc[OCB][TB];
#pragma GCC unroll 8
  for (int o = 0; o < OCB; ++o)
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) acc[o][t] = acc_out[o * slots + t];
  for (int64_t kv = 0; kv < g.Kv; ++kv) {
    const bool last = kv == g.Kv - 1;
    Vec c[TB];
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) c[t] = load_aligned(cols + t * g.Kp + kv * kLanes);
#pragma GCC unroll 8
    for (int o = 0; o < OCB; ++o) {
      const float* at = dy_n + o * g.K + kv * kLanes;
      const Vec d = last ? load_first(g.K_tail, at) : load(at);
#pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) acc[o][t] = fmadd(d, c[t], acc[o][t]);
    }
  }
#pragma GCC unroll 8
  for (int o = 0; o < OCB; ++o)
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) acc_out[o * slots + t] = acc[o][t];
}

#if defined(__AVX512F__)
constexpr int kTileChannels = 4;  // 4 x 6 accumulators + 6 columns + 1 dy: 31 of 32 registers
constexpr int kTileRows = 6;
#else
constexpr int kTileChannels = 2;  // 2 x 4 accumulators + 4 columns + 1 dy: 13 of 16 registers
constexpr int kTileRows = 4;
#endif

using WeightGradTile = void (*)(const Geometry&, const float*, const float*, Vec*, int64_t);

template <int OCB, size_t... I>
constexpr std::array<WeightGradTile, sizeof...(I)> weight_grad_tiles(std::index_sequence<I...>) {
  return {&weight_grad_tile<OCB, static_cast<int>(I) + 1>...};
}

// weight_grad_tile<OCB, TB> for TB = 1..kTileRows at index TB - 1: full channel blocks, and one
// channel at a time for the channels left over.
constexpr auto kTiles = weight_grad_tiles<kTileChannels>(std::make_index_sequence<kTileRows>{});
constexpr auto kTilesOneChannel = weight_grad_tiles<1>(std::make_index_sequence<kTileRows>{});

}  // namespace

void conv2d_direct_forward(const Conv2dParams& p, const TensorView& x, const TensorView& weight,
                           const TensorView& bias, const TensorView& y) {
  HFTA_CHECK(conv2d_direct_applies(p),
             "conv2d_direct_forward called for a problem it does not "
             "handle (see conv2d_direct_applies)");
  const Geometry g = make_geometry(p);
  const float* xp = padded_input(g, x.data);
  const float* b = p.bias ? bias.data : nullptr;
  forward_for_row_vectors<1>(g, xp, weight.data, b, y.data);
}

void conv2d_direct_backward_weights(const Conv2dParams& p, const TensorView& x,
                                    const TensorView& dy, const TensorView& dweight,
                                    const TensorView& dbias) {
  HFTA_CHECK(conv2d_direct_applies(p),
             "conv2d_direct_backward_weights called for a problem it "
             "does not handle (see conv2d_direct_applies)");
  const bool want_dw = !dweight.empty(), want_db = p.bias && !dbias.empty();
  if (!want_dw && !want_db) return;
  const Geometry g = make_geometry(p);
  const float* xp = padded_input(g, x.data);
  // A GEMM per image, dW[BC, taps + 1] += dy_n[BC, K] x cols_n[taps + 1, K]^T, accumulated
  // lane-wise: each thread takes a block of images, builds each image's columns once for all
  // B models' channels (the fusion win of a shared input: LeNet's conv1 at B=8 reads each column
  // vector once for 256 channels), and keeps its partial sums for every (channel, row) in its own
  // slice of `partial` (LeNet at B=8: 256 x 26 vectors, 416 KB); then the slices are summed. So
  // dy is read once, in order, and an image's columns (26 x 784 floats) stay in L2.
  // (Per channel with each tap's input row loaded unaligned, as before, it was several times
  // slower: docs/benchmarks.md, 'Measurements behind code choices'.)
  const int64_t rows = g.taps() + 1, slots = rows;
  const int64_t row_chunks = (rows + kTileRows - 1) / kTileRows;
  const int64_t per_chunk = (rows + row_chunks - 1) / row_chunks;
  // The images are cut into `slices` blocks, one per thread, each summed into its own partial
  // sums, which are then added in slice order. In deterministic mode the cut depends on N alone
  // (kDeterministicSlices blocks, spread over however many threads there are), so a model's
  // gradient has the same bits on any thread count.
  const int64_t threads = std::max<int64_t>(
      1, std::min<int64_t>(deterministic() ? kDeterministicSlices : num_threads(), g.N));
  thread_local std::vector<Vec> partial;
  partial.resize(static_cast<size_t>(threads * g.BC * slots));
  Vec* sums = partial.data();
  parallel_for(threads, [&](int64_t th) {
    thread_local std::vector<Vec> column_buffer;  // vectors keep the rows aligned
    column_buffer.resize(static_cast<size_t>(rows * g.Kv));
    float* cols = reinterpret_cast<float*>(column_buffer.data());
    Vec* mine = sums + th * g.BC * slots;
    std::fill(mine, mine + g.BC * slots, zero());
    for (int64_t n = th * g.N / threads; n < (th + 1) * g.N / threads; ++n) {
      build_columns(g, xp + n * g.image_floats(), cols);
      const float* dy_n = dy.data + n * g.BC * g.K;
      // Channel tile by channel tile, so dy is read in order, a tile's planes (4 x 3 KB for
      // LeNet) staying in L1 over the row chunks. (Blocking the pixels too, to keep a block of
      // columns in L1 over all channels, read dy in 8-line pieces 3 KB apart, and measured
      // slower at B=8; see docs/benchmarks.md, 'Measurements behind code choices'.)
      for (int64_t oc = 0; oc < g.BC;) {
        const bool full = oc + kTileChannels <= g.BC;
        for (int64_t r = 0; r < rows; r += per_chunk) {
          const int64_t count = std::min(per_chunk, rows - r);
          (full ? kTiles : kTilesOneChannel)[count - 1](g, dy_n + oc * g.K, cols + r * g.Kp,
                                                        mine + oc * slots + r, slots);
        }
        oc += full ? kTileChannels : 1;
      }
    }
  });
  const int64_t taps = g.taps();
  parallel_for(g.BC, [&](int64_t oc) {
    for (int64_t t = 0; t < slots; ++t) {
      if (t < taps ? !want_dw : !want_db) continue;
      Vec total = sums[oc * slots + t];
      for (int64_t th = 1; th < threads; ++th)
        total = add(total, sums[(th * g.BC + oc) * slots + t]);
      const float sum = sum_lanes(total);
      if (t < taps)
        dweight.data[oc * taps + t] += sum;
      else
        dbias.data[oc] += sum;
    }
  });
}

#else  // neither AVX-512 nor AVX2 with FMA: conv2d_direct_applies() is false, nothing calls these.

void conv2d_direct_forward(const Conv2dParams&, const TensorView&, const TensorView&,
                           const TensorView&, const TensorView&) {
  fail("conv2d_direct_forward needs an AVX-512 or AVX2 build");
}
void conv2d_direct_backward_weights(const Conv2dParams&, const TensorView&, const TensorView&,
                                    const TensorView&, const TensorView&) {
  fail("conv2d_direct_backward_weights needs an AVX-512 or AVX2 build");
}

#endif

}  // namespace hfta::cpu
