// CPU fused conv2d on oneDNN convolution primitives (direct algorithm, f32).
//
// How the B models map onto oneDNN (Conv2dStrategy, chosen per problem in choose_strategy):
// - per model (the default for B > 1): B runs of the single-model primitive, each on one model's
//   channel slice of x/y. With B a multiple of the thread count the runs go one model per thread
//   (parallelism across models): each thread runs its models' primitives alone, on its own
//   lane of primitives and blocked copies (see for_each_run), so no thread waits on another
//   inside a convolution and each model's working set stays in one core's cache. Otherwise the
//   runs go one after another, oneDNN threading each over minibatch and channel blocks (inside
//   the op). A shared input with groups > 1 is always per model (one primitive would
//   interleave models within each group); when its dx is wanted, the runs sum into it through a
//   reorder with a sum post-op, one after another.
// - grouped: ONE convolution with B*groups groups (the [N, B*C, H, W] layout makes that free);
//   a shared input with groups == 1 is one ungrouped convolution with B*C_out output channels.
//   Kept for when oneDNN has a JIT kernel only for it, and as op_bench's strategy=grouped.
// - direct (chosen whenever it applies): a shared input with at most 4 channels, LeNet's first
//   layer, runs on our own AVX-512 / AVX2 kernel (conv2d_direct.h), all B models in one pass over
//   the input; only a shared input's dx, which training never asks for, still goes to oneDNN.
// - depthwise (chosen whenever it applies): groups == in_channels == out_channels, 3x3 or 5x5,
//   stride 1 or 2 (MobileNetV2's), runs on our own kernel (conv2d_depthwise.h) straight on the
//   plain NCHW buffers, forward and backward, skipping the blocked-layout conversions below.
// - B = 1 is the single-model convolution either way, threaded inside oneDNN: the serial
//   baseline, which runs near the machine's sgemm peak.
// - deterministic mode (core/determinism.h): per model at every B, each run on a primitive
//   planned for one thread (one model per thread, or the runs in order on one thread when they
//   sum into a shared input's dx). oneDNN's kernels differ with the thread count (its
//   backward-weights splits the minibatch over the threads and sums their partial gradients) and
//   between grouped and single-model problems, so a model's bits are those of one model alone
//   only on a one-thread primitive of the single-model problem. The direct and depthwise kernels
//   cut their weight-gradient reductions by the minibatch alone in this mode.
// Measurements: docs/benchmarks.md ('Measurements behind code choices', 'Conv2d: what changed
// and what it bought').
//
// The oneDNN strategies (grouped, per model) and their primitive cache live in
// fused_ops/cpu/conv2d_onednn.cpp.
#include "fused_ops/conv2d.h"

#include <memory>

#include "core/error.h"
#include "fused_ops/cpu/conv2d_depthwise.h"
#include "fused_ops/cpu/conv2d_direct.h"
#include "fused_ops/cpu/conv2d_im2col.h"
#include "fused_ops/cpu/conv2d_onednn.h"
#include "fused_ops/cpu/conv2d_pointwise.h"
#include "fused_ops/dispatch.h"

namespace hfta::cpu {

namespace {

// Whether the current strategy lets our own kernels take the problems they apply to: every one
// but a forced oneDNN strategy (kGrouped, kPerModel).
bool own_kernels_allowed() {
  const Conv2dStrategy asked = conv2d_strategy();
  return asked != Conv2dStrategy::kGrouped && asked != Conv2dStrategy::kPerModel;
}

// Whether p runs on the direct kernel (conv2d_direct.h). On LeNet's conv1 oneDNN's fused B=8
// costs well over eight B=1 calls; the direct kernel's comes closer (docs/benchmarks.md,
// 'Measurements behind code choices' and 'LeNet on the Xeon').
bool uses_direct(const Conv2dParams& p) {
  return own_kernels_allowed() && conv2d_direct_applies(p);
}
// Whether p runs on the depthwise kernel (conv2d_depthwise.h).
bool uses_depthwise(const Conv2dParams& p) { return own_kernels_allowed() && depthwise_applies(p); }
// Whether p runs as GEMMs on the plain buffers (conv2d_im2col.h).
bool uses_im2col(const Conv2dParams& p) {
  return own_kernels_allowed() && conv2d_im2col_applies(p);
}
// Whether p runs as GEMMs per image (conv2d_pointwise.h).
bool uses_pointwise(const Conv2dParams& p) {
  return own_kernels_allowed() && conv2d_pointwise_applies(p);
}

}  // namespace

void conv2d_forward(const Conv2dParams& p, const Conv2dForwardArgs& a) {
  const TensorView &x = a.x, &weight = a.weight, &bias = a.bias, &y = a.y;
  if (uses_depthwise(p))
    return depthwise_conv2d_forward(p, x.data, weight.data, p.bias ? bias.data : nullptr, y.data);
  if (uses_direct(p)) return conv2d_direct_forward(p, x, weight, bias, y);
  if (uses_im2col(p)) return conv2d_im2col_forward(p, a);
  if (uses_pointwise(p)) return conv2d_pointwise_forward(p, a);
  conv2d_onednn_forward(p, a);
}

void conv2d_backward(const Conv2dParams& p, const Conv2dBackwardArgs& args) {
  // oneDNN's backward-weights and the im2col and pointwise GEMMs write the parameter gradients
  // when asked to; the direct and depthwise kernels only add to them, so a call that wants them
  // written there gets them zeroed first.
  const bool writes = !args.dweight.empty() && !uses_depthwise(p) && !uses_direct(p);
  const Conv2dBackwardArgs a = writes ? args : with_param_grads_zeroed(args);
  if (uses_depthwise(p))
    return depthwise_conv2d_backward(
        p, a.x.data, a.weight.data, a.dy.data, a.dx.empty() ? nullptr : a.dx.data,
        a.dweight.empty() ? nullptr : a.dweight.data,
        p.bias && !a.dbias.empty() ? a.dbias.data : nullptr, a.accumulate_dx);
  if (uses_direct(p)) {
    // The direct kernel has no backward-data: oneDNN computes the (rarely wanted) dx alone.
    if (!a.dx.empty()) {
      Conv2dBackwardArgs data_only = a;
      data_only.dweight = data_only.dbias = TensorView();
      conv2d_onednn_backward(p, data_only);
    }
    return conv2d_direct_backward_weights(p, a.x, a.dy, a.dweight, a.dbias);
  }
  if (uses_im2col(p)) return conv2d_im2col_backward(p, a);
  if (uses_pointwise(p)) return conv2d_pointwise_backward(p, a);
  conv2d_onednn_backward(p, a);
}

Conv2dStrategy conv2d_strategy_for(const Conv2dParams& p) {
  check_conv2d_params(p);
  if (uses_depthwise(p)) return Conv2dStrategy::kDepthwise;
  if (uses_direct(p)) return Conv2dStrategy::kDirect;
  if (uses_im2col(p)) return Conv2dStrategy::kIm2col;
  if (uses_pointwise(p)) return Conv2dStrategy::kPointwise;
  return conv2d_onednn_runs_per_model(p) ? Conv2dStrategy::kPerModel : Conv2dStrategy::kGrouped;
}

}  // namespace hfta::cpu

namespace hfta {

int64_t conv2d_saved_floats(const Conv2dParams& p) { return cpu::conv2d_im2col_saved_floats(p); }

}  // namespace hfta
