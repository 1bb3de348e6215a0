// CPU fused pooling: our own loops, parallel over the N*B*C input planes.
//
// Parallelization: parallel_for over planes. In the [N, B*C, H, W] layout every (n, channel)
// plane is contiguous and independent (forward and backward), so the fused op is plain pooling
// over N*B*C planes: no synchronization, and B only lengthens the loop.
//
// Vectorization: each plane is first copied into a per-thread scratch plane whose rows are padded
// on both sides with the padding value (-inf for max, 0 for average) and on the right up to a
// whole number of blocks (16 outputs with AVX-512, 8 with AVX2). Every output row is then
// computed in such blocks, one output per vector lane, with no border cases: window rows outside
// the input are skipped, window columns outside it read the padding value, which never wins a max
// and adds nothing to a sum. Lanes past the row's end are computed and not stored. Average-pooling
// backward accumulates into such a scratch plane and copies its interior out. The vectors are
// GCC/Clang vector extensions (intrinsics only for masked moves): with -march=native one block is
// one register, and strides 1 and 2 (the common ones) load with plain loads and one shuffle instead
// of a gather. Written with `#pragma omp simd` loops instead, the same scheme ran slower (GCC 12
// kept the lanes in memory), and the first version (row loops per kernel offset) slower still (see
// docs/benchmarks.md, 'Measurements behind code choices').
// Scratch: thread_local, grown to the largest padded plane seen (one plane per thread, about
// 200 KB for 224x224), so steady-state training does not allocate. It holds nothing between
// calls.
//
// Why not oneDNN pooling: PyTorch's semantics (argmax as an index into the plane, first maximum
// wins ties, NaN propagates, ceil_mode windows whose average divides by the part inside the
// padded input) do not map onto oneDNN's workspace and divisor rules, and on the plain NCHW
// layout these loops measured faster (numbers at the top of tests/fused_ops/test_pool2d.cpp).
#include "fused_ops/pool2d.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "fused_ops/cpu/simd.h"

