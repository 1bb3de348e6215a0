#include "fused_ops/cpu/conv2d_direct.h"

#include "fused_ops/cpu/avx512.h"

#if defined(__AVX512F__)
// __m512 as a template argument (std::vector<__m512>, std::array of kernel pointers) drops its
// alignment attribute from the type's name only; the vector's allocator still aligns it.
#pragma GCC diagnostic ignored "-Wignored-attributes"
#endif

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"

namespace hfta::cpu {

namespace {

constexpr int64_t kLanes = 16;         // floats per AVX-512 vector
constexpr int64_t kMaxInChannels = 4;  // beyond this oneDNN's kernels do better
constexpr int64_t kMaxRowVectors = 4;  // output rows of up to 64 pixels

}  // namespace

bool conv2d_direct_applies(const Conv2dParams& p) {
#if defined(__AVX512F__)
  return p.shared_input && p.groups == 1 && p.in_channels <= kMaxInChannels && p.stride_h == 1 &&
         p.stride_w == 1 && p.dilation_h == 1 && p.dilation_w == 1 &&
         p.out_w() <= kMaxRowVectors * kLanes;
#else
  (void)p;
  return false;
#endif
}

#if defined(__AVX512F__)

namespace {

// The problem as the kernels see it. The shared input is copied once per call into a padded
// buffer xp [N, C_in, Hp, row]: zero borders, and rows long enough (row >= V*16 + KW - 1) that
// every vector load of a kernel tap stays inside its row.
struct Geometry {
  int64_t N, C_in, H, W, KH, KW, PH, PW, OH, OW;
  int64_t BC;        // output channels over all B models
  int64_t Hp, row;   // padded input rows, floats per padded row
  int64_t V;         // vectors per output row
  __mmask16 tail;    // lanes of the last vector that hold output pixels
  int64_t K;         // output pixels per channel, OH * OW
  int64_t Kv;        // vectors per output channel plane
  int64_t Kp;        // floats per column row: K rounded up to whole vectors
  __mmask16 K_tail;  // lanes of a plane's last vector that hold pixels
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
  g.tail = static_cast<__mmask16>((1u << last) - 1u);
  g.K = g.OH * g.OW;
  g.Kv = (g.K + kLanes - 1) / kLanes;
  g.Kp = g.Kv * kLanes;
  g.K_tail = static_cast<__mmask16>((1u << (g.K - (g.Kv - 1) * kLanes)) - 1u);
  return g;
}

// dst[0, n) = src[0, n) in vector moves, the last one masked: the rows here are a few dozen
// floats, and a library copy per row (a call each) took as long as the GEMM the rows feed.
inline void copy_floats(const float* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) _mm512_storeu_ps(dst + i, _mm512_loadu_ps(src + i));
  if (i < n) {
    const auto m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_maskz_loadu_ps(m, src + i));
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
    __m512 acc[OCB][V];
    for (int o = 0; o < OCB; ++o)
      for (int v = 0; v < V; ++v)
        acc[o][v] = bias ? _mm512_set1_ps(bias[oc0 + o]) : _mm512_setzero_ps();
    int64_t t = 0;
    for (int64_t ci = 0; ci < g.C_in; ++ci)
      for (int64_t kh = 0; kh < g.KH; ++kh) {
        const float* in_row = xp_n + (ci * g.Hp + oh + kh) * g.row;
        for (int64_t kw = 0; kw < g.KW; ++kw, ++t) {
          __m512 xv[V];
          for (int v = 0; v < V; ++v) xv[v] = _mm512_loadu_ps(in_row + kw + v * kLanes);
          for (int o = 0; o < OCB; ++o) {
            const __m512 wv = _mm512_set1_ps(wb[o * taps + t]);
            for (int v = 0; v < V; ++v) acc[o][v] = _mm512_fmadd_ps(wv, xv[v], acc[o][v]);
          }
        }
      }
    for (int o = 0; o < OCB; ++o) {
      float* out = y_n + ((oc0 + o) * g.OH + oh) * g.OW;
      for (int v = 0; v < V - 1; ++v) _mm512_storeu_ps(out + v * kLanes, acc[o][v]);
      _mm512_mask_storeu_ps(out + (V - 1) * kLanes, g.tail, acc[o][V - 1]);
    }
  }
}

