// The CUDA conv_transpose2d's plan as plain data, on the CUDA conv2d's pieces: a transposed
// convolution is the adjoint of a convolution, so its forward is conv2d's data gradient (GEMMs
// into columns, then conv2d_math.h's gathering col2im) and its data gradient is conv2d's forward
// (conv2d_math.h's im2col, then GEMMs). fused_ops/cuda/conv_transpose2d.cpp runs the plan with
// conv2d's kernels (kernels.h) and cublasSgemmStridedBatched; tests/cuda/
// test_cuda_conv_transpose2d.cpp runs it with the same index math and a naive column-major GEMM
// on the host, so offsets, leading dimensions, strides and betas are checked without a GPU.
//
//   P = H*W (the transposed conv's input positions), Ck = C_out*kH*kW, Q = OH*OW
//   x [N, B*C_in, H, W] (shared: [N, C_in, H, W])   y, dy [N, B*C_out, OH, OW]
//   weight [B, C_in, C_out, kH, kW]: model b's W_b is a row-major [C_in, Ck] matrix
//   col [n, B*Ck, P]: im2col of dy, or the forward's columns, under conv_transpose_geometry: the
//     convolution from y's planes (C_out channels of OH x OW) to x's (H x W), whose weight is
//     exactly W_b ([C_in outputs, C_out inputs, kH, kW])
// Per image and model, row-major to column-major as in linear_gemms.h:
//   forward   col_b [Ck, P] = W_b^T x_b [C_in, P], then y = col2im(col) (+ bias)
//             as col^T = x^T W          gemm(N, T, m=P,  n=Ck,   k=C_in)
//   dx        dx_b [C_in, P] (+)= W_b col_b, col = im2col(dy)
//             as dx^T = col^T W^T       gemm(N, N, m=P,  n=C_in, k=Ck)
//   dweight   dW_b [C_in, Ck] += x_b col_b^T
//             as dW^T = col x^T         gemm(T, N, m=Ck, n=C_in, k=P)
// The calls (GemmOrder): per image a batch over the B models, or per model a batch over the
// chunk's images (the model's weight at stride 0), whichever makes fewer calls; the weight
// gradient always per image (its images add into one dW in order, beta = 1), and a shared input's
// dx always per model (the models add into one dx in model order). In deterministic mode
// (core/determinism.h) every (image, model) pair is a call of its own, batch 1, whose sizes and
// leading dimensions are those a single model's call has: cuBLAS's choice of kernel, and so the
// bits of model b, cannot depend on B. col2im sums each model's taps in double in a fixed order,
// so the whole op has no atomics.
// Images are taken in chunks whose columns fit kConv2dScratchCapFloats of device scratch (at
// least one image per chunk).
#pragma once

#include <algorithm>
#include <cstdint>

#include "fused_ops/conv_transpose2d.h"
#include "fused_ops/cuda/conv2d_gemms.h"
#include "fused_ops/cuda/conv2d_math.h"
#include "fused_ops/cuda/linear_gemms.h"