namespace hfta::cpu {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One block: one register of fp32 or int32 lanes, 16 with AVX-512, 8 otherwise. 16-lane blocks
// without AVX-512 ran several times slower (GCC lowered their shuffles and partial stores to
// scalar code; docs/benchmarks.md, 'Measurements behind code choices'). GCC notes that passing such
// vectors by value changes the ABI (-Wpsabi); every function taking them here has internal linkage.
#pragma GCC diagnostic ignored "-Wpsabi"
#if defined(__AVX512F__)
constexpr int kLanes = 16;
#else
constexpr int kLanes = 8;
#endif
using Floats = float __attribute__((vector_size(4 * kLanes)));
using Ints = int32_t __attribute__((vector_size(4 * kLanes)));

inline Floats load(const float* p) {
  Floats v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A shuffle of a:b (or of v and zeros) by constant lane indices, the same code for GCC and Clang.
#if defined(__clang__)
#define HFTA_SHUFFLE(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define HFTA_SHUFFLE(a, b, ...) __builtin_shuffle(a, b, Ints{__VA_ARGS__})
#endif

// Lanes 0, 2, 4, ... of the 2 * kLanes floats a:b.
inline Floats even_lanes(Floats a, Floats b) {
#if defined(__AVX512F__)
  return HFTA_SHUFFLE(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
#else
  return HFTA_SHUFFLE(a, b, 0, 2, 4, 6, 8, 10, 12, 14);
#endif
}

// v's lower (spread_low) or upper (spread_high) half spread to every other lane, zeros between.
inline Floats spread_low(Floats v) {
  const Floats zero{};
#if defined(__AVX512F__)
  return HFTA_SHUFFLE(v, zero, 0, 16, 1, 16, 2, 16, 3, 16, 4, 16, 5, 16, 6, 16, 7, 16);
#else
  return HFTA_SHUFFLE(v, zero, 0, 8, 1, 8, 2, 8, 3, 8);
#endif
}
inline Floats spread_high(Floats v) {
  const Floats zero{};
#if defined(__AVX512F__)
  return HFTA_SHUFFLE(v, zero, 8, 16, 9, 16, 10, 16, 11, 16, 12, 16, 13, 16, 14, 16, 15, 16);
#else
  return HFTA_SHUFFLE(v, zero, 4, 8, 5, 8, 6, 8, 7, 8);
#endif
}
// Lanes 1, 3, 5, ... of the 2 * kLanes floats a:b.
inline Floats odd_lanes(Floats a, Floats b) {
#if defined(__AVX512F__)
  return HFTA_SHUFFLE(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
#else
  return HFTA_SHUFFLE(a, b, 1, 3, 5, 7, 9, 11, 13, 15);
#endif
}

// a0 b0 a1 b1 ... of the lower (interleave_low) or upper (interleave_high) halves of a and b.
inline Floats interleave_low(Floats a, Floats b) {
#if defined(__AVX512F__)
  return HFTA_SHUFFLE(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
#else
  return HFTA_SHUFFLE(a, b, 0, 8, 1, 9, 2, 10, 3, 11);
#endif
}
inline Floats interleave_high(Floats a, Floats b) {
#if defined(__AVX512F__)
  return HFTA_SHUFFLE(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
#else
  return HFTA_SHUFFLE(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
#endif
}
#undef HFTA_SHUFFLE

// Lanes p[0], p[s], p[2s], ...: kStride is the stride when it is 1 or 2, else 0 and s is read.
template <int kStride>
inline Floats load_strided(const float* p, int64_t s) {
  if constexpr (kStride == 1) {
    return load(p);
  } else if constexpr (kStride == 2) {
    return even_lanes(load(p), load(p + kLanes));
  } else {
    Floats v;
    for (int j = 0; j < kLanes; ++j) v[j] = p[j * s];
    return v;
  }
}

// p[j*s] += v[j] for every lane j.
template <int kStride>
inline void add_strided(float* p, int64_t s, Floats v) {
  if constexpr (kStride == 1) {
    const Floats sum = load(p) + v;
    std::memcpy(p, &sum, sizeof sum);
  } else if constexpr (kStride == 2) {
    const Floats low = load(p) + spread_low(v), high = load(p + kLanes) + spread_high(v);
    std::memcpy(p, &low, sizeof low);
    std::memcpy(p + kLanes, &high, sizeof high);
  } else {
    for (int j = 0; j < kLanes; ++j) p[j * s] += v[j];
  }
}

inline Floats splat(float v) { return Floats{} + v; }

inline Ints lane_offsets(int32_t step) {
  Ints v;
  for (int j = 0; j < kLanes; ++j) v[j] = j * step;
  return v;
}

// Window [start, end) of output index o along an axis, clipped to the input, and its size
// clipped to the padded input (the count_include_pad divisor).
struct Window {
  int64_t start, end, padded_size;
};

// NOLINTBEGIN(bugprone-easily-swappable-parameters): an internal kernel helper called only in this
// file, at a few call sites that pass locals named like its parameters.
inline Window window(int64_t o, int64_t size, int64_t kernel, int64_t stride, int64_t pad) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  int64_t start = o * stride - pad;
  int64_t end = std::min(start + kernel, size + pad);
  int64_t padded_size = end - start;
  return {std::max<int64_t>(start, 0), std::min(end, size), padded_size};
}

// The geometry shared by every plane of one problem. Column c of a padded row holds input column
// c - pw; Wp covers every lane of the last block, including the stride-2 load's second vector.
struct Geometry {
  int64_t H, W, OH, OW, kh, kw, sh, sw, ph, pw, Wp;
  Window row_window(int64_t oh) const { return window(oh, H, kh, sh, ph); }
};

Geometry geometry_of(const Pool2dParams& p) {
  Geometry g;
  g.H = p.H, g.W = p.W, g.OH = p.out_h(), g.OW = p.out_w();
  g.kh = p.kernel_h, g.kw = p.kernel_w, g.ph = p.pad_h, g.pw = p.pad_w;
  g.sh = p.effective_stride_h(), g.sw = p.effective_stride_w();
  const int64_t blocks = (g.OW + kLanes - 1) / kLanes;
  g.Wp = std::max(blocks * kLanes * g.sw + g.kw, g.pw + g.W);
  return g;
}

// This thread's scratch plane of at least `floats` floats.
float* scratch_plane(int64_t floats) {
  thread_local std::vector<float> scratch;
  if (static_cast<int64_t>(scratch.size()) < floats) scratch.resize(floats);
  return scratch.data();
}

// Copies plane x [H, W] into padded [H, Wp], `fill` outside the input's columns. With AVX-512 or
// AVX2 the row copy is whole and masked vector moves: the scalar loop took as long as the pooling
// itself on LeNet's 28- and 14-wide rows.
void pad_columns(const Geometry& g, float fill, const float* x, float* padded) {
  for (int64_t h = 0; h < g.H; ++h) {
    float* dst = padded + h * g.Wp;
    const float* src = x + h * g.W;
    for (int64_t c = 0; c < g.pw; ++c) dst[c] = fill;
#if defined(__AVX512F__)
    for (int64_t c = 0; c < g.W; c += kLanes) {
      const __mmask16 m = first_lanes(std::min<int64_t>(kLanes, g.W - c));
      _mm512_mask_storeu_ps(dst + g.pw + c, m, _mm512_maskz_loadu_ps(m, src + c));
    }
#elif defined(__AVX2__)
    for (int64_t c = 0; c < g.W; c += kLanes) {
      const __m256i m = first_lanes(std::min<int64_t>(kLanes, g.W - c));
      _mm256_maskstore_ps(dst + g.pw + c, m, _mm256_maskload_ps(src + c, m));
    }
#else
    for (int64_t c = 0; c < g.W; ++c) dst[g.pw + c] = src[c];  // short rows: no memcpy call
#endif
    for (int64_t c = g.pw + g.W; c < g.Wp; ++c) dst[c] = fill;
  }
}

// Calls f(stride) with the column stride as a compile-time constant when it is 1 or 2, else 0.
template <typename F>
void with_stride(int64_t stride, F&& f) {
  if (stride == 1)
    f(std::integral_constant<int, 1>());
  else if (stride == 2)
    f(std::integral_constant<int, 2>());
  else
    f(std::integral_constant<int, 0>());
}

// Stores the first n lanes of a block (one masked store with AVX-512 or AVX2: LeNet's rows are 14
// and 7 outputs wide, so most blocks are partial ones).
template <typename T, typename Vec>
inline void store_lanes(T* dst, const Vec& v, int64_t n) {
  if (n == kLanes) {
    std::memcpy(dst, &v, sizeof v);
    return;
  }
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<Vec, Floats>)
    _mm512_mask_storeu_ps(dst, first_lanes(n), reinterpret_cast<__m512>(v));
  else
    _mm512_mask_storeu_epi32(dst, first_lanes(n), reinterpret_cast<__m512i>(v));
#elif defined(__AVX2__)
  if constexpr (std::is_same_v<Vec, Floats>)
    _mm256_maskstore_ps(dst, first_lanes(n), reinterpret_cast<__m256>(v));
  else
    _mm256_maskstore_epi32(dst, first_lanes(n), reinterpret_cast<__m256i>(v));
#else
  for (int64_t j = 0; j < n; ++j) dst[j] = v[j];
#endif
}

// The first n lanes (0 <= n <= kLanes) of a block from p, zeros after them; nothing past them is
// read (masked loads do not fault on masked-off lanes).
template <typename Vec, typename T>
inline Vec load_lanes(const T* p, int64_t n) {
  Vec v{};
  if (n <= 0) return v;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<Vec, Floats>)
    return reinterpret_cast<Vec>(_mm512_maskz_loadu_ps(first_lanes(n), p));
  else
    return reinterpret_cast<Vec>(_mm512_maskz_loadu_epi32(first_lanes(n), p));
#elif defined(__AVX2__)
  if constexpr (std::is_same_v<Vec, Floats>)
    return reinterpret_cast<Vec>(_mm256_maskload_ps(p, first_lanes(n)));
  else
    return reinterpret_cast<Vec>(
        _mm256_maskload_epi32(reinterpret_cast<const int*>(p), first_lanes(n)));
#else
  for (int64_t j = 0; j < std::min<int64_t>(n, kLanes); ++j) v[j] = p[j];
  return v;
#endif
}

// Max pooling with 2x2 windows at stride 2, no padding, every window whole (floor mode, or ceil
// mode where it adds no partial window): the pooling of LeNet and most CNNs. Read straight from
// the input's rows, without the padded copy the general kernel makes (which cost more than the
// pooling on 14- and 28-wide planes: docs/benchmarks.md, "2x2 max pooling without the padded
// copy"), comparing the same candidates in the same (h, w) order, so values and argmax are the
// general kernel's bit for bit.
bool is_whole_2x2_max(const Pool2dParams& p, const Geometry& g) {
  return p.kind == PoolKind::kMax && g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 &&
         g.ph == 0 && g.pw == 0 && 2 * g.OH <= g.H && 2 * g.OW <= g.W;
}

template <bool kWithArgmax>
void max_pool_2x2_plane(const Geometry& g, const float* x, float* y, int32_t* argmax) {
  const Ints even_cols = lane_offsets(2);
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const float* top = x + 2 * oh * g.W;
    const float* bottom = top + g.W;
    for (int64_t o0 = 0; o0 < g.OW; o0 += kLanes) {
      const int64_t n = std::min<int64_t>(kLanes, g.OW - o0);
      // The block's 2n input columns, as two vectors of (up to) kLanes each.
      const int64_t first = std::min<int64_t>(2 * n, kLanes), second = 2 * n - first;
      const float* t = top + 2 * o0;
      const float* b = bottom + 2 * o0;
      const Floats t0 = load_lanes<Floats>(t, first), t1 = load_lanes<Floats>(t + kLanes, second);
      const Floats b0 = load_lanes<Floats>(b, first), b1 = load_lanes<Floats>(b + kLanes, second);
      const Ints corner = static_cast<int32_t>(2 * oh * g.W + 2 * o0) + even_cols;
      Floats best = even_lanes(t0, t1);
      Ints index = corner;
      auto consider = [&](Floats v, int32_t offset) {
        const Ints take = (v > best) | (v != v);  // NaN takes over; ties keep the first
        best = take ? v : best;
        if constexpr (kWithArgmax) index = take ? corner + offset : index;
      };
      consider(odd_lanes(t0, t1), 1);
      consider(even_lanes(b0, b1), static_cast<int32_t>(g.W));
      consider(odd_lanes(b0, b1), static_cast<int32_t>(g.W + 1));
      store_lanes(y + oh * g.OW + o0, best, n);
      if constexpr (kWithArgmax) store_lanes(argmax + oh * g.OW + o0, index, n);
    }
  }
}

// Backward of max_pool_2x2_plane when the windows tile the plane exactly (H = 2 OH, W = 2 OW):
// every dx element is written once, dy where the argmax points at it, else 0 (or its value plus
// that, with `accumulate`), instead of zeroing the plane and scattering into it.
bool tiles_2x2_exactly(const Geometry& g) { return g.H == 2 * g.OH && g.W == 2 * g.OW; }

void max_pool_2x2_backward_plane(const Geometry& g, const int32_t* argmax, const float* dy,
                                 float* dx, bool accumulate) {
  const Ints even_cols = lane_offsets(2);
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    for (int64_t o0 = 0; o0 < g.OW; o0 += kLanes) {
      const int64_t n = std::min<int64_t>(kLanes, g.OW - o0);
      const int64_t first = std::min<int64_t>(2 * n, kLanes), second = 2 * n - first;
      const Floats grad = load_lanes<Floats>(dy + oh * g.OW + o0, n);
      const Ints at = load_lanes<Ints>(argmax + oh * g.OW + o0, n);
      const Ints corner = static_cast<int32_t>(2 * oh * g.W + 2 * o0) + even_cols;
      const Floats zero{};
      for (int64_t row = 0; row < 2; ++row) {
        const Ints left = corner + static_cast<int32_t>(row * g.W);
        const Floats to_left = at == left ? grad : zero;
        const Floats to_right = at == left + 1 ? grad : zero;
        Floats low = interleave_low(to_left, to_right), high = interleave_high(to_left, to_right);
        float* d = dx + (2 * oh + row) * g.W + 2 * o0;
        if (accumulate) {
          low += load_lanes<Floats>(d, first);
          high += load_lanes<Floats>(d + kLanes, second);
        }
        store_lanes(d, low, first);
        if (second > 0) store_lanes(d + kLanes, high, second);
      }
    }
  }
}

// Max pooling of one padded plane. A NaN always takes over (it propagates); otherwise only a
// strictly larger value does, so the first maximum in (h, w) scan order wins ties, as in PyTorch.
// The index starts at the window's first input element, which is what an all -inf window reports.
template <bool kWithArgmax, int kStride>
void max_pool_plane(const Geometry& g, const float* padded, float* y, int32_t* argmax) {
  const int64_t s = g.sw;
  const Ints lanes = lane_offsets(static_cast<int32_t>(s));
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const Window wh = g.row_window(oh);
    for (int64_t o0 = 0; o0 < g.OW; o0 += kLanes) {
      const Ints cols = static_cast<int32_t>(o0 * s - g.pw) + lanes;  // each lane's first column
      Floats best = splat(kNegInf);
      Ints index = static_cast<int32_t>(wh.start * g.W) + (cols > 0 ? cols : 0);
      for (int64_t h = wh.start; h < wh.end; ++h)
        for (int64_t k = 0; k < g.kw; ++k) {
          const Floats v = load_strided<kStride>(padded + h * g.Wp + o0 * s + k, s);
          const Ints take = (v > best) | (v != v);
          best = take ? v : best;
          if constexpr (kWithArgmax)
            index = take ? static_cast<int32_t>(h * g.W + k) + cols : index;
        }
      const int64_t n = std::min<int64_t>(kLanes, g.OW - o0);
      store_lanes(y + oh * g.OW + o0, best, n);
      if constexpr (kWithArgmax) store_lanes(argmax + oh * g.OW + o0, index, n);
    }
  }
}

// Each lane's average-pooling divisor, for the block whose lanes start at input columns `cols`.
inline Floats avg_divisors(const Geometry& g, bool count_include_pad, const Window& wh,
                           const Ints& cols) {
  const int32_t kw = static_cast<int32_t>(g.kw), W = static_cast<int32_t>(g.W);
  const Ints end = cols + kw;
  Ints width, rows;
  if (count_include_pad) {
    const int32_t padded_end = static_cast<int32_t>(g.W + g.pw);
    width = (end < padded_end ? end : padded_end) - cols;
    rows = static_cast<int32_t>(wh.padded_size) + Ints{};
  } else {
    width = (end < W ? end : W) - (cols > 0 ? cols : 0);
    rows = static_cast<int32_t>(wh.end - wh.start) + Ints{};
  }
  return __builtin_convertvector(rows * width, Floats);
}

// Average pooling of one padded plane (zeros outside the input): window sums in fp32, divided
// once by each window's divisor.
template <int kStride>
void avg_pool_plane(const Geometry& g, bool count_include_pad, const float* padded, float* y) {
  const int64_t s = g.sw;
  const Ints lanes = lane_offsets(static_cast<int32_t>(s));
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const Window wh = g.row_window(oh);
    for (int64_t o0 = 0; o0 < g.OW; o0 += kLanes) {
      Floats sum{};
      for (int64_t h = wh.start; h < wh.end; ++h)
        for (int64_t k = 0; k < g.kw; ++k)
          sum += load_strided<kStride>(padded + h * g.Wp + o0 * s + k, s);
      const Ints cols = static_cast<int32_t>(o0 * s - g.pw) + lanes;
      const Floats mean = sum / avg_divisors(g, count_include_pad, wh, cols);
      store_lanes(y + oh * g.OW + o0, mean, std::min<int64_t>(kLanes, g.OW - o0));
    }
  }
}

