// Fused softmax cross-entropy: B independent mean losses over one shared set of labels.
//
//   logits   [B, N, K]   model b's rows are one contiguous block (the linear layout)
//   labels   [N]         int32 class indices in [0, K), shared by all B models, or ignore_index
//   losses   [B]         losses[b] = -(1/M) sum_n log softmax(logits[b, n])[labels[n]], over the
//                        M rows whose label is not ignore_index (M = N without ignore_index)
//   probs    [B, N, K]   softmax of each row, saved for backward
//   dlosses  [B]         scale of each model's loss (typically all 1: the fused loss is the sum
//                        of the per-model losses, so each model gets exactly its own gradient)
//   dlogits  [B, N, K]   written (=): dlosses[b] * (probs - onehot(labels)) / M, and 0 on the
//                        ignored rows; may be the same buffer as probs
// ignore_index (as torch's F.cross_entropy(ignore_index=...), e.g. padding tokens of a language
// model): rows labelled with it add nothing to the loss or its gradient, and the mean is over the
// other rows. Their probs are still the softmax of their logits. When every row is ignored the
// loss is 0 and dlogits all 0 (PyTorch returns NaN there: 0/0), so an all-padding batch does not
// poison the model. count_correct never counts an ignored row; cross_entropy_target_rows gives M.
// Rows are computed stably (the row maximum is subtracted before exp). A NaN logit (or a +inf
// one) makes its row's probabilities and its model's loss NaN; other models are unaffected.
// Labels outside [0, K) raise hfta::Error naming the row and the label.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "core/tensor.h"

namespace hfta {

struct CrossEntropyParams {
  int64_t B = 1;
  int64_t N = 1;
  int64_t K = 2;  // classes
  // Labels equal to it are skipped (see the top of this file); none by default. It need not be a
  // class index (PyTorch's default is -100).
  std::optional<int32_t> ignore_index{};

  bool ignored(int32_t label) const { return ignore_index && label == *ignore_index; }

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
// label is outside [0, K) and not ignore_index.
void check_cross_entropy(const CrossEntropyParams& p, const CrossEntropyForwardArgs& a);
void check_cross_entropy_backward(const CrossEntropyParams& p, const CrossEntropyBackwardArgs& a);
void check_count_correct(const CrossEntropyParams& p, const CountCorrectArgs& a);
// The labels' values alone (host memory; the checks above do it for host labels, the CUDA op on a
// host copy of device labels).
void check_cross_entropy_labels(const CrossEntropyParams& p, const IndexView& labels);

void cross_entropy_forward(const CrossEntropyParams& p, const CrossEntropyForwardArgs& a);
void cross_entropy_backward(const CrossEntropyParams& p, const CrossEntropyBackwardArgs& a);
// correct[b] = number of rows n whose argmax (the first maximum on ties) is labels[n]; written.
// A row with a NaN logit counts as wrong, an ignored row never counts.
void count_correct(const CrossEntropyParams& p, const CountCorrectArgs& a);
// M: the rows whose label is not ignore_index (the loss's denominator, and the accuracy's).
// Reads the labels on the host: raises for a device view.
int64_t cross_entropy_target_rows(const CrossEntropyParams& p, const IndexView& labels);

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

// Every tensor in device memory, labels included (fused_ops/cuda/cross_entropy.cpp; defined only
// in a build with -DHFTA_CUDA=ON). Runs on the calling thread's stream (backend/cuda/runtime.h).
// Each call copies the N labels to the host and waits for the copy, to raise for a bad label as
// the CPU op does and to count M; the kernels then run without waiting. count_correct has no
// CUDA kernel yet.
namespace cuda {
void cross_entropy_forward(const CrossEntropyParams& p, const CrossEntropyForwardArgs& a);
void cross_entropy_backward(const CrossEntropyParams& p, const CrossEntropyBackwardArgs& a);
// Waits for the stream: the B counts are host memory.
void count_correct(const CrossEntropyParams& p, const CountCorrectArgs& a);
}  // namespace cuda

}  // namespace hfta
