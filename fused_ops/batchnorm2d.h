// Fused 2-D batch normalization: B independent PyTorch-style BatchNorm2d layers in one call.
//
//   x, y          [N, B*C, H, W]  (model b's channels at [b*C, (b+1)*C), the conv family's layout)
//   gamma, beta   [B, C]          (empty views when affine = false)
//   running_mean  [B, C]          per-model running statistics
//   running_var   [B, C]
//   saved.mean    [B, C]          written by forward, read by backward
//   saved.rstd    [B, C]          1 / sqrt(var + eps)
// Normalization acts on each channel alone, so the fused op is batch norm over B*C channels:
// model b alone computes exactly its channels.
//
// Training (PyTorch's semantics): normalizes with the batch mean and the biased batch variance
// over (N, H, W), and updates running_mean/var in place with
//   running = (1 - momentum) * running + momentum * batch_stat,
// using the UNBIASED batch variance (times M / (M - 1), M = N*H*W) for running_var, as PyTorch.
// The running statistics may both be empty views in training to skip the update (PyTorch's
// track_running_stats=False while training). Training needs M > 1, as in PyTorch.
// Eval: normalizes with running_mean/var (required); saved receives running_mean and
// 1 / sqrt(running_var + eps), so backward needs no running statistics.
//
// Backward: with training = true, the gradient flows through the batch statistics; with
// training = false, it is the affine-only gradient dx = dy * gamma * rstd. dx is written (=),
// or added to (+=) with accumulate_dx; dgamma and dbeta accumulate (+=). Any gradient may be an
// empty view to skip it. y must not alias x (backward reads x).
//
// Fused activation (`activation`: ReLU, ReLU6 or LeakyReLU with a slope >= 0, the activations
// whose backward reads only their output): y = act(normalized x), and backward takes dy as the
// gradient of act's output, so the call is BatchNorm2d followed by that activation, values and
// gradients bit for bit as the two ops one after the other (fused_ops/activation.h), in one pass
// over memory instead of three. Backward then needs y (act's output, where the activation passes
// the gradient) and beta (affine): the reference reads y, the CPU kernel recomputes act's input
// from x, gamma and beta with forward's arithmetic, bit for bit, and does not read y. The CPU
// only: a CUDA call with an activation raises hfta::Error.
#pragma once

#include <cstdint>
#include <optional>

#include "core/tensor.h"
#include "fused_ops/activation.h"

namespace hfta {

struct BatchNorm2dParams {
  int64_t B = 1;
  int64_t N = 1;
  int64_t C = 1;  // channels per model
  int64_t H = 1;
  int64_t W = 1;
  double eps = 1e-5;
  double momentum = 0.1;
  bool affine = true;
  bool training = true;
  std::optional<ActivationParams> activation;  // applied to the output (see the top of the file)

  Shape x_shape() const { return {N, B * C, H, W}; }
  Shape y_shape() const { return x_shape(); }
  // gamma, beta, running_mean, running_var, saved.mean and saved.rstd.
  Shape param_shape() const { return {B, C}; }
  // Elements each channel's statistics reduce over.
  int64_t reduction_size() const { return N * H * W; }
  // Per element: sum and squared deviation in training (3), then one multiply-add (2).
  double forward_flops() const { return double(N) * B * C * H * W * (training ? 5.0 : 2.0); }
};

// What backward needs; caller-provided [B, C] views, written by forward.
struct BatchNorm2dSaved {
  TensorView mean;
  TensorView rstd;
};

// The tensors of one call, by name (call with designated initializers:
// batchnorm2d_forward(p, {.x = x, ..., .saved = {.mean = m, .rstd = r}, .y = y})).
struct BatchNorm2dForwardArgs {
  TensorView x{}, gamma{}, beta{};           // inputs
  TensorView running_mean{}, running_var{};  // updated in place (training) or read (eval)
  BatchNorm2dSaved saved{};                  // outputs for backward
  TensorView y{};
};
struct BatchNorm2dBackwardArgs {
  TensorView x{}, gamma{};             // inputs
  TensorView beta{}, y{};              // with an activation only: beta and forward's output
  BatchNorm2dSaved saved{};            // what forward saved
  TensorView dy{};                     // input
  TensorView dx{}, dgamma{}, dbeta{};  // outputs; an empty view = not wanted
  bool accumulate_dx = false;          // dx += gradient instead of dx = gradient
};

// Throws hfta::Error when a size is not positive, eps is not positive, momentum is outside
// [0, 1], training has a single value per channel, the activation cannot be fused, or a tensor
// does not match its shape above.
void check_batchnorm2d_params(const BatchNorm2dParams& p);
void check_batchnorm2d(const BatchNorm2dParams& p, const BatchNorm2dForwardArgs& a);
void check_batchnorm2d_backward(const BatchNorm2dParams& p, const BatchNorm2dBackwardArgs& a);

void batchnorm2d_forward(const BatchNorm2dParams& p, const BatchNorm2dForwardArgs& a);
void batchnorm2d_backward(const BatchNorm2dParams& p, const BatchNorm2dBackwardArgs& a);

namespace ref {
void batchnorm2d_forward(const BatchNorm2dParams& p, const BatchNorm2dForwardArgs& a);
void batchnorm2d_backward(const BatchNorm2dParams& p, const BatchNorm2dBackwardArgs& a);
}  // namespace ref

namespace cpu {
void batchnorm2d_forward(const BatchNorm2dParams& p, const BatchNorm2dForwardArgs& a);
void batchnorm2d_backward(const BatchNorm2dParams& p, const BatchNorm2dBackwardArgs& a);
}  // namespace cpu

// Every tensor in device memory (fused_ops/cuda/batchnorm2d.cpp; defined only in a build with
// -DHFTA_CUDA=ON). Runs on the calling thread's stream (backend/cuda/runtime.h) and returns
// without waiting for it.
namespace cuda {
void batchnorm2d_forward(const BatchNorm2dParams& p, const BatchNorm2dForwardArgs& a);
void batchnorm2d_backward(const BatchNorm2dParams& p, const BatchNorm2dBackwardArgs& a);
}  // namespace cuda

}  // namespace hfta