// Average pooling backward of one plane: each dy / divisor spreads over its window in the padded
// accumulator (zeroed here), whose interior is then written to dx (or added, `accumulate`).
template <int kStride>
// NOLINTBEGIN(bugprone-easily-swappable-parameters): an internal kernel helper called only in this
// file, at a few call sites that pass locals named like its parameters.
void avg_pool_backward_plane(const Geometry& g, bool count_include_pad, const float* dy,
                             float* padded, float* dx, bool accumulate) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  const int64_t s = g.sw;
  const Ints lanes = lane_offsets(static_cast<int32_t>(s));
  std::fill(padded, padded + g.H * g.Wp, 0.0f);
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const Window wh = g.row_window(oh);
    for (int64_t o0 = 0; o0 < g.OW; o0 += kLanes) {
      const int64_t n = std::min<int64_t>(kLanes, g.OW - o0);
      Floats grad{};  // lanes past the row's end spread zeros
      for (int64_t j = 0; j < n; ++j) grad[j] = dy[oh * g.OW + o0 + j];
      const Ints cols = static_cast<int32_t>(o0 * s - g.pw) + lanes;
      const Ints live = lane_offsets(1) < static_cast<int32_t>(n);
      const Floats divisor = avg_divisors(g, count_include_pad, wh, cols);
      const Floats share = live ? grad / divisor : Floats{};  // a past-the-end divisor may be 0
      // Kernel offsets outermost: consecutive adds then touch different rows, where k-inner
      // order made each load overlap the previous, unfinished store (store-forwarding stalls,
      // measurably slower: docs/benchmarks.md, 'Measurements behind code choices').
      for (int64_t k = 0; k < g.kw; ++k)
        for (int64_t h = wh.start; h < wh.end; ++h)
          add_strided<kStride>(padded + h * g.Wp + o0 * s + k, s, share);
    }
  }
  for (int64_t h = 0; h < g.H; ++h) {
    const float* from = padded + h * g.Wp + g.pw;
    float* to = dx + h * g.W;
    if (accumulate) {
#pragma omp simd
      for (int64_t w = 0; w < g.W; ++w) to[w] += from[w];
    } else {
      std::memcpy(to, from, sizeof(float) * g.W);
    }
  }
}

