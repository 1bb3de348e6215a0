// Fused repeat over points: PointNet segmentation copies each sample's global feature to every
// one of its points (torch's x.view(n, C, 1).repeat(1, 1, L) per model, here in the rows
// layout), for B models in one call.
//
//   x   [B, N, C]      one global feature per (model, sample)
//   y   [B, N, L, C]   y[b, s, l] = x[b, s] for every point l (the rows layout [B, N*L, C])
// Backward: dx[b, s] = sum over l of dy[b, s, l], accumulated in double and rounded once; dx is
// written (=), or the rounded sum is added to it (+=) with accumulate_dx.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace hfta {

struct RepeatPointsParams {
  int64_t B = 1;
  int64_t N = 1;  // samples per model
  int64_t L = 1;  // points per sample: copies of each feature
  int64_t C = 1;  // channels

  Shape x_shape() const { return {B, N, C}; }
  Shape y_shape() const { return {B, N, L, C}; }
  // A copy: no arithmetic forward (backward adds B*N*L*C values).
  double forward_flops() const { return 0.0; }
};

// The tensors of one call, by name (call with designated initializers:
// repeat_points_forward(p, {.x = x, .y = y})).
struct RepeatPointsForwardArgs {
  TensorView x{}, y{};
};
struct RepeatPointsBackwardArgs {
  TensorView dy{};
  TensorView dx{};             // output
  bool accumulate_dx = false;  // dx += gradient instead of dx = gradient
};

// Throws hfta::Error when a size is not positive, a tensor does not match its shape above, or
// the tensors of one call are on different devices.
void check_repeat_points(const RepeatPointsParams& p, const RepeatPointsForwardArgs& a);
void check_repeat_points_backward(const RepeatPointsParams& p, const RepeatPointsBackwardArgs& a);

void repeat_points_forward(const RepeatPointsParams& p, const RepeatPointsForwardArgs& a);
void repeat_points_backward(const RepeatPointsParams& p, const RepeatPointsBackwardArgs& a);

namespace ref {
void repeat_points_forward(const RepeatPointsParams& p, const RepeatPointsForwardArgs& a);
void repeat_points_backward(const RepeatPointsParams& p, const RepeatPointsBackwardArgs& a);
}  // namespace ref

namespace cpu {
void repeat_points_forward(const RepeatPointsParams& p, const RepeatPointsForwardArgs& a);
void repeat_points_backward(const RepeatPointsParams& p, const RepeatPointsBackwardArgs& a);
}  // namespace cpu

// Every tensor in device memory (fused_ops/cuda/repeat_points.cpp; defined only in a build with
// -DHFTA_CUDA=ON): the CPU op's bits. Runs on the calling thread's stream and returns at once.
namespace cuda {
void repeat_points_forward(const RepeatPointsParams& p, const RepeatPointsForwardArgs& a);
void repeat_points_backward(const RepeatPointsParams& p, const RepeatPointsBackwardArgs& a);
}  // namespace cuda

}  // namespace hfta
