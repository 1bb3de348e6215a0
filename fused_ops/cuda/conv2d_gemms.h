// The CUDA conv2d's plan as plain data: which kernels run on which chunk of images and which
// GEMMs (cuBLAS column-major terms, linear_gemms.h's ColumnMajorGemm) they issue, in order.
// fused_ops/cuda/conv2d.cpp runs the plan with its kernels and cublasSgemmStridedBatched;
// tests/cuda/test_cuda_conv2d.cpp runs the same plan with conv2d_math.h's functions and a naive
// column-major GEMM on the host, so chunking, offsets, leading dimensions, strides and betas are
// checked against the reference without a GPU. No vendor header.
//
//   G groups, C_in/G = cig, C_out/G = cog, K_g = cig*kH*kW, P = OH*OW; col, dcol: conv2d_math.h
// Per image, for each model b and group g (the batch index b*G + g), row-major to column-major as
// in linear_gemms.h (a row-major [R, C] matrix is a column-major [C, R] one):
//   forward   y_bg [cog, P]   (+)= W_bg [cog, K_g] col_bg [K_g, P]
//             as y^T = col^T W^T        gemm(N, N, m=P,   n=cog, k=K_g)
//   dx        dcol_bg [K_g, P]  = W_bg^T dy_bg [cog, P]
//             as dcol^T = dy^T W        gemm(N, T, m=P,   n=K_g, k=cog)
//   dweight   dW_bg [cog, K_g] += dy_bg col_bg^T
//             as dW^T = col dy^T        gemm(T, N, m=K_g, n=cog, k=P)
// One strided-batched GEMM per image covers all B*G (model, group) pairs: their weights, output
// channels and col/dcol rows are each evenly spaced. A shared input's col has one copy of the
// rows, read with stride 0 between models; with groups > 1 that is not one stride over b*G + g,
// so it is G GEMMs per image (batch B). When a chunk has more images than that makes calls, the
// forward and dx GEMMs run the other way round: one GEMM per pair, a batch over the images (the
// pair's weights at stride 0). The weight gradient sums the images one GEMM after another in
// image order (beta = 1), so every sum has a fixed order.
//
// Images are taken in chunks that fit kConv2dScratchCapFloats of device scratch (at least one
// image per chunk): im2col fills the chunk's col, the chunk's GEMMs run, col2im gathers the
// chunk's dx.
#pragma once

#include <algorithm>
#include <cstdint>

#include "fused_ops/conv2d.h"
#include "fused_ops/cuda/conv2d_math.h"
#include "fused_ops/cuda/linear_gemms.h"