// Max pooling backward of one plane: each dy goes to its argmax, adding where windows overlap
// (and to dx's values with `accumulate`, to zeros without).
void max_pool_backward_plane(const Geometry& g, const int32_t* argmax, const float* dy, float* dx,
                             bool accumulate) {
  if (!accumulate) std::fill(dx, dx + g.H * g.W, 0.0f);
  for (int64_t o = 0; o < g.OH * g.OW; ++o) {
    assert(argmax[o] >= 0 && argmax[o] < g.H * g.W);
    dx[argmax[o]] += dy[o];
  }
}

}  // namespace

void pool2d_forward(const Pool2dParams& p, const Pool2dForwardArgs& a) {
  const TensorView &x = a.x, &y = a.y;
  const Pool2dSaved& saved = a.saved;
  const Geometry g = geometry_of(p);
  const int64_t in_plane = g.H * g.W, out_plane = g.OH * g.OW;
  const bool is_max = p.kind == PoolKind::kMax, with_argmax = is_max && !saved.argmax.empty();
  if (is_whole_2x2_max(p, g)) {
    parallel_for(p.N * p.B * p.C, [&](int64_t plane) {
      const float* xp = x.data + plane * in_plane;
      float* yp = y.data + plane * out_plane;
      if (with_argmax)
        max_pool_2x2_plane<true>(g, xp, yp, saved.argmax.data + plane * out_plane);
      else
        max_pool_2x2_plane<false>(g, xp, yp, nullptr);
    });
    return;
  }
  parallel_for(p.N * p.B * p.C, [&](int64_t plane) {
    float* padded = scratch_plane(g.H * g.Wp);
    pad_columns(g, is_max ? kNegInf : 0.0f, x.data + plane * in_plane, padded);
    float* yp = y.data + plane * out_plane;
    int32_t* ap = with_argmax ? saved.argmax.data + plane * out_plane : nullptr;
    with_stride(g.sw, [&](auto stride) {
      constexpr int S = decltype(stride)::value;
      if (!is_max)
        avg_pool_plane<S>(g, p.count_include_pad, padded, yp);
      else if (with_argmax)
        max_pool_plane<true, S>(g, padded, yp, ap);
      else
        max_pool_plane<false, S>(g, padded, yp, nullptr);
    });
  });
}