// Output channels per forward block: 16 accumulators (of 32 registers) whatever the row width.
template <int V>
constexpr int kForwardBlock = V == 1   ? 16
                              : V == 2 ? 8
                                       : 4;

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
void weight_grad_tile(const Geometry& g, const float* dy_n, const float* cols, __m512* acc_out,
                      int64_t slots) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  __m512 acc[OCB][TB];
#pragma GCC unroll 8
  for (int o = 0; o < OCB; ++o)
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) acc[o][t] = acc_out[o * slots + t];
  for (int64_t kv = 0; kv < g.Kv; ++kv) {
    const __mmask16 m = kv == g.Kv - 1 ? g.K_tail : static_cast<__mmask16>(0xffff);
    __m512 c[TB];
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) c[t] = _mm512_load_ps(cols + t * g.Kp + kv * kLanes);
#pragma GCC unroll 8
    for (int o = 0; o < OCB; ++o) {
      const __m512 d = _mm512_maskz_loadu_ps(m, dy_n + o * g.K + kv * kLanes);
#pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) acc[o][t] = _mm512_fmadd_ps(d, c[t], acc[o][t]);
    }
  }
#pragma GCC unroll 8
  for (int o = 0; o < OCB; ++o)
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) acc_out[o * slots + t] = acc[o][t];
}

constexpr int kTileChannels = 4;  // 4 x 6 accumulators + 6 columns + 1 dy: 31 of 32 registers
constexpr int kTileRows = 6;

using WeightGradTile = void (*)(const Geometry&, const float*, const float*, __m512*, int64_t);

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
  switch (g.V) {
    case 1:
      return forward_all<1>(g, xp, weight.data, b, y.data);
    case 2:
      return forward_all<2>(g, xp, weight.data, b, y.data);
    case 3:
      return forward_all<3>(g, xp, weight.data, b, y.data);
    default:
      return forward_all<4>(g, xp, weight.data, b, y.data);
  }
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
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(num_threads(), g.N));
  thread_local std::vector<__m512> partial;
  partial.resize(static_cast<size_t>(threads * g.BC * slots));
  __m512* sums = partial.data();
  parallel_for(threads, [&](int64_t th) {
    thread_local std::vector<__m512> column_buffer;  // vectors keep the rows 64-byte aligned
    column_buffer.resize(static_cast<size_t>(rows * g.Kv));
    float* cols = reinterpret_cast<float*>(column_buffer.data());
    __m512* mine = sums + th * g.BC * slots;
    std::fill(mine, mine + g.BC * slots, _mm512_setzero_ps());
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
      __m512 total = sums[oc * slots + t];
      for (int64_t th = 1; th < threads; ++th)
        total = _mm512_add_ps(total, sums[(th * g.BC + oc) * slots + t]);
      const float sum = _mm512_reduce_add_ps(total);
      if (t < taps)
        dweight.data[oc * taps + t] += sum;
      else
        dbias.data[oc] += sum;
    }
  });
}

#else  // no AVX-512: conv2d_direct_applies() is false and cpu/conv2d.cpp never calls these.

void conv2d_direct_forward(const Conv2dParams&, const TensorView&, const TensorView&,
                           const TensorView&, const TensorView&) {
  fail("conv2d_direct_forward needs an AVX-512 build");
}
void conv2d_direct_backward_weights(const Conv2dParams&, const TensorView&, const TensorView&,
                                    const TensorView&, const TensorView&) {
  fail("conv2d_direct_backward_weights needs an AVX-512 build");
}

#endif

}  // namespace hfta::cpu
