// The implicit-GEMM conv2d's arithmetic (fused_ops/cuda/conv2d_implicit_kernels.cu), written once
// for its kernels and the host mirror that tests them (tests/cuda/test_cuda_conv2d_implicit.cpp):
// `__host__ __device__` under nvcc, plain inline C++ elsewhere.
//
// Every output element (y, dx, a dweight partial) is ONE sequential fmaf chain over a reduction
// index in increasing order, independent of B, of the tile sizes and of the launch geometry. The
// kernels' tiles only stage the chain's operands in shared memory; the *_operand functions below
// are what they load and the *_value functions what a single thread's chain computes, so the host
// mirror runs the device's arithmetic bit for bit. With cig = C_in/G, cog = C_out/G, T = kH*kW,
// P = OH*OW:
//   forward      y[n, b*C_out + co, q] = bias (or 0), then fmaf(weight, input, acc) over
//                k = (ci*kH + i)*kW + j in [0, cig*T): ci the channel inside co's group, the input
//                0 in the padding
//   dx (a model) fmaf(weight, dy, acc) from 0 over k = (co*kH + i)*kW + j in [0, cog*T): co inside
//                the group, dy 0 where tap (i, j) of no output position lands on the element
//   dx           old (accumulate_dx) or 0, plus each model's float sum in model order (a shared
//                input sums all B models), as col2im_value (conv2d_math.h) does
//   dweight      fmaf(dy, input, acc) from 0 over r = n*P + q in each chunk of kDweightChunk
//                consecutive r; the chunks' sums added in chunk order, then added to the old value
// Multiplying padding zeros keeps the chain the same everywhere (fmaf(w, 0, acc) is acc), so a
// tile can load its gathered operands without branching on the reduction's structure.
//
// Sizes are 32-bit ints (the host side, conv2d_implicit.cpp, checks every per-image size, every
// weight index and N*P fit), image offsets 64-bit. No project header but
// backend/cuda/host_device.h: nvcc compiles this in C++17 and cannot include core/error.h (fmt 9).
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::implicit_math {

// Length of the weight gradient's chunks of r = n*P + q: a constant, so the order of each sum
// depends only on N*P (never on B or the launch), while the chunks' partial sums give the kernel
// parallelism along long N*P.
inline constexpr int kDweightChunk = 4096;

struct ImplicitGeometry {
  int B = 1, N = 1, in_channels = 1, out_channels = 1, groups = 1, H = 1, W = 1;
  int kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int dilation_h = 1, dilation_w = 1, out_h = 1, out_w = 1;
  bool bias = false, shared_input = false;

  HFTA_HOST_DEVICE int cig() const { return in_channels / groups; }
  HFTA_HOST_DEVICE int cog() const { return out_channels / groups; }
  HFTA_HOST_DEVICE int taps() const { return kernel_h * kernel_w; }
  HFTA_HOST_DEVICE int positions() const { return out_h * out_w; }
  HFTA_HOST_DEVICE int plane() const { return H * W; }
  HFTA_HOST_DEVICE int x_channels() const { return shared_input ? in_channels : B * in_channels; }
  // Reduction lengths: the forward's (and a weight row's length), backward data's, dweight's.
  HFTA_HOST_DEVICE int k_forward() const { return cig() * taps(); }
  HFTA_HOST_DEVICE int k_data() const { return cog() * taps(); }
  HFTA_HOST_DEVICE int reduction_dweight() const { return N * positions(); }
  HFTA_HOST_DEVICE int dweight_chunks() const {
    return (reduction_dweight() + kDweightChunk - 1) / kDweightChunk;
  }
  HFTA_HOST_DEVICE int64_t x_image() const { return int64_t{x_channels()} * plane(); }
  HFTA_HOST_DEVICE int64_t y_image() const { return int64_t{B} * out_channels * positions(); }
};

// Index math over (image, model, group, channel, position, reduction index) ints, called only by
// the kernels and the mirror: every argument is named at each call site.
// NOLINTBEGIN(bugprone-easily-swappable-parameters)

// Model b's group grp: its first input channel of image n, its weight rows, its first dy channel
// of image n (x and dx alike; a shared input is every model's).
HFTA_HOST_DEVICE inline int64_t x_group_offset(const ImplicitGeometry& g, int64_t n, int b,
                                               int grp) {
  const int channel = (g.shared_input ? 0 : b * g.in_channels) + grp * g.cig();
  return n * g.x_image() + int64_t{channel} * g.plane();
}
HFTA_HOST_DEVICE inline int64_t weight_group_offset(const ImplicitGeometry& g, int b, int grp) {
  return int64_t{b * g.out_channels + grp * g.cog()} * g.k_forward();
}
HFTA_HOST_DEVICE inline int64_t y_group_offset(const ImplicitGeometry& g, int64_t n, int b,
                                               int grp) {
  return n * g.y_image() + int64_t{b * g.out_channels + grp * g.cog()} * g.positions();
}

// --- forward: y_group [cog, P] = W_group [cog, cig*T] x X~ [cig*T, P]

// W_group[m, k]: output channel m of the group, reduction index k.
HFTA_HOST_DEVICE inline float forward_weight(const ImplicitGeometry& g, const float* w_group, int m,
                                             int k) {
  return w_group[m * g.k_forward() + k];
}
// X~[k, q]: the input the tap k of output position q reads (0 in the padding).
HFTA_HOST_DEVICE inline float forward_input(const ImplicitGeometry& g, const float* x_group, int k,
                                            int q) {
  const int ci = k / g.taps(), t = k - ci * g.taps();
  const int i = t / g.kernel_w, j = t - i * g.kernel_w;
  const int oh = q / g.out_w, ow = q - oh * g.out_w;
  const int h = oh * g.stride_h - g.pad_h + i * g.dilation_h;
  const int w = ow * g.stride_w - g.pad_w + j * g.dilation_w;
  if (h < 0 || h >= g.H || w < 0 || w >= g.W) return 0.0f;
  return x_group[(ci * g.H + h) * g.W + w];
}
// y[n, b*C_out + co, q].
HFTA_HOST_DEVICE inline float forward_value(const ImplicitGeometry& g, const float* x,
                                            const float* weight, const float* bias, int64_t n,
                                            int b, int co, int q) {
  const int grp = co / g.cog(), m = co - grp * g.cog();
  const float* x_group = x + x_group_offset(g, n, b, grp);
  const float* w_group = weight + weight_group_offset(g, b, grp);
  float acc = g.bias ? bias[b * g.out_channels + co] : 0.0f;
  for (int k = 0; k < g.k_forward(); ++k)
    acc = fma_rn(forward_weight(g, w_group, m, k), forward_input(g, x_group, k, q), acc);
  return acc;
}

// --- backward data, one model: dX_group [cig, H*W] = W_group^T [cig, cog*T] x dY~ [cog*T, H*W]

// W_group^T[m, k]: input channel m of the group, k = co*T + t.
HFTA_HOST_DEVICE inline float data_weight(const ImplicitGeometry& g, const float* w_group, int m,
                                          int k) {
  const int co = k / g.taps(), t = k - co * g.taps();
  return w_group[(co * g.cig() + m) * g.taps() + t];
}
// dY~[k, p]: dy of output channel co at the output position whose tap t reads input position p,
// 0 where there is none (the padding, and positions a stride skips).
HFTA_HOST_DEVICE inline float data_grad(const ImplicitGeometry& g, const float* dy_group, int k,
                                        int p) {
  const int co = k / g.taps(), t = k - co * g.taps();
  const int i = t / g.kernel_w, j = t - i * g.kernel_w;
  const int h = p / g.W, w = p - h * g.W;
  const int hh = h + g.pad_h - i * g.dilation_h;  // = oh * stride_h where the tap is used
  const int ww = w + g.pad_w - j * g.dilation_w;
  if (hh < 0 || ww < 0) return 0.0f;
  const int oh = hh / g.stride_h, ow = ww / g.stride_w;
  if (oh * g.stride_h != hh || ow * g.stride_w != ww || oh >= g.out_h || ow >= g.out_w) return 0.0f;
  return dy_group[co * g.positions() + oh * g.out_w + ow];
}
// Model b's gradient of input channel m of group grp at position p of image n.
HFTA_HOST_DEVICE inline float data_model_sum(const ImplicitGeometry& g, const float* weight,
                                             const float* dy, int64_t n, int b, int grp, int m,
                                             int p) {
  const float* w_group = weight + weight_group_offset(g, b, grp);
  const float* dy_group = dy + y_group_offset(g, n, b, grp);
  float acc = 0.0f;
  for (int k = 0; k < g.k_data(); ++k)
    acc = fma_rn(data_weight(g, w_group, m, k), data_grad(g, dy_group, k, p), acc);
  return acc;
}
// dx[n, c, p] (c an x channel: b*C_in + ci, or ci for a shared input); `old` is its value before
// the call.
HFTA_HOST_DEVICE inline float dx_value(const ImplicitGeometry& g, const float* weight,
                                       const float* dy, int64_t n, int c, int p, float old,
                                       bool accumulate) {
  float value = accumulate ? old : 0.0f;
  if (g.shared_input) {
    const int grp = c / g.cig(), m = c - grp * g.cig();
    for (int b = 0; b < g.B; ++b) value += data_model_sum(g, weight, dy, n, b, grp, m, p);
  } else {
    const int b = c / g.in_channels, ci = c - b * g.in_channels;
    const int grp = ci / g.cig(), m = ci - grp * g.cig();
    value += data_model_sum(g, weight, dy, n, b, grp, m, p);
  }
  return value;
}

// --- weight gradient: dW_group [cog, cig*T] += dY [cog, N*P] x X~^T [N*P, cig*T], by chunks of r

// dY[m, r] of model b's group grp (its output channel m), r = n*P + q.
HFTA_HOST_DEVICE inline float dweight_grad(const ImplicitGeometry& g, const float* dy, int b,
                                           int grp, int m, int r) {
  const int n = r / g.positions(), q = r - n * g.positions();
  return dy[y_group_offset(g, n, b, grp) + int64_t{m} * g.positions() + q];
}
// X~^T[r, k] of model b's group grp: the input tap k of output position q of image n reads.
HFTA_HOST_DEVICE inline float dweight_input(const ImplicitGeometry& g, const float* x, int b,
                                            int grp, int r, int k) {
  const int n = r / g.positions(), q = r - n * g.positions();
  return forward_input(g, x + x_group_offset(g, n, b, grp), k, q);
}
// Chunk `chunk`'s sum for dweight[b, co, k] (k = (ci*kH + i)*kW + j).
HFTA_HOST_DEVICE inline float dweight_chunk_sum(const ImplicitGeometry& g, const float* x,
                                                const float* dy, int b, int co, int k, int chunk) {
  const int grp = co / g.cog(), m = co - grp * g.cog();
  const int r0 = chunk * kDweightChunk;
  const int r1 =
      r0 + kDweightChunk < g.reduction_dweight() ? r0 + kDweightChunk : g.reduction_dweight();
  float acc = 0.0f;
  for (int r = r0; r < r1; ++r)
    acc = fma_rn(dweight_grad(g, dy, b, grp, m, r), dweight_input(g, x, b, grp, r, k), acc);
  return acc;
}
// The new dweight element: `old` plus the chunks' sums (partials[c * stride], c < chunks) added
// in chunk order.
HFTA_HOST_DEVICE inline float dweight_value(float old, const float* partials, int64_t stride,
                                            int chunks) {
  float total = partials[0];
  for (int c = 1; c < chunks; ++c) total += partials[c * stride];
  return old + total;
}

// NOLINTEND(bugprone-easily-swappable-parameters)

}  // namespace hfta::implicit_math
