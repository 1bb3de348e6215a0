// Fused layer normalization: B independent PyTorch-style LayerNorm(F) layers in one call,
// normalizing each row over its last dimension.
//
//   x, y          [B, N, F]  (the linear family's layout; reshape [B, N, L, F] to [B, N*L, F])
//   gamma, beta   [B, F]     (empty views when affine = false)
//   saved.mean    [B, N]     written by forward, read by backward
//   saved.rstd    [B, N]     1 / sqrt(biased row variance + eps)
// y = (x - mean) * rstd * gamma + beta, as torch.nn.LayerNorm (biased variance, eps inside the
// square root). There is no train/eval difference and no running statistics.
//
// Backward: dx is written (=), or added to (+=) with accumulate_dx; dgamma and dbeta accumulate
// (+=). Any gradient may be an empty
// view to skip it. y must not alias x (backward reads x).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace hfta {

struct LayerNormParams {
  int64_t B = 1;
  int64_t N = 1;  // rows per model
  int64_t F = 1;  // features normalized over
  double eps = 1e-5;
  bool affine = true;

  Shape x_shape() const { return {B, N, F}; }
  Shape y_shape() const { return x_shape(); }
  Shape param_shape() const { return {B, F}; }
  Shape saved_shape() const { return {B, N}; }
  // Per element: sum and squared deviation (3), then normalize and affine (2 multiply-adds).
  double forward_flops() const { return double(B) * N * F * 7.0; }
};

// What backward needs; caller-provided [B, N] views, written by forward.
struct LayerNormSaved {
  TensorView mean;
  TensorView rstd;
};

// The tensors of one call, by name (call with designated initializers:
// layernorm_forward(p, {.x = x, .gamma = g, .beta = b, .saved = {.mean = m, .rstd = r}, .y = y})).
struct LayerNormForwardArgs {
  TensorView x{}, gamma{}, beta{};  // inputs
  LayerNormSaved saved{};           // outputs for backward
  TensorView y{};
};
struct LayerNormBackwardArgs {
  TensorView x{}, gamma{};             // inputs
  LayerNormSaved saved{};              // what forward saved
  TensorView dy{};                     // input
  TensorView dx{}, dgamma{}, dbeta{};  // outputs; an empty view = not wanted
  bool accumulate_dx = false;          // dx += gradient instead of dx = gradient
};

// Throws hfta::Error when a size is not positive, eps is not positive, or a tensor does not match
// its shape above.
void check_layernorm_params(const LayerNormParams& p);
void check_layernorm(const LayerNormParams& p, const LayerNormForwardArgs& a);
void check_layernorm_backward(const LayerNormParams& p, const LayerNormBackwardArgs& a);

void layernorm_forward(const LayerNormParams& p, const LayerNormForwardArgs& a);
void layernorm_backward(const LayerNormParams& p, const LayerNormBackwardArgs& a);

namespace ref {
void layernorm_forward(const LayerNormParams& p, const LayerNormForwardArgs& a);
void layernorm_backward(const LayerNormParams& p, const LayerNormBackwardArgs& a);
}  // namespace ref

namespace cpu {
void layernorm_forward(const LayerNormParams& p, const LayerNormForwardArgs& a);
void layernorm_backward(const LayerNormParams& p, const LayerNormBackwardArgs& a);
}  // namespace cpu

}  // namespace hfta
