// Fused concatenation along the feature/channel dimension: torch.cat(dim=1) per model, for B
// models in one call (PointNet segmentation joins per-point features with the repeated global
// feature this way).
//
//   kRows      x_i [B, R, C_i]     -> y [B, R, sum C_i]      y[b, r] = (x_0[b, r], x_1[b, r], ...)
//   kChannels  x_i [N, B*C_i, S]   -> y [N, B*(sum C_i), S]  model b's channels are those of
//              input 0, then those of input 1, ... (S: elements per channel, H*W or L)
// Backward splits dy into the inputs' gradients: dx_i is written (=), or added to (+=) with its
// own accumulate flag (accumulate_dx[i]); an empty dx_i is skipped. 1 to kMaxConcatInputs inputs.
#pragma once

#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace hfta {

inline constexpr int kMaxConcatInputs = 8;

enum class ConcatLayout { kRows, kChannels };

struct ConcatParams {
  ConcatLayout layout = ConcatLayout::kRows;
  int64_t B = 1;
  int64_t R = 1;                              // kRows: rows per model (unused for kChannels)
  int64_t N = 1;                              // kChannels: samples (unused for kRows)
  int64_t S = 1;                              // kChannels: elements per channel (unused for kRows)
  int inputs = 1;                             // how many of C (and of the args' x / dx) are used
  std::array<int64_t, kMaxConcatInputs> C{};  // features (kRows) or channels of each input

  int64_t total_C() const {
    int64_t t = 0;
    for (int i = 0; i < inputs; ++i) t += C[i];
    return t;
  }
  Shape input_shape(int i) const {
    return layout == ConcatLayout::kRows ? Shape{B, R, C[i]} : Shape{N, B * C[i], S};
  }
  Shape y_shape() const {
    return layout == ConcatLayout::kRows ? Shape{B, R, total_C()} : Shape{N, B * total_C(), S};
  }
  // A copy: no arithmetic (it moves y's elements once each way).
  double forward_flops() const { return 0.0; }
};

// The tensors of one call, by name (call with designated initializers:
// concat_forward(p, {.x = {a, b}, .y = y}),
// concat_backward(p, {.dy = dy, .dx = {da, db}, .accumulate_dx = {false, true}})).
struct ConcatForwardArgs {
  std::array<TensorView, kMaxConcatInputs> x{};  // x[0..inputs)
  TensorView y{};
};
struct ConcatBackwardArgs {
  TensorView dy{};
  std::array<TensorView, kMaxConcatInputs> dx{};       // outputs; an empty view = not wanted
  std::array<bool, kMaxConcatInputs> accumulate_dx{};  // dx[i] += gradient instead of =
};

// Throws hfta::Error when the input count is not in [1, kMaxConcatInputs], a size is not
// positive, a tensor does not match its shape above, a tensor is given past `inputs`, or the
// tensors of one call are on different devices.
void check_concat(const ConcatParams& p, const ConcatForwardArgs& a);
void check_concat_backward(const ConcatParams& p, const ConcatBackwardArgs& a);

void concat_forward(const ConcatParams& p, const ConcatForwardArgs& a);
void concat_backward(const ConcatParams& p, const ConcatBackwardArgs& a);

namespace ref {
void concat_forward(const ConcatParams& p, const ConcatForwardArgs& a);
void concat_backward(const ConcatParams& p, const ConcatBackwardArgs& a);
}  // namespace ref

namespace cpu {
void concat_forward(const ConcatParams& p, const ConcatForwardArgs& a);
void concat_backward(const ConcatParams& p, const ConcatBackwardArgs& a);
}  // namespace cpu

// Every tensor in device memory (fused_ops/cuda/concat.cpp; defined only in a build with
// -DHFTA_CUDA=ON): the CPU op's bits. Runs on the calling thread's stream and returns at once.
namespace cuda {
void concat_forward(const ConcatParams& p, const ConcatForwardArgs& a);
void concat_backward(const ConcatParams& p, const ConcatBackwardArgs& a);
}  // namespace cuda

}  // namespace hfta
