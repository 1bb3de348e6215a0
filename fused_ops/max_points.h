// Fused max over points: PointNet's symmetric function (the global feature), for B models in one
// call.
//
//   x       [B, N, L, C]  model b, sample s: L points of C channels (the rows layout [B, N*L, C])
//   y       [B, N, C]     y[b, s, c] = max over l of x[b, s, l, c]  (torch.max(x, dim=points))
//   argmax  [B, N, C]     int32: the point l each maximum came from
// Ties: the first maximum (lowest l) wins. NaN propagates as in torch.max: a NaN among a
// channel's points gives y = NaN, and argmax is the first NaN.
// Backward: dx is dy scattered to the argmax points, zeros elsewhere; dx is written (=), or dy is
// added at the argmax points with accumulate_dx.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace hfta {

struct MaxOverPointsParams {
  int64_t B = 1;
  int64_t N = 1;  // samples per model
  int64_t L = 1;  // points per sample: the reduced dimension
  int64_t C = 1;  // channels

  Shape x_shape() const { return {B, N, L, C}; }
  Shape y_shape() const { return {B, N, C}; }
  Shape argmax_shape() const { return y_shape(); }
  // One compare per input element, over all B models.
  double forward_flops() const { return double(B) * N * L * C; }
};

// What backward needs: argmax, filled by forward (may be an empty view in a forward that no
// backward follows, e.g. evaluation).
struct MaxOverPointsSaved {
  IndexView argmax;
};

// The tensors of one call, by name (call with designated initializers:
// max_over_points_forward(p, {.x = x, .saved = {.argmax = argmax}, .y = y})).
struct MaxOverPointsForwardArgs {
  TensorView x{};
  MaxOverPointsSaved saved{};  // output for backward
  TensorView y{};
};
struct MaxOverPointsBackwardArgs {
  MaxOverPointsSaved saved{};  // what forward saved (required)
  TensorView dy{};
  TensorView dx{};             // output
  bool accumulate_dx = false;  // dx += gradient instead of dx = gradient
};

// Throws hfta::Error when a size is not positive, a tensor does not match its shape above, or the
// tensors are on different devices.
void check_max_over_points(const MaxOverPointsParams& p, const MaxOverPointsForwardArgs& a);
void check_max_over_points_backward(const MaxOverPointsParams& p,
                                    const MaxOverPointsBackwardArgs& a);

void max_over_points_forward(const MaxOverPointsParams& p, const MaxOverPointsForwardArgs& a);
void max_over_points_backward(const MaxOverPointsParams& p, const MaxOverPointsBackwardArgs& a);

namespace ref {
void max_over_points_forward(const MaxOverPointsParams& p, const MaxOverPointsForwardArgs& a);
void max_over_points_backward(const MaxOverPointsParams& p, const MaxOverPointsBackwardArgs& a);
}  // namespace ref

namespace cpu {
void max_over_points_forward(const MaxOverPointsParams& p, const MaxOverPointsForwardArgs& a);
void max_over_points_backward(const MaxOverPointsParams& p, const MaxOverPointsBackwardArgs& a);
}  // namespace cpu

// Every tensor in device memory (fused_ops/cuda/max_points.cpp; defined only in a build with
// -DHFTA_CUDA=ON). Runs on the calling thread's stream and returns without waiting for it.
namespace cuda {
void max_over_points_forward(const MaxOverPointsParams& p, const MaxOverPointsForwardArgs& a);
void max_over_points_backward(const MaxOverPointsParams& p, const MaxOverPointsBackwardArgs& a);
}  // namespace cuda

}  // namespace hfta
