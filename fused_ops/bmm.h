// Fused per-sample matrix products: PointNet's input and feature transforms (the T-Net's k x k
// matrix applied to each sample's points), for B models in one call.
//
//   x   [B, N, L, K]   model b, sample s: L points of K features (the rows layout [B, N*L, K])
//   t   [B, N, K, M]   one K x M matrix per (model, sample), e.g. the T-Net's output
//   y   [B, N, L, M]   y[b, s] = x[b, s] @ t[b, s]  (torch.bmm(x, t) per model)
// Backward: dx = dy t^T and dt = x^T dy. t is an activation (the T-Net computes it), so both are
// input gradients: each is written (=), or added to (+=) with its own flag (accumulate_dx,
// accumulate_dt), and either may be an empty view to skip it.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace hfta {

struct BmmParams {
  int64_t B = 1;
  int64_t N = 1;  // samples per model: one product each
  int64_t L = 1;  // rows of each x (points)
  int64_t K = 1;  // columns of x = rows of t
  int64_t M = 1;  // columns of t and y

  Shape x_shape() const { return {B, N, L, K}; }
  Shape t_shape() const { return {B, N, K, M}; }
  Shape y_shape() const { return {B, N, L, M}; }
  // Forward multiply-adds x2, over all B models.
  double forward_flops() const { return 2.0 * B * N * L * K * M; }
};

// The tensors of one call, by name (call with designated initializers:
// bmm_forward(p, {.x = x, .t = t, .y = y})).
struct BmmForwardArgs {
  TensorView x{}, t{}, y{};
};
struct BmmBackwardArgs {
  TensorView x{}, t{}, dy{};   // inputs
  TensorView dx{}, dt{};       // outputs; an empty view = not wanted
  bool accumulate_dx = false;  // dx += gradient instead of dx = gradient
  bool accumulate_dt = false;  // dt += gradient instead of dt = gradient
};

// Throws hfta::Error when a size is not positive, a tensor does not match its shape above, or the
// tensors are on different devices.
void check_bmm(const BmmParams& p, const BmmForwardArgs& a);
void check_bmm_backward(const BmmParams& p, const BmmBackwardArgs& a);

void bmm_forward(const BmmParams& p, const BmmForwardArgs& a);
void bmm_backward(const BmmParams& p, const BmmBackwardArgs& a);

namespace ref {
void bmm_forward(const BmmParams& p, const BmmForwardArgs& a);
void bmm_backward(const BmmParams& p, const BmmBackwardArgs& a);
}  // namespace ref

namespace cpu {
void bmm_forward(const BmmParams& p, const BmmForwardArgs& a);
void bmm_backward(const BmmParams& p, const BmmBackwardArgs& a);
}  // namespace cpu

// Every tensor in device memory (fused_ops/cuda/bmm.cpp; defined only in a build with
// -DHFTA_CUDA=ON). Runs on the calling thread's stream and returns without waiting for it.
namespace cuda {
void bmm_forward(const BmmParams& p, const BmmForwardArgs& a);
void bmm_backward(const BmmParams& p, const BmmBackwardArgs& a);
}  // namespace cuda

}  // namespace hfta