namespace hfta::cuda {

using conv_math::ConvGeometry;

// 256 MiB of columns at most, unless a single image needs more.
inline constexpr int64_t kConv2dScratchCapFloats = int64_t{64} << 20;

inline ConvGeometry conv_geometry(const Conv2dParams& p) {
  return ConvGeometry{.B = p.B,
                      .in_channels = p.in_channels,
                      .H = p.H,
                      .W = p.W,
                      .kernel_h = p.kernel_h,
                      .kernel_w = p.kernel_w,
                      .stride_h = p.stride_h,
                      .stride_w = p.stride_w,
                      .pad_h = p.pad_h,
                      .pad_w = p.pad_w,
                      .dilation_h = p.dilation_h,
                      .dilation_w = p.dilation_w,
                      .out_h = p.out_h(),
                      .out_w = p.out_w(),
                      .shared_input = p.shared_input};
}

// Images per chunk: as many as fit cap_floats, at least 1, at most N.
inline int64_t conv2d_chunk_images(int64_t N, int64_t floats_per_image, int64_t cap_floats) {
  if (floats_per_image <= 0) return N;
  return std::clamp<int64_t>(cap_floats / floats_per_image, 1, N);
}

// Whether the forward's GEMMs of a chunk of `images` images loop over the B*G (model, group)
// pairs, each a batch over the images (weights at stride 0), rather than over the images, each a
// batch over the pairs: the way with fewer cuBLAS calls. (The backward's dx GEMMs choose the same
// way; the weight gradient always loops over the images, which add into one dW in order.)
inline bool conv2d_batch_over_images(const Conv2dParams& p, int64_t images) {
  const int64_t calls_per_image = p.shared_input && p.groups > 1 ? p.groups : 1;
  return p.B * p.groups < images * calls_per_image;
}

// Runs the forward on `exec`, which provides
//   float* scratch(int64_t floats)            device memory for the chunk's col
//   fill_bias(bias, y, N, BC, P)               y[n, c, q] = bias[c]
//   im2col(geometry, x_chunk, col, images)     every col element of the chunk
//   gemm(const ColumnMajorGemm&)
// Issues `one`, the GEMM of model 0 and group 0 of an image whose b and c step by stride_b and
// stride_c from one (model, group) pair to the next and whose col (a) holds a_pair floats per
// pair, over all B*G pairs: one call batched over them, the col read with stride 0 for a shared
// input; a shared input with groups > 1 has no one stride over b*G + g, so one call per group,
// batched over the models.
template <typename Exec>
void gemm_over_pairs(Exec& exec, ColumnMajorGemm one, const Conv2dParams& p, int64_t G,
                     int64_t a_pair) {
  if (!p.shared_input || G == 1) {
    one.stride_a = p.shared_input ? 0 : a_pair;
    one.batch = p.B * G;
    exec.gemm(one);
    return;
  }
  for (int64_t g = 0; g < G; ++g) {
    ColumnMajorGemm per_group = one;
    per_group.a += g * a_pair;
    per_group.stride_a = 0;
    per_group.b += g * one.stride_b;
    per_group.stride_b = G * one.stride_b;
    per_group.c += g * one.stride_c;
    per_group.stride_c = G * one.stride_c;
    per_group.batch = p.B;
    exec.gemm(per_group);
  }
}

template <typename Exec>
void conv2d_forward_plan(const Conv2dParams& p, const Conv2dForwardArgs& a, int64_t cap_floats,
                         Exec&& exec) {
  const ConvGeometry geo = conv_geometry(p);
  const int64_t G = p.groups, cog = p.out_channels / G, kg = p.in_channels / G * geo.taps();
  const int64_t P = geo.positions(), y_image = p.B * p.out_channels * P;
  if (p.bias) exec.fill_bias(a.bias.data, a.y.data, p.N, p.B * p.out_channels, P);
  const int64_t col_image = geo.col_rows() * P;
  const int64_t chunk = conv2d_chunk_images(p.N, col_image, cap_floats);
  float* col = exec.scratch(chunk * col_image);
  for (int64_t n0 = 0; n0 < p.N; n0 += chunk) {
    const int64_t images = std::min(chunk, p.N - n0);
    exec.im2col(geo, a.x.data + n0 * geo.x_image(), col, images);
    if (conv2d_batch_over_images(p, images)) {
      for (int64_t pair = 0; pair < p.B * G; ++pair)  // pair = b*G + g
        exec.gemm(ColumnMajorGemm{.m = P,
                                  .n = cog,
                                  .k = kg,
                                  .a = col + (p.shared_input ? pair % G : pair) * kg * P,
                                  .lda = P,
                                  .stride_a = col_image,
                                  .b = a.weight.data + pair * cog * kg,
                                  .ldb = kg,
                                  .beta = p.bias ? 1.0f : 0.0f,
                                  .c = a.y.data + n0 * y_image + pair * cog * P,
                                  .ldc = P,
                                  .stride_c = y_image,
                                  .batch = images});
      continue;
    }
    for (int64_t n = n0; n < n0 + images; ++n) {
      ColumnMajorGemm one{.m = P,
                          .n = cog,
                          .k = kg,
                          .a = col + (n - n0) * col_image,
                          .lda = P,
                          .b = a.weight.data,
                          .ldb = kg,
                          .stride_b = cog * kg,
                          .beta = p.bias ? 1.0f : 0.0f,
                          .c = a.y.data + n * y_image,
                          .ldc = P,
                          .stride_c = cog * P};
      gemm_over_pairs(exec, one, p, G, kg * P);
    }
  }
}

// Runs the backward on `exec`, which provides forward's scratch, im2col and gemm, and
//   col2im(geometry, dcol, dx_chunk, images, accumulate)   every dx element of the chunk
//   bias_grad(dy, dbias, N, BC, P)                          dbias[c] += sum over n, q
// Per chunk: im2col (for the weight gradient), the dx GEMMs into dcol and the weight-gradient
// GEMMs, then col2im into the chunk's dx.
template <typename Exec>
void conv2d_backward_plan(const Conv2dParams& p, const Conv2dBackwardArgs& a, int64_t cap_floats,
                          Exec&& exec) {
  const ConvGeometry geo = conv_geometry(p);
  const int64_t G = p.groups, cog = p.out_channels / G, kg = p.in_channels / G * geo.taps();
  const int64_t P = geo.positions(), y_image = p.B * p.out_channels * P;
  const bool want_dx = !a.dx.empty(), want_dw = !a.dweight.empty();
  if (p.bias && !a.dbias.empty())
    exec.bias_grad(a.dy.data, a.dbias.data, p.N, p.B * p.out_channels, P);
  if (!want_dx && !want_dw) return;
  const int64_t col_image = want_dw ? geo.col_rows() * P : 0;
  const int64_t dcol_image = want_dx ? geo.dcol_rows() * P : 0;
  const int64_t chunk = conv2d_chunk_images(p.N, col_image + dcol_image, cap_floats);
  float* col = exec.scratch(chunk * (col_image + dcol_image));
  float* dcol = col + chunk * col_image;
  for (int64_t n0 = 0; n0 < p.N; n0 += chunk) {
    const int64_t images = std::min(chunk, p.N - n0);
    if (want_dw) exec.im2col(geo, a.x.data + n0 * geo.x_image(), col, images);
    const bool dx_over_images = p.B * G < images;  // fewer calls (every input has its dcol rows)
    if (want_dx && dx_over_images)
      for (int64_t pair = 0; pair < p.B * G; ++pair)
        exec.gemm(ColumnMajorGemm{.transpose_b = true,
                                  .m = P,
                                  .n = kg,
                                  .k = cog,
                                  .a = a.dy.data + n0 * y_image + pair * cog * P,
                                  .lda = P,
                                  .stride_a = y_image,
                                  .b = a.weight.data + pair * cog * kg,
                                  .ldb = kg,
                                  .beta = 0.0f,
                                  .c = dcol + pair * kg * P,
                                  .ldc = P,
                                  .stride_c = dcol_image,
                                  .batch = images});
    for (int64_t n = n0; n < n0 + images; ++n) {
      const float* dy = a.dy.data + n * y_image;
      if (want_dx && !dx_over_images)  // every pair's dcol rows, shared input or not
        exec.gemm(ColumnMajorGemm{.transpose_b = true,
                                  .m = P,
                                  .n = kg,
                                  .k = cog,
                                  .a = dy,
                                  .lda = P,
                                  .stride_a = cog * P,
                                  .b = a.weight.data,
                                  .ldb = kg,
                                  .stride_b = cog * kg,
                                  .beta = 0.0f,
                                  .c = dcol + (n - n0) * dcol_image,
                                  .ldc = P,
                                  .stride_c = kg * P,
                                  .batch = p.B * G});
      if (!want_dw) continue;
      ColumnMajorGemm one{.transpose_a = true,
                          .m = kg,
                          .n = cog,
                          .k = P,
                          .a = col + (n - n0) * col_image,
                          .lda = P,
                          .b = dy,
                          .ldb = P,
                          .stride_b = cog * P,
                          .beta = 1.0f,
                          .c = a.dweight.data,
                          .ldc = kg,
                          .stride_c = cog * kg};
      gemm_over_pairs(exec, one, p, G, kg * P);
    }
    if (want_dx) exec.col2im(geo, dcol, a.dx.data + n0 * geo.x_image(), images, a.accumulate_dx);
  }
}

}  // namespace hfta::cuda
