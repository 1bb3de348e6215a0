// Fused binary cross-entropy with logits: B independent mean losses over one shared target
// vector (the discriminator loss of a GAN, one logit per sample).
//
//   logits        [B, N]   model b's logits are one contiguous row (the rows layout)
//   targets       [N]      shared by all B models, values in [0, 1] (a GAN's all-1 or all-0)
//   losses        [B]      losses[b] = (1/N) sum_n max(x, 0) - x t + log(1 + exp(-|x|)),
//                          x = logits[b, n], t = targets[n]
//   mean_sigmoid  [B]      optional: (1/N) sum_n sigmoid(x), the D(x) / D(G(z)) statistic of
//                          PyTorch's DCGAN example; an empty view skips it
//   dlosses       [B]      scale of each model's loss (typically 1)
//   dlogits       [B, N]   written (=): dlosses[b] * (sigmoid(x) - t) / N, or added with
//                          accumulate_dx
// What this matches: torch.nn.BCEWithLogitsLoss (mean reduction), whose stable formula is the
// one above, for every logit. PyTorch's DCGAN example runs Sigmoid then BCELoss instead, which
// agrees while sigmoid(x) keeps its precision in fp32. It drifts as 1 - sigmoid(x) loses digits
// (x beyond ~10 with t < 1), and once sigmoid(x) rounds to 1 (x > ~17) or to 0 (x < ~-88 with
// denormals flushed, as hfta runs) BCELoss clamps its log at -100: that sample's loss jumps to
// 100 (times t or 1 - t) and its gradient through the saturated sigmoid is 0, while ours stays
// about |x| with gradient +-1/N, the exact values. A model should drop its final Sigmoid and use
// this op; mean_sigmoid then reports what the Sigmoid's output would have averaged.
// Nothing is saved for backward: it recomputes sigmoid from the logits (N values per model).
// A NaN logit makes its model's loss, mean_sigmoid and gradients NaN, and leaves the other
// models alone; an infinite logit gives an infinite or NaN loss, as in PyTorch.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace hfta {

struct BceWithLogitsParams {
  int64_t B = 1;
  int64_t N = 1;

  Shape logits_shape() const { return {B, N}; }
  Shape targets_shape() const { return {N}; }
  Shape losses_shape() const { return {B}; }
  // Per logit: abs, exp, log1p, max, multiply-subtract, sum (transcendentals counted as one).
  double forward_flops() const { return 7.0 * B * N; }
};

// The tensors of one call, by name (call with designated initializers:
// bce_with_logits_forward(p, {.logits = z, .targets = t, .losses = L})).
struct BceWithLogitsForwardArgs {
  TensorView logits{}, targets{};
  TensorView losses{};        // output
  TensorView mean_sigmoid{};  // optional output
};
struct BceWithLogitsBackwardArgs {
  TensorView logits{}, targets{}, dlosses{};  // inputs
  TensorView dlogits{};                       // output
  bool accumulate_dx = false;                 // dlogits += gradient instead of =
};

// Throws hfta::Error when a size is not positive, a tensor does not match its shape above, or a
// target is outside [0, 1] (or NaN).
void check_bce_with_logits(const BceWithLogitsParams& p, const BceWithLogitsForwardArgs& a);
void check_bce_with_logits_backward(const BceWithLogitsParams& p,
                                    const BceWithLogitsBackwardArgs& a);
// The targets' values alone, read on the host: raises hfta::Error for targets elsewhere (the
// checks above leave device targets to the CUDA op, which checks a host copy).
void check_bce_with_logits_targets(const BceWithLogitsParams& p, const TensorView& targets);

void bce_with_logits_forward(const BceWithLogitsParams& p, const BceWithLogitsForwardArgs& a);
void bce_with_logits_backward(const BceWithLogitsParams& p, const BceWithLogitsBackwardArgs& a);

namespace ref {
void bce_with_logits_forward(const BceWithLogitsParams& p, const BceWithLogitsForwardArgs& a);
void bce_with_logits_backward(const BceWithLogitsParams& p, const BceWithLogitsBackwardArgs& a);
}  // namespace ref

namespace cpu {
void bce_with_logits_forward(const BceWithLogitsParams& p, const BceWithLogitsForwardArgs& a);
void bce_with_logits_backward(const BceWithLogitsParams& p, const BceWithLogitsBackwardArgs& a);
}  // namespace cpu

// Every tensor in device memory (fused_ops/cuda/bce.cpp; defined only in a build with
// -DHFTA_CUDA=ON): the sums in a fixed order per model (model b's bits do not depend on B), expf
// and log1pf the device's (a few ulp from the CPU's). Each call copies the N targets to the host
// and waits, to raise for a bad target as the CPU op does; then runs on the calling thread's
// stream without waiting.
namespace cuda {
void bce_with_logits_forward(const BceWithLogitsParams& p, const BceWithLogitsForwardArgs& a);
void bce_with_logits_backward(const BceWithLogitsParams& p, const BceWithLogitsBackwardArgs& a);
}  // namespace cuda

}  // namespace hfta
