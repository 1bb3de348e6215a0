// The CUDA conv2d's index math, written once for its kernels (fused_ops/cuda/conv2d_kernels.cu)
// and the host test that checks it (tests/cuda/test_cuda_conv2d.cpp): `__host__ __device__`
// under nvcc, plain inline C++ elsewhere. Each function computes one output element of a kernel
// from its flat index, so a host loop over every index does exactly what the kernel does.
//
//   x     [N, Xc, H, W]        Xc = B*C_in, or C_in for a shared input
//   col   [n, Xc*kH*kW, P]     one chunk of n images; P = OH*OW; row (c*kH + i)*kW + j holds
//                              x[c] at tap (i, j) for every output position (zero in the padding)
//   dcol  [n, B*C_in*kH*kW, P] the same rows per model (a shared input too: each model's own),
//                              written by the backward-data GEMMs
//   y, dy [N, B*C_out, P]
// A model b and group g own the rows [(b*G + g)*K_g, (b*G + g + 1)*K_g) of dcol (and of col,
// unshared), K_g = C_in/G*kH*kW: the GEMMs of conv2d_gemms.h read them as one matrix per model
// and group.
//
// No project header but backend/cuda/host_device.h: nvcc compiles this in C++17 and cannot
// include core/error.h (fmt 9).
#pragma once

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::conv_math {

// A conv2d's sizes as the kernels need them (conv2d_gemms.h fills it from Conv2dParams).
struct ConvGeometry {
  int64_t B = 1, in_channels = 1, H = 1, W = 1;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  int64_t out_h = 1, out_w = 1;
  bool shared_input = false;

  HFTA_HOST_DEVICE int64_t x_channels() const {
    return shared_input ? in_channels : B * in_channels;
  }
  HFTA_HOST_DEVICE int64_t positions() const { return out_h * out_w; }
  HFTA_HOST_DEVICE int64_t taps() const { return kernel_h * kernel_w; }
  // Per image: rows of col and of dcol, floats of x.
  HFTA_HOST_DEVICE int64_t col_rows() const { return x_channels() * taps(); }
  HFTA_HOST_DEVICE int64_t dcol_rows() const { return B * in_channels * taps(); }
  HFTA_HOST_DEVICE int64_t x_image() const { return x_channels() * H * W; }
};

// col[index] of a chunk whose first image is x (x points at that image of the fused input).
HFTA_HOST_DEVICE inline float im2col_value(const ConvGeometry& g, const float* x, int64_t index) {
  const int64_t P = g.positions();
  const int64_t q = index % P, row = (index / P) % g.col_rows(), n = index / (P * g.col_rows());
  const int64_t j = row % g.kernel_w, i = (row / g.kernel_w) % g.kernel_h, c = row / g.taps();
  const int64_t h = (q / g.out_w) * g.stride_h - g.pad_h + i * g.dilation_h;
  const int64_t w = (q % g.out_w) * g.stride_w - g.pad_w + j * g.dilation_w;
  if (h < 0 || h >= g.H || w < 0 || w >= g.W) return 0.0f;
  return x[((n * g.x_channels() + c) * g.H + h) * g.W + w];
}

// One model's gradient of x element (h, w) of channel row base `row0` = (b*C_in + c)*kH*kW of
// image n of dcol: the sum, in double and in tap order, of the dcol entries of every output
// position that read it. Gathered, so no two threads write one element.
// NOLINTBEGIN(bugprone-easily-swappable-parameters): index math called only by col2im_value
HFTA_HOST_DEVICE inline double col2im_model_sum(const ConvGeometry& g, const float* dcol, int64_t n,
                                                int64_t row0, int64_t h, int64_t w) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  const int64_t P = g.positions();
  double sum = 0.0;
  for (int64_t i = 0; i < g.kernel_h; ++i) {
    const int64_t hh = h + g.pad_h - i * g.dilation_h;  // = oh * stride_h where it is read
    if (hh < 0 || hh % g.stride_h != 0 || hh / g.stride_h >= g.out_h) continue;
    for (int64_t j = 0; j < g.kernel_w; ++j) {
      const int64_t ww = w + g.pad_w - j * g.dilation_w;
      if (ww < 0 || ww % g.stride_w != 0 || ww / g.stride_w >= g.out_w) continue;
      const int64_t row = row0 + i * g.kernel_w + j;
      sum += dcol[(n * g.dcol_rows() + row) * P + (hh / g.stride_h) * g.out_w + ww / g.stride_w];
    }
  }
  return sum;
}

// dx[index] of a chunk whose first image is dx (`old` is that element's value before the call):
// each model's sum rounded to float, then added in model order (a shared input sums all B
// models), onto `old` with accumulate or onto zero, as fused_ops/ref/conv2d.cpp does.
// NOLINTBEGIN(bugprone-easily-swappable-parameters): the kernel's and the host test's one call
HFTA_HOST_DEVICE inline float col2im_value(const ConvGeometry& g, const float* dcol, int64_t index,
                                           float old, bool accumulate) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  const int64_t w = index % g.W, h = (index / g.W) % g.H;
  const int64_t c = (index / (g.H * g.W)) % g.x_channels(), n = index / g.x_image();
  float value = accumulate ? old : 0.0f;
  if (g.shared_input) {
    for (int64_t b = 0; b < g.B; ++b)
      value += static_cast<float>(
          col2im_model_sum(g, dcol, n, (b * g.in_channels + c) * g.taps(), h, w));
  } else {  // x channel c is model c / C_in's channel c % C_in: its dcol rows start at c*kH*kW
    value += static_cast<float>(col2im_model_sum(g, dcol, n, c * g.taps(), h, w));
  }
  return value;
}

// The bias of y[index], y [N, BC, P] (BC = B*C_out): the forward fills y with it before the GEMMs
// add onto it.
HFTA_HOST_DEVICE inline int64_t bias_channel(int64_t index, int64_t BC, int64_t P) {
  return (index / P) % BC;
}

// Thread t's share of channel c's bias gradient in conv_bias_grad (dy [N, BC, P]): elements t,
// t + threads, ... of the channel's N*P, in order, in double. The kernel then adds its threads'
// shares as a fixed tree; a host mirror does the same (tests/cuda/test_cuda_conv2d_implicit.cpp).
// NOLINTBEGIN(bugprone-easily-swappable-parameters): the kernel's and the mirror's one call
HFTA_HOST_DEVICE inline double bias_grad_thread_sum(const float* dy, int64_t N, int64_t BC,
                                                    int64_t P, int64_t c, int64_t t,
                                                    int64_t threads) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  double acc = 0.0;
  for (int64_t e = t; e < N * P; e += threads) acc += dy[((e / P) * BC + c) * P + e % P];
  return acc;
}

}  // namespace hfta::conv_math