void pool2d_backward(const Pool2dParams& p, const Pool2dBackwardArgs& a) {
  const TensorView &dy = a.dy, &dx = a.dx;
  const Pool2dSaved& saved = a.saved;
  const Geometry g = geometry_of(p);
  const int64_t in_plane = g.H * g.W, out_plane = g.OH * g.OW;
  parallel_for(p.N * p.B * p.C, [&](int64_t plane) {
    const float* dyp = dy.data + plane * out_plane;
    float* dxp = dx.data + plane * in_plane;
    if (p.kind == PoolKind::kMax && is_whole_2x2_max(p, g) && tiles_2x2_exactly(g)) {
      max_pool_2x2_backward_plane(g, saved.argmax.data + plane * out_plane, dyp, dxp,
                                  a.accumulate_dx);
      return;
    }
    if (p.kind == PoolKind::kMax) {
      max_pool_backward_plane(g, saved.argmax.data + plane * out_plane, dyp, dxp, a.accumulate_dx);
      return;
    }
    float* padded = scratch_plane(g.H * g.Wp);
    with_stride(g.sw, [&](auto stride) {
      avg_pool_backward_plane<decltype(stride)::value>(g, p.count_include_pad, dyp, padded, dxp,
                                                       a.accumulate_dx);
    });
  });
}

}  // namespace hfta::cpu