namespace hfta::cuda {

// The convolution whose adjoint p is: from y's planes to x's, per model (never shared: y and dy
// are per model), dilation 1. Its im2col reads dy; its col2im writes y.
inline ConvGeometry conv_transpose_geometry(const ConvTranspose2dParams& p) {
  return ConvGeometry{.B = p.B,
                      .in_channels = p.out_channels,
                      .H = p.out_h(),
                      .W = p.out_w(),
                      .kernel_h = p.kernel_h,
                      .kernel_w = p.kernel_w,
                      .stride_h = p.stride_h,
                      .stride_w = p.stride_w,
                      .pad_h = p.pad_h,
                      .pad_w = p.pad_w,
                      .out_h = p.H,
                      .out_w = p.W,
                      .shared_input = false};
}

// How one GEMM shape is issued over the B models and a chunk's images (see the top of the file).
enum class GemmOrder { kModelsPerImage, kImagesPerModel, kEachPair };

// How far a, b and c move from one model (or image) to the next, in floats.
struct GemmStep {
  int64_t a = 0, b = 0, c = 0;
};

inline ColumnMajorGemm shifted(ColumnMajorGemm g, const GemmStep& s, int64_t times) {
  g.a += s.a * times;
  g.b += s.b * times;
  g.c += s.c * times;
  return g;
}

// Issues `one` (model 0, the chunk's first image) for all `models` models and `images` images.
template <typename Exec>
void issue_over(Exec& exec, const ColumnMajorGemm& one, const GemmStep& model,
                const GemmStep& image, int64_t models, int64_t images, GemmOrder order) {
  switch (order) {
    case GemmOrder::kModelsPerImage:
      for (int64_t i = 0; i < images; ++i) {
        ColumnMajorGemm g = shifted(one, image, i);
        g.stride_a = model.a, g.stride_b = model.b, g.stride_c = model.c, g.batch = models;
        exec.gemm(g);
      }
      return;
    case GemmOrder::kImagesPerModel:
      for (int64_t b = 0; b < models; ++b) {
        ColumnMajorGemm g = shifted(one, model, b);
        g.stride_a = image.a, g.stride_b = image.b, g.stride_c = image.c, g.batch = images;
        exec.gemm(g);
      }
      return;
    case GemmOrder::kEachPair:
      for (int64_t i = 0; i < images; ++i)
        for (int64_t b = 0; b < models; ++b) {
          ColumnMajorGemm g = shifted(shifted(one, image, i), model, b);
          g.stride_a = g.stride_b = g.stride_c = 0, g.batch = 1;
          exec.gemm(g);
        }
      return;
  }
}

// The order of the GEMMs whose models write apart (forward, an unshared dx).
inline GemmOrder independent_order(int64_t B, int64_t images, bool per_pair) {
  if (per_pair) return GemmOrder::kEachPair;
  return B < images ? GemmOrder::kImagesPerModel : GemmOrder::kModelsPerImage;
}

// Runs the forward on `exec` (conv2d_gemms.h's executor: scratch, fill_bias, col2im, gemm);
// per_pair: one call per (image, model), deterministic mode's.
template <typename Exec>
void conv_transpose2d_forward_plan(const ConvTranspose2dParams& p,
                                   const ConvTranspose2dForwardArgs& a, int64_t cap_floats,
                                   bool per_pair, Exec&& exec) {
  const ConvGeometry geo = conv_transpose_geometry(p);
  const int64_t P = p.H * p.W, ck = p.out_channels * geo.taps(), cin = p.in_channels;
  const int64_t x_image = (p.shared_input ? 1 : p.B) * cin * P, y_image = geo.x_image();
  const int64_t col_image = p.B * ck * P;
  if (p.bias) exec.fill_bias(a.bias.data, a.y.data, p.N, p.B * p.out_channels, geo.H * geo.W);
  const int64_t chunk = conv2d_chunk_images(p.N, col_image, cap_floats);
  float* col = exec.scratch(chunk * col_image);
  for (int64_t n0 = 0; n0 < p.N; n0 += chunk) {
    const int64_t images = std::min(chunk, p.N - n0);
    issue_over(exec,
               ColumnMajorGemm{.transpose_b = true,
                               .m = P,
                               .n = ck,
                               .k = cin,
                               .a = a.x.data + n0 * x_image,
                               .lda = P,
                               .b = a.weight.data,
                               .ldb = ck,
                               .beta = 0.0f,
                               .c = col,
                               .ldc = P},
               GemmStep{.a = p.shared_input ? 0 : cin * P, .b = cin * ck, .c = ck * P},
               GemmStep{.a = x_image, .b = 0, .c = col_image}, p.B, images,
               independent_order(p.B, images, per_pair));
    exec.col2im(geo, col, a.y.data + n0 * y_image, images, p.bias);
  }
}

// Runs the backward on `exec` (forward's, and im2col and bias_grad). Per chunk: im2col of dy, the
// dx GEMMs, the weight-gradient GEMMs.
template <typename Exec>
void conv_transpose2d_backward_plan(const ConvTranspose2dParams& p,
                                    const ConvTranspose2dBackwardArgs& a, int64_t cap_floats,
                                    bool per_pair, Exec&& exec) {
  const ConvGeometry geo = conv_transpose_geometry(p);
  const int64_t P = p.H * p.W, ck = p.out_channels * geo.taps(), cin = p.in_channels;
  const int64_t x_image = (p.shared_input ? 1 : p.B) * cin * P, y_image = geo.x_image();
  const int64_t col_image = p.B * ck * P;
  const bool want_dx = !a.dx.empty(), want_dw = !a.dweight.empty();
  if (p.bias && !a.dbias.empty())
    exec.bias_grad(a.dy.data, a.dbias.data, p.N, p.B * p.out_channels, geo.H * geo.W);
  if (!want_dx && !want_dw) return;
  const int64_t chunk = conv2d_chunk_images(p.N, col_image, cap_floats);
  float* col = exec.scratch(chunk * col_image);
  for (int64_t n0 = 0; n0 < p.N; n0 += chunk) {
    const int64_t images = std::min(chunk, p.N - n0);
    exec.im2col(geo, a.dy.data + n0 * y_image, col, images);
    if (want_dx) {
      ColumnMajorGemm one{.m = P,
                          .n = cin,
                          .k = ck,
                          .a = col,
                          .lda = P,
                          .b = a.weight.data,
                          .ldb = ck,
                          .beta = a.accumulate_dx ? 1.0f : 0.0f,
                          .c = a.dx.data + n0 * x_image,
                          .ldc = P};
      const GemmStep image{.a = col_image, .b = 0, .c = x_image};
      if (!p.shared_input) {
        issue_over(exec, one, GemmStep{.a = ck * P, .b = cin * ck, .c = cin * P}, image, p.B,
                   images, independent_order(p.B, images, per_pair));
      } else {  // every model adds into the one dx, in model order
        for (int64_t b = 0; b < p.B; ++b) {
          ColumnMajorGemm g = shifted(one, GemmStep{.a = ck * P, .b = cin * ck}, b);
          if (b > 0) g.beta = 1.0f;
          issue_over(exec, g, GemmStep{}, image, 1, images,
                     per_pair ? GemmOrder::kEachPair : GemmOrder::kImagesPerModel);
        }
      }
    }
    if (want_dw)  // the images in order into each model's dW (beta = 1)
      issue_over(exec,
                 ColumnMajorGemm{.transpose_a = true,
                                 .m = ck,
                                 .n = cin,
                                 .k = P,
                                 .a = col,
                                 .lda = P,
                                 .b = a.x.data + n0 * x_image,
                                 .ldb = P,
                                 .beta = 1.0f,
                                 .c = a.dweight.data,
                                 .ldc = ck},
                 GemmStep{.a = ck * P, .b = p.shared_input ? 0 : cin * P, .c = cin * ck},
                 GemmStep{.a = col_image, .b = x_image, .c = 0}, p.B, images,
                 per_pair ? GemmOrder::kEachPair : GemmOrder::kModelsPerImage);
  }
}

}  // namespace hfta::cuda
