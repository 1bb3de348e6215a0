// Fused dropout: B models, each dropping with its own random stream.
//
//   x, y, dy, dx, mask   one shape, in one of two layouts:
//     kModelMajor    [B, ...]           model b's per_model_numel elements are contiguous
//     kConvChannels  [N, B*C, H, W]     model b owns channels [b*C, (b+1)*C) (rank >= 2; the
//                                       dimensions after the second multiply to HW)
// Training with p > 0: model b draws one uniform number per element from streams[b], in the
// order of its own single-model tensor (for kConvChannels: n, then c, then hw), and keeps the
// element when the number is >= p. So model b draws exactly the mask it would draw alone,
// whatever B and the layout of the array are. mask = 1/(1-p) where kept, 0 where dropped, and
// y = x * mask.
// Eval mode or p == 0: y = x, no random numbers are drawn and the mask is neither read nor
// written (it may be an empty view); backward copies dy.
// Backward: dx = mask * dy, written (=), or added (+=) with accumulate_dx. y may be x's buffer and
// dx may be dy's (in place, unless accumulating); the mask needs a buffer of its own.
#pragma once

#include <cstdint>
#include <span>

#include "core/rng.h"
#include "core/tensor.h"

namespace hfta {

enum class DropoutLayout { kModelMajor, kConvChannels };

struct DropoutParams {
  int64_t B = 1;
  int64_t per_model_numel = 1;  // elements of one model's activation (N * C * HW for conv)
  DropoutLayout layout = DropoutLayout::kModelMajor;
  int64_t N = 1, C = 1, HW = 1;  // kConvChannels only
  float p = 0.5f;                // drop probability, in [0, 1)
  bool training = true;

  static DropoutParams model_major(int64_t B, int64_t per_model_numel, float p, bool training) {
    return {B, per_model_numel, DropoutLayout::kModelMajor, 1, 1, 1, p, training};
  }
  static DropoutParams conv_channels(int64_t B, int64_t N, int64_t C, int64_t HW, float p,
                                     bool training) {
    return {B, N * C * HW, DropoutLayout::kConvChannels, N, C, HW, p, training};
  }
  int64_t numel() const { return B * per_model_numel; }
  // True when the op draws a mask; false when it is the identity (eval mode or p == 0).
  bool active() const { return training && p > 0.0f; }
  // The scale of kept elements, 1 / (1 - p), in float as every backend computes it.
  float keep_scale() const { return 1.0f / (1.0f - p); }
  // One multiply per element (the random draws are not floating-point work).
  double forward_flops() const { return static_cast<double>(numel()); }
};

// What backward needs: the mask of the last training forward, same shape as x.
struct DropoutSaved {
  TensorView mask;
};

// The tensors of one call, by name (call with designated initializers:
// dropout_forward(p, {.x = x, .streams = streams, .saved = {.mask = mask}, .y = y})).
struct DropoutForwardArgs {
  TensorView x{};
  std::span<RngStream> streams{};  // one per model, advanced by the draws
  DropoutSaved saved{};            // output for backward
  TensorView y{};
};
struct DropoutBackwardArgs {
  DropoutSaved saved{};  // what forward saved
  TensorView dy{};
  TensorView dx{};             // output
  bool accumulate_dx = false;  // dx += gradient instead of dx = gradient
};

// Throws hfta::Error when a size is not positive, p is outside [0, 1), the sizes of a
// kConvChannels problem disagree with per_model_numel, a tensor does not have the layout's
// shape, or (training with p > 0) the mask is missing or streams does not hold B streams.
void check_dropout(const DropoutParams& p, const DropoutForwardArgs& a);
void check_dropout_backward(const DropoutParams& p, const DropoutBackwardArgs& a);

void dropout_forward(const DropoutParams& p, const DropoutForwardArgs& a);
void dropout_backward(const DropoutParams& p, const DropoutBackwardArgs& a);

namespace ref {
void dropout_forward(const DropoutParams& p, const DropoutForwardArgs& a);
void dropout_backward(const DropoutParams& p, const DropoutBackwardArgs& a);
}  // namespace ref

namespace cpu {
void dropout_forward(const DropoutParams& p, const DropoutForwardArgs& a);
void dropout_backward(const DropoutParams& p, const DropoutBackwardArgs& a);
// The mask a training forward (p.active()) saves, drawn from `streams` (B of them, advanced) as
// dropout_forward draws it, into host memory of x's layout (numel() floats): the CUDA op draws
// its masks here, so a model's mask is the same on either device.
void dropout_draw_mask(const DropoutParams& p, std::span<RngStream> streams, float* mask);
}  // namespace cpu

// Every tensor in device memory (fused_ops/cuda/dropout.cpp; defined only in a build with
// -DHFTA_CUDA=ON): the mask of a training forward is drawn on the host (cpu::dropout_draw_mask)
// into pinned memory and copied to saved.mask on the calling thread's stream, then one kernel
// applies it; backward is one kernel. Returns without waiting for the stream.
namespace cuda {
void dropout_forward(const DropoutParams& p, const DropoutForwardArgs& a);
void dropout_backward(const DropoutParams& p, const DropoutBackwardArgs& a);
}  // namespace cuda

}  // namespace hfta
