// Fused softmax cross-entropy: B independent mean losses over one shared set of labels.
//
//   logits   [B, N, K]   model b's rows are one contiguous block (the linear layout)
//   labels   [N]         int32 class indices in [0, K), shared by all B models
//   losses   [B]         losses[b] = -(1/N) sum_n log softmax(logits[b, n])[labels[n]]
//   probs    [B, N, K]   softmax of each row, saved for backward
//   dlosses  [B]         scale of each model's loss (typically all 1: the fused loss is the sum
//                        of the per-model losses, so each model gets exactly its own gradient)
//   dlogits  [B, N, K]   written (=): dlosses[b] * (probs - onehot(labels)) / N; may be the
//                        same buffer as probs
// Rows are computed stably (the row maximum is subtracted before exp). A NaN logit (or a +inf
// one) makes its row's probabilities and its model's loss NaN; other models are unaffected.
// Labels outside [0, K) raise hfta::Error naming the row and the label.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"

namespace hfta {

struct CrossEntropyParams {
  int64_t B = 1;
  int64_t N = 1;
  int64_t K = 2;  // classes

  Shape logits_shape() const { return {B, N, K}; }
  Shape labels_shape() const { return {N}; }
  Shape losses_shape() const { return {B}; }
  // Per logit: max, subtract, exp, add, scale (exp counted as one).
  double forward_flops() const { return 5.0 * B * N * K; }
};

// What backward needs: the softmax of the last forward.
struct CrossEntropySaved {
  TensorView probs;
};

// The tensors of one call, by name (call with designated initializers:
// cross_entropy_forward(p, {.logits = z, .labels = l, .losses = L, .saved = {.probs = P}})).
struct CrossEntropyForwardArgs {
  TensorView logits{};
  IndexView labels{};
  TensorView losses{};        // output
  CrossEntropySaved saved{};  // output for backward
};
// No accumulate flag: dlogits is written (=); logits are one model's output, read only by the loss.
struct CrossEntropyBackwardArgs {
  CrossEntropySaved saved{};  // what forward saved
  IndexView labels{};
  TensorView dlosses{};
  TensorView dlogits{};  // output
};
struct CountCorrectArgs {
  TensorView logits{};
  IndexView labels{};
  std::span<int64_t> correct{};  // output, B counts
};

// Throws hfta::Error when a size is not positive, a tensor does not match its shape above, or a
// label is outside [0, K).
void check_cross_entropy(const CrossEntropyParams& p, const CrossEntropyForwardArgs& a);
void check_cross_entropy_backward(const CrossEntropyParams& p, const CrossEntropyBackwardArgs& a);
void check_count_correct(const CrossEntropyParams& p, const CountCorrectArgs& a);

void cross_entropy_forward(const CrossEntropyParams& p, const CrossEntropyForwardArgs& a);
void cross_entropy_backward(const CrossEntropyParams& p, const CrossEntropyBackwardArgs& a);
// correct[b] = number of rows n whose argmax (the first maximum on ties) is labels[n]; written.
// A row with a NaN logit counts as wrong.
void count_correct(const CrossEntropyParams& p, const CountCorrectArgs& a);

namespace ref {
void cross_entropy_forward(const CrossEntropyParams& p, const CrossEntropyForwardArgs& a);
void cross_entropy_backward(const CrossEntropyParams& p, const CrossEntropyBackwardArgs& a);
void count_correct(const CrossEntropyParams& p, const CountCorrectArgs& a);
}  // namespace ref

namespace cpu {
void cross_entropy_forward(const CrossEntropyParams& p, const CrossEntropyForwardArgs& a);
void cross_entropy_backward(const CrossEntropyParams& p, const CrossEntropyBackwardArgs& a);
void count_correct(const CrossEntropyParams& p, const CountCorrectArgs& a);
}  // namespace cpu

}  // namespace hfta
