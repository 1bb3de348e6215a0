// Fused linear: B independent y_b = x_b W_b + bias_b in one call.
//
//   x       [B, N, F_in]      ([N, F_in] when shared_input: one minibatch feeds all B models)
//   weight  [B, F_in, F_out]  (input-major so y = x W is a plain row-major GEMM per model)
//   bias    [B, F_out]        (empty view when bias = false)
//   y       [B, N, F_out]
// Backward: dx is written (=), or added to (+=) with accumulate_dx; when shared_input, the
// gradient put into dx is the sum over models of x's gradient (the shared input feeds every
// model). dweight and dbias accumulate (+=), or with accumulate_dparams = false are written (=)
// (a step's first gradient: no zeroing pass before it, no read of the old values on the CPU). Any
// gradient may be an empty view to skip it.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace hfta {

struct LinearParams {
  int64_t B = 1;
  int64_t N = 1;
  int64_t in_features = 1;
  int64_t out_features = 1;
  bool bias = true;
  bool shared_input = false;

  Shape x_shape() const { return shared_input ? Shape{N, in_features} : Shape{B, N, in_features}; }
  Shape weight_shape() const { return {B, in_features, out_features}; }
  Shape bias_shape() const { return {B, out_features}; }
  Shape y_shape() const { return {B, N, out_features}; }
  // Forward multiply-adds x2, over all B models.
  double forward_flops() const { return 2.0 * B * N * in_features * out_features; }
};

// The tensors of one call, by name (call with designated initializers:
// linear_forward(p, {.x = x, .weight = w, .bias = b, .y = y})).
struct LinearForwardArgs {
  TensorView x{}, weight{}, bias{}, y{};
};
struct LinearBackwardArgs {
  TensorView x{}, weight{}, dy{};       // inputs
  TensorView dx{}, dweight{}, dbias{};  // outputs; an empty view = not wanted
  bool accumulate_dx = false;           // dx += gradient instead of dx = gradient
  bool accumulate_dparams = true;       // false: dweight = gradient, dbias = gradient
};

// Throws hfta::Error when a size is not positive or a tensor does not match its shape above.
void check_linear(const LinearParams& p, const LinearForwardArgs& a);
void check_linear_backward(const LinearParams& p, const LinearBackwardArgs& a);

void linear_forward(const LinearParams& p, const LinearForwardArgs& a);
void linear_backward(const LinearParams& p, const LinearBackwardArgs& a);

namespace ref {
void linear_forward(const LinearParams& p, const LinearForwardArgs& a);
void linear_backward(const LinearParams& p, const LinearBackwardArgs& a);
}  // namespace ref

namespace cpu {
void linear_forward(const LinearParams& p, const LinearForwardArgs& a);
void linear_backward(const LinearParams& p, const LinearBackwardArgs& a);
}  // namespace cpu

// Every tensor in device memory (fused_ops/cuda/linear.cu; defined only in a build with
// -DHFTA_CUDA=ON). Runs on the calling thread's stream (backend/cuda/runtime.h) and returns
// without waiting for it.
namespace cuda {
void linear_forward(const LinearParams& p, const LinearForwardArgs& a);
void linear_backward(const LinearParams& p, const LinearBackwardArgs& a);
}  // namespace cuda

}  // namespace hfta
