// The CUDA ops' kernels, behind plain launchers: pointers, sizes and the stream in, the launch's
// status out. Only this header and the *_kernels.cu files are compiled by nvcc, and they include
// no project header: fmt 9 (core/error.h) does not compile under nvcc in C++20. Each op's host
// side (fused_ops/cuda/<op>.cpp) checks, calls cuBLAS and these, and raises hfta::Error.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "fused_ops/cuda/conv2d_implicit_math.h"
#include "fused_ops/cuda/conv2d_math.h"
#include "fused_ops/cuda/cross_entropy_math.h"
#include "fused_ops/cuda/pool2d_math.h"

namespace hfta::cuda::kernels {

// Linear (fused_ops/cuda/linear_kernels.cu), for B models:
//   fill_bias:  y[b, n, o] = bias[b, o]          bias [B, fo], y [B, rows, fo]
//   bias_grad:  dbias[b, o] += sum_n dy[b, n, o]  dy [B, rows, fo], in a fixed order (double sums)
cudaError_t fill_bias(const float* bias, float* y, int64_t B, int64_t rows, int64_t fo,
                      cudaStream_t stream);
cudaError_t bias_grad(const float* dy, float* dbias, int64_t B, int64_t rows, int64_t fo,
                      cudaStream_t stream);

// Elementwise activations over n elements (fused_ops/cuda/activation_kernels.cu; `kind` is an
// activation_math::Kind, `slope` LeakyReLU's negative slope, the arithmetic activation_math.h's):
//   activation_forward:   y = f(x)                         (y may be x)
//   activation_backward:  dx = f'(v) dy, or dx += f'(v) dy, v the output or the input as the
//                         kind's backward reads (dx may be dy unless accumulating)
cudaError_t activation_forward(int kind, float slope, const float* x, float* y, int64_t n,
                               cudaStream_t stream);
cudaError_t activation_backward(int kind, float slope, const float* v, const float* dy, float* dx,
                                int64_t n, bool accumulate, cudaStream_t stream);

// Channel scaling over [rows, hw] (fused_ops/cuda/scale_channels_kernels.cu; the arithmetic is
// scale_channels_math.h's): y = x * s[row]; dx = dy * s[row] (written or added; skipped when dx
// is null) and ds[row] = sum of dy * x over the row (written or added; skipped when ds is null).
cudaError_t scale_channels_forward(const float* x, const float* s, float* y, int64_t rows,
                                   int64_t hw, cudaStream_t stream);
cudaError_t scale_channels_backward(const float* x, const float* s, const float* dy, float* dx,
                                    float* ds, int64_t rows, int64_t hw, bool accumulate_dx,
                                    bool accumulate_ds, cudaStream_t stream);

// Dropout over n elements with a mask of 1/(1-p) or 0 per element
// (fused_ops/cuda/dropout_kernels.cu; the arithmetic is dropout_math.h's):
//   dropout_forward:   y = x * mask                          (y may be x)
//   dropout_backward:  dx = mask * dy, or dx += mask * dy     (dx may be dy unless accumulating)
cudaError_t dropout_forward(const float* x, const float* mask, float* y, int64_t n,
                            cudaStream_t stream);
cudaError_t dropout_backward(const float* mask, const float* dy, float* dx, int64_t n,
                             bool accumulate, cudaStream_t stream);

// BatchNorm2d over the `channels` = B*C channels of [N, channels, hw]
// (fused_ops/cuda/batchnorm2d_kernels.cu; the contract is fused_ops/batchnorm2d.h), one block per
// channel. gamma/beta null without affine; running_mean/var null in training to skip their
// update (required in eval); dx, dgamma, dbeta null when not wanted. dgamma and dbeta accumulate.
cudaError_t batchnorm2d_forward(const float* x, const float* gamma, const float* beta,
                                float* running_mean, float* running_var, float* saved_mean,
                                float* saved_rstd, float* y, int64_t N, int64_t channels,
                                int64_t hw, double eps, double momentum, bool training,
                                cudaStream_t stream);
cudaError_t batchnorm2d_backward(const float* x, const float* gamma, const float* saved_mean,
                                 const float* saved_rstd, const float* dy, float* dx, float* dgamma,
                                 float* dbeta, int64_t N, int64_t channels, int64_t hw,
                                 bool training, bool accumulate, cudaStream_t stream);

// Add over n elements (fused_ops/cuda/add_kernels.cu; the arithmetic is add_math.h's):
//   add_forward:   y = a + b                             (y may be a or b)
//   add_backward:  dx = dy, or dx += dy (accumulate)
cudaError_t add_forward(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream);
cudaError_t add_backward(const float* dy, float* dx, int64_t n, bool accumulate,
                         cudaStream_t stream);

// Softmax cross-entropy (fused_ops/cuda/cross_entropy_kernels.cu; the arithmetic and the fixed
// order of every sum are cross_entropy_math.h's): forward writes probs and losses (three
// launches), backward writes dlogits (dlogits may be probs). s.M is the count of rows not ignored.
cudaError_t cross_entropy_forward(const ce_math::CeShape& s, const float* logits,
                                  const int32_t* labels, float* probs, float* losses,
                                  cudaStream_t stream);
cudaError_t cross_entropy_backward(const ce_math::CeShape& s, const float* probs,
                                   const int32_t* labels, const float* dlosses, float* dlogits,
                                   cudaStream_t stream);
// count_correct (fused_ops/cross_entropy.h): correct[b] (device memory, B values) = model b's rows
// whose first maximum is the label, NaN rows and ignored rows never counted; one block per model.
cudaError_t count_correct(const ce_math::CeShape& s, const float* logits, const int32_t* labels,
                          int64_t* correct, cudaStream_t stream);

// Pooling (fused_ops/cuda/pool2d_kernels.cu; the arithmetic is pool2d_math.h's): forward one
// thread per output; backward one thread per input element, gathering the dy of the windows that
// cover it (no atomics), dx written or (accumulate) added to. argmax may be null in max forward.
cudaError_t max_pool_forward(const pool_math::PoolGeometry& g, const float* x, float* y,
                             int32_t* argmax, cudaStream_t stream);
cudaError_t avg_pool_forward(const pool_math::PoolGeometry& g, const float* x, float* y,
                             cudaStream_t stream);
cudaError_t max_pool_backward(const pool_math::PoolGeometry& g, const int32_t* argmax,
                              const float* dy, float* dx, bool accumulate, cudaStream_t stream);
cudaError_t avg_pool_backward(const pool_math::PoolGeometry& g, const float* dy, float* dx,
                              bool accumulate, cudaStream_t stream);
cudaError_t adaptive_avg_pool_forward(const pool_math::AdaptiveGeometry& g, const float* x,
                                      float* y, cudaStream_t stream);
cudaError_t adaptive_avg_pool_backward(const pool_math::AdaptiveGeometry& g, const float* dy,
                                       float* dx, bool accumulate, cudaStream_t stream);

// Conv2d (fused_ops/cuda/conv2d_kernels.cu; layouts and index math in conv2d_math.h):
//   conv_fill_bias:  y[n, c, q] = bias[c]                     y [N, BC, P], bias [BC]
//   conv_bias_grad:  dbias[c] += sum over n, q of dy[n, c, q] in a fixed order (double sums)
//   im2col:          col = conv_math::im2col_value at every index of `images` images
//   col2im:          dx = conv_math::col2im_value at every index of `images` images (a gather)
cudaError_t conv_fill_bias(const float* bias, float* y, int64_t N, int64_t BC, int64_t P,
                           cudaStream_t stream);
cudaError_t conv_bias_grad(const float* dy, float* dbias, int64_t N, int64_t BC, int64_t P,
                           cudaStream_t stream);
cudaError_t im2col(const conv_math::ConvGeometry& g, const float* x, float* col, int64_t images,
                   cudaStream_t stream);
cudaError_t col2im(const conv_math::ConvGeometry& g, const float* dcol, float* dx, int64_t images,
                   bool accumulate, cudaStream_t stream);

// Flatten (fused_ops/cuda/flatten_kernels.cu): y [B, N, F] from x [N, B*C, H, W], F = C*H*W
// (fused_ops/flatten.h), and the inverse for the gradient, dx written or added (accumulate).
cudaError_t flatten_forward(const float* x, float* y, int64_t B, int64_t N, int64_t F,
                            cudaStream_t stream);
cudaError_t flatten_backward(const float* dy, float* dx, int64_t B, int64_t N, int64_t F,
                             bool accumulate, cudaStream_t stream);

// Implicit-GEMM conv2d (fused_ops/cuda/conv2d_implicit_kernels.cu; every element's arithmetic and
// its fixed order are conv2d_implicit_math.h's), each launch over all N images and B models:
//   implicit_conv_forward:          y = implicit_math::forward_value at every element (bias first)
//   implicit_conv_backward_data:    dx = implicit_math::dx_value at every element (old value kept
//                                   and added to with accumulate)
//   implicit_conv_backward_weight:  dweight of models [b0, b0 + models) = dweight_value: with one
//                                   chunk straight, else the chunks' sums into `partials`
//                                   ([chunks, models*C_out, cig*kH*kW] floats) and then combined
// Returns cudaErrorInvalidConfiguration for a grid beyond 2^31 - 1 blocks.
cudaError_t implicit_conv_forward(const implicit_math::ImplicitGeometry& g, const float* x,
                                  const float* weight, const float* bias, float* y,
                                  cudaStream_t stream);
cudaError_t implicit_conv_backward_data(const implicit_math::ImplicitGeometry& g,
                                        const float* weight, const float* dy, float* dx,
                                        bool accumulate, cudaStream_t stream);
cudaError_t implicit_conv_backward_weight(const implicit_math::ImplicitGeometry& g, const float* x,
                                          const float* dy, float* dweight, float* partials, int b0,
                                          int models, cudaStream_t stream);

// PointNet's ops:
//   batchnorm1d_forward / _backward (fused_ops/cuda/batchnorm1d_kernels.cu): BatchNorm1d on the
//     rows layout x [B, R, C], one block per channel as batchnorm2d (arithmetic in
//     batchnorm1d_math.h and batchnorm2d_math.h); gamma/beta null without affine, the running
//     statistics null to skip their update, dx/dgamma/dbeta null when not wanted
//   max_points_forward:   y [P, C] = max over L of x [P, L, C], argmax (may be null) the first
//                         maximum's point (a NaN wins once met); max_points_math.h
//   max_points_backward:  dx [P, L, C] = dy at the argmax, 0 elsewhere (or added: accumulate)
//   add_identity_forward: y = x + I over n elements of k x k matrices (y may be x)
cudaError_t batchnorm1d_forward(const float* x, const float* gamma, const float* beta,
                                float* running_mean, float* running_var, float* saved_mean,
                                float* saved_rstd, float* y, int64_t B, int64_t R, int64_t C,
                                double eps, double momentum, bool training, cudaStream_t stream);
cudaError_t batchnorm1d_backward(const float* x, const float* gamma, const float* saved_mean,
                                 const float* saved_rstd, const float* dy, float* dx, float* dgamma,
                                 float* dbeta, int64_t B, int64_t R, int64_t C, bool training,
                                 bool accumulate, cudaStream_t stream);
cudaError_t max_points_forward(const float* x, float* y, int32_t* argmax, int64_t problems,
                               int64_t L, int64_t C, cudaStream_t stream);
cudaError_t max_points_backward(const int32_t* argmax, const float* dy, float* dx, int64_t problems,
                                int64_t L, int64_t C, bool accumulate, cudaStream_t stream);
cudaError_t add_identity_forward(const float* x, float* y, int64_t k, int64_t n,
                                 cudaStream_t stream);

}  // namespace hfta::cuda::kernels
