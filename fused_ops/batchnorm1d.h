// Fused 1-D batch normalization on the rows layout: B independent PyTorch-style BatchNorm1d(C)
// layers in one call.
//
//   x, y          [B, R, C]  (model b's R rows contiguous; R = n for fully connected layers,
//                             n*L for per-point layers of PointNet, whose [n, C, L] activations
//                             are stored as n*L rows of C channels)
//   gamma, beta   [B, C]     (empty views when affine = false)
//   running_mean  [B, C]     per-model running statistics
//   running_var   [B, C]
//   saved.mean    [B, C]     written by forward, read by backward
//   saved.rstd    [B, C]     1 / sqrt(var + eps)
// Each channel's statistics reduce over the model's R rows, which is what torch's BatchNorm1d
// computes over (N) for [N, C] inputs and over (N, L) for [N, C, L] inputs.
//
// The semantics are exactly batchnorm2d's (fused_ops/batchnorm2d.h), with R in place of N*H*W:
// training normalizes with the batch mean and the biased batch variance and updates the running
// statistics with the unbiased one (times R / (R - 1)) and momentum; the running statistics may
// both be empty views in training to skip the update; training needs R > 1; eval normalizes with
// running_mean/var (required) and saves running_mean and 1 / sqrt(running_var + eps).
// Backward: with training = true, the gradient flows through the batch statistics; with training
// = false it is dx = dy * gamma * rstd. dx is written (=), or added to (+=) with accumulate_dx;
// dgamma and dbeta accumulate (+=). Any gradient may be an empty view to skip it. y must not
// alias x (backward reads x).
//
// A fused activation (`activation`) is batchnorm2d's: y = act(normalized x), backward takes dy
// as act's output gradient and needs beta and y; bit for bit the two ops; the CPU only.
//
// BatchNorm1d on the channels layout [N, B*C, L] needs no op of its own: it is batchnorm2d with
// H = 1 and W = L (tests/fused_ops/test_batchnorm1d.cpp checks the two agree).
#pragma once

#include <cstdint>
#include <optional>

#include "core/tensor.h"
#include "fused_ops/activation.h"

namespace hfta {

struct BatchNorm1dParams {
  int64_t B = 1;
  int64_t R = 1;  // rows per model: the statistics reduce over them
  int64_t C = 1;  // channels per model
  double eps = 1e-5;
  double momentum = 0.1;
  bool affine = true;
  bool training = true;
  std::optional<ActivationParams> activation;  // applied to the output (see the top of the file)

  Shape x_shape() const { return {B, R, C}; }
  Shape y_shape() const { return x_shape(); }
  // gamma, beta, running_mean, running_var, saved.mean and saved.rstd.
  Shape param_shape() const { return {B, C}; }
  // Per element: sum and squared deviation in training (3), then one multiply-add (2).
  double forward_flops() const { return double(B) * R * C * (training ? 5.0 : 2.0); }
};

// What backward needs; caller-provided [B, C] views, written by forward.
struct BatchNorm1dSaved {
  TensorView mean;
  TensorView rstd;
};

// The tensors of one call, by name (call with designated initializers:
// batchnorm1d_forward(p, {.x = x, ..., .saved = {.mean = m, .rstd = r}, .y = y})).
struct BatchNorm1dForwardArgs {
  TensorView x{}, gamma{}, beta{};           // inputs
  TensorView running_mean{}, running_var{};  // updated in place (training) or read (eval)
  BatchNorm1dSaved saved{};                  // outputs for backward
  TensorView y{};
};
struct BatchNorm1dBackwardArgs {
  TensorView x{}, gamma{};             // inputs
  TensorView beta{}, y{};              // with an activation only: beta and forward's output
  BatchNorm1dSaved saved{};            // what forward saved
  TensorView dy{};                     // input
  TensorView dx{}, dgamma{}, dbeta{};  // outputs; an empty view = not wanted
  bool accumulate_dx = false;          // dx += gradient instead of dx = gradient
};

// Throws hfta::Error when a size is not positive, eps is not positive, momentum is outside
// [0, 1], training has a single row, the activation cannot be fused, a tensor does not match its
// shape above, or the tensors are on different devices.
void check_batchnorm1d_params(const BatchNorm1dParams& p);
void check_batchnorm1d(const BatchNorm1dParams& p, const BatchNorm1dForwardArgs& a);
void check_batchnorm1d_backward(const BatchNorm1dParams& p, const BatchNorm1dBackwardArgs& a);

void batchnorm1d_forward(const BatchNorm1dParams& p, const BatchNorm1dForwardArgs& a);
void batchnorm1d_backward(const BatchNorm1dParams& p, const BatchNorm1dBackwardArgs& a);

namespace ref {
void batchnorm1d_forward(const BatchNorm1dParams& p, const BatchNorm1dForwardArgs& a);
void batchnorm1d_backward(const BatchNorm1dParams& p, const BatchNorm1dBackwardArgs& a);
}  // namespace ref

namespace cpu {
void batchnorm1d_forward(const BatchNorm1dParams& p, const BatchNorm1dForwardArgs& a);
void batchnorm1d_backward(const BatchNorm1dParams& p, const BatchNorm1dBackwardArgs& a);
}  // namespace cpu

// Every tensor in device memory (fused_ops/cuda/batchnorm1d.cpp; defined only in a build with
// -DHFTA_CUDA=ON). Runs on the calling thread's stream and returns without waiting for it.
namespace cuda {
void batchnorm1d_forward(const BatchNorm1dParams& p, const BatchNorm1dForwardArgs& a);
void batchnorm1d_backward(const BatchNorm1dParams& p, const BatchNorm1dBackwardArgs& a);
}  // namespace cuda

}  // namespace hfta
