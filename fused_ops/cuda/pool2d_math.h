// The CUDA pooling kernels' per-output and per-input arithmetic, written once for the kernels
// (fused_ops/cuda/pool2d_kernels.cu) and the host tests that check it
// (tests/cuda/test_cuda_pool.cpp): `__host__ __device__` under nvcc, plain inline C++ elsewhere.
// Each function computes one element of its output from a flat index, decomposed as the kernels
// decompose it (plane, row, column of [planes, rows, cols]), so a host loop over every index runs
// exactly the kernels' arithmetic.
//
//   x, dx   [planes, H, W]     planes = N*B*C (pooling acts on each plane alone)
//   y, dy   [planes, OH, OW]
//   argmax  [planes, OH, OW]   int32 flat index h*W + w into the input plane
//
// Forward: one thread per output, its window scanned in (h, w) order as the CPU op
// (fused_ops/cpu/pool2d.cpp) scans it: the same maximum, argmax (NaN takes over, otherwise only a
// strictly larger value, so the first maximum wins ties) and the same fp32 window sum and divisor.
// The CPU reads padding columns as -inf or 0, which never win a max and add nothing to a sum: here
// they are skipped, with the same result bit for bit.
// Backward: gather, one thread per input element, no atomics: the element sums the dy of the
// windows that cover it (max: only those whose argmax is it) in output order (oh, then ow
// ascending). Deterministic whatever the launch. Max pooling starts from dx (accumulate) or 0 and
// adds in the CPU's order (flat output index ascending), so it equals the CPU bit for bit.
// Average pooling sums the shares from 0 and then writes or adds the sum to dx, as the CPU does;
// when windows overlap along a row (kernel_w > stride_w) the CPU adds a row's shares in its
// vector blocks' order, so the sums may differ in rounding there.
//
// No project header but backend/cuda/host_device.h: nvcc compiles this in C++17 and cannot
// include core/error.h (fmt 9).
#pragma once

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::pool_math {

// One pooling problem (fused_ops/pool2d.h's Pool2dParams, strides resolved).
struct PoolGeometry {
  int64_t planes, H, W, OH, OW;
  int64_t kh, kw, sh, sw, ph, pw;
  bool count_include_pad;
};

// An adaptive average pooling problem (AdaptiveAvgPool2dParams).
struct AdaptiveGeometry {
  int64_t planes, H, W, OH, OW;
};

HFTA_HOST_DEVICE inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
HFTA_HOST_DEVICE inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// Window of output o along an axis: [start, end) clipped to the input, and its size clipped to
// the padded input (count_include_pad's divisor). As the CPU op's window().
struct AxisWindow {
  int64_t start, end, padded_size;
};
HFTA_HOST_DEVICE inline AxisWindow pool_window(int64_t o, int64_t size, int64_t kernel,
                                               int64_t stride, int64_t pad) {
  const int64_t start = o * stride - pad;
  const int64_t end = min64(start + kernel, size + pad);
  return {max64(start, 0), min64(end, size), end - start};
}

// The outputs [first, last) along an axis whose (unclipped) window covers input index i.
struct AxisRange {
  int64_t first, last;
};
HFTA_HOST_DEVICE inline AxisRange covering_windows(int64_t i, int64_t out, int64_t kernel,
                                                   int64_t stride, int64_t pad) {
  const int64_t lowest = i + pad - kernel + 1;  // o * stride >= lowest
  const int64_t first = lowest <= 0 ? 0 : (lowest + stride - 1) / stride;
  return {first, min64((i + pad) / stride + 1, out)};
}

// The average's divisor for output (oh, ow): the CPU op's avg_divisors, an int product rounded
// once to float.
HFTA_HOST_DEVICE inline float avg_divisor(const PoolGeometry& g, const AxisWindow& wh,
                                          const AxisWindow& ww) {
  if (g.count_include_pad) return static_cast<float>(wh.padded_size * ww.padded_size);
  return static_cast<float>((wh.end - wh.start) * (ww.end - ww.start));
}

// y[i] and argmax[i] (argmax may be null) for flat output index i.
HFTA_HOST_DEVICE inline void max_pool_forward_at(const PoolGeometry& g, const float* x, float* y,
                                                 int32_t* argmax, int64_t i) {
  const int64_t plane = i / (g.OH * g.OW), r = i % (g.OH * g.OW), oh = r / g.OW, ow = r % g.OW;
  const AxisWindow wh = pool_window(oh, g.H, g.kh, g.sh, g.ph);
  const AxisWindow ww = pool_window(ow, g.W, g.kw, g.sw, g.pw);
  const float* xp = x + plane * g.H * g.W;
  float best = -__builtin_huge_valf();
  int64_t index = wh.start * g.W + ww.start;  // what an all -inf window reports
  for (int64_t h = wh.start; h < wh.end; ++h)
    for (int64_t w = ww.start; w < ww.end; ++w) {
      const float v = xp[h * g.W + w];
      if (v > best || v != v) best = v, index = h * g.W + w;
    }
  y[i] = best;
  if (argmax != nullptr) argmax[i] = static_cast<int32_t>(index);
}

// y[i] for flat output index i: the window's fp32 sum in (h, w) order over the divisor.
HFTA_HOST_DEVICE inline void avg_pool_forward_at(const PoolGeometry& g, const float* x, float* y,
                                                 int64_t i) {
  const int64_t plane = i / (g.OH * g.OW), r = i % (g.OH * g.OW), oh = r / g.OW, ow = r % g.OW;
  const AxisWindow wh = pool_window(oh, g.H, g.kh, g.sh, g.ph);
  const AxisWindow ww = pool_window(ow, g.W, g.kw, g.sw, g.pw);
  const float* xp = x + plane * g.H * g.W;
  float sum = 0.0f;
  for (int64_t h = wh.start; h < wh.end; ++h)
    for (int64_t w = ww.start; w < ww.end; ++w) sum += xp[h * g.W + w];
  y[i] = sum / avg_divisor(g, wh, ww);
}

// dx[i] for flat input index i: (accumulate ? dx[i] : 0) plus the dy of every covering window
// whose argmax is this element, in flat output order.
HFTA_HOST_DEVICE inline void max_pool_backward_at(const PoolGeometry& g, const int32_t* argmax,
                                                  const float* dy, float* dx, bool accumulate,
                                                  int64_t i) {
  const int64_t plane = i / (g.H * g.W), r = i % (g.H * g.W), h = r / g.W, w = r % g.W;
  const AxisRange rows = covering_windows(h, g.OH, g.kh, g.sh, g.ph);
  const AxisRange cols = covering_windows(w, g.OW, g.kw, g.sw, g.pw);
  const int64_t base = plane * g.OH * g.OW;
  float acc = accumulate ? dx[i] : 0.0f;
  for (int64_t oh = rows.first; oh < rows.last; ++oh)
    for (int64_t ow = cols.first; ow < cols.last; ++ow) {
      const int64_t o = base + oh * g.OW + ow;
      if (argmax[o] == r) acc += dy[o];
    }
  dx[i] = acc;
}

// dx[i] for flat input index i: the shares dy / divisor of every covering window, summed from 0
// in output order, then written or (accumulate) added.
HFTA_HOST_DEVICE inline void avg_pool_backward_at(const PoolGeometry& g, const float* dy, float* dx,
                                                  bool accumulate, int64_t i) {
  const int64_t plane = i / (g.H * g.W), r = i % (g.H * g.W), h = r / g.W, w = r % g.W;
  const AxisRange rows = covering_windows(h, g.OH, g.kh, g.sh, g.ph);
  const AxisRange cols = covering_windows(w, g.OW, g.kw, g.sw, g.pw);
  const float* dyp = dy + plane * g.OH * g.OW;
  float acc = 0.0f;
  for (int64_t oh = rows.first; oh < rows.last; ++oh) {
    const AxisWindow wh = pool_window(oh, g.H, g.kh, g.sh, g.ph);
    for (int64_t ow = cols.first; ow < cols.last; ++ow) {
      const AxisWindow ww = pool_window(ow, g.W, g.kw, g.sw, g.pw);
      acc += dyp[oh * g.OW + ow] / avg_divisor(g, wh, ww);
    }
  }
  dx[i] = accumulate ? dx[i] + acc : acc;
}

// PyTorch's adaptive bins along an axis: output o averages [floor(o*size/out),
// ceil((o+1)*size/out)). The bins covering input index i are [floor(i*out/size),
// ceil((i+1)*out/size)): the same formula with the sizes swapped.
HFTA_HOST_DEVICE inline int64_t bin_start(int64_t o, int64_t size, int64_t out) {
  return (o * size) / out;
}
HFTA_HOST_DEVICE inline int64_t bin_end(int64_t o, int64_t size, int64_t out) {
  return ((o + 1) * size + out - 1) / out;
}

// y[i] for flat output index i: the bin's fp32 sum in (h, w) order over its element count.
HFTA_HOST_DEVICE inline void adaptive_avg_forward_at(const AdaptiveGeometry& g, const float* x,
                                                     float* y, int64_t i) {
  const int64_t plane = i / (g.OH * g.OW), r = i % (g.OH * g.OW), oh = r / g.OW, ow = r % g.OW;
  const int64_t h0 = bin_start(oh, g.H, g.OH), h1 = bin_end(oh, g.H, g.OH);
  const int64_t w0 = bin_start(ow, g.W, g.OW), w1 = bin_end(ow, g.W, g.OW);
  const float* xp = x + plane * g.H * g.W;
  float sum = 0.0f;
  for (int64_t h = h0; h < h1; ++h)
    for (int64_t w = w0; w < w1; ++w) sum += xp[h * g.W + w];
  y[i] = sum / static_cast<float>((h1 - h0) * (w1 - w0));
}

// dx[i] for flat input index i: (accumulate ? dx[i] : 0) plus the share of every covering bin
// in output order, as the CPU op adds them.
HFTA_HOST_DEVICE inline void adaptive_avg_backward_at(const AdaptiveGeometry& g, const float* dy,
                                                      float* dx, bool accumulate, int64_t i) {
  const int64_t plane = i / (g.H * g.W), r = i % (g.H * g.W), h = r / g.W, w = r % g.W;
  const float* dyp = dy + plane * g.OH * g.OW;
  float acc = accumulate ? dx[i] : 0.0f;
  const int64_t oh_last = bin_end(h, g.OH, g.H), ow_last = bin_end(w, g.OW, g.W);
  for (int64_t oh = bin_start(h, g.OH, g.H); oh < oh_last; ++oh) {
    const int64_t h0 = bin_start(oh, g.H, g.OH), h1 = bin_end(oh, g.H, g.OH);
    if (h < h0 || h >= h1) continue;  // (never: the range is exact; a guard costs nothing)
    for (int64_t ow = bin_start(w, g.OW, g.W); ow < ow_last; ++ow) {
      const int64_t w0 = bin_start(ow, g.W, g.OW), w1 = bin_end(ow, g.W, g.OW);
      if (w < w0 || w >= w1) continue;
      acc += dyp[oh * g.OW + ow] / static_cast<float>((h1 - h0) * (w1 - w0));
    }
  }
  dx[i] = acc;
}

}  // namespace hfta::pool_math
