// Fused elementwise activations: ReLU, LeakyReLU, GELU (exact erf form), Tanh, Sigmoid, ReLU6,
// Hardswish and Hardsigmoid (MobileNetV3).
//
// Elementwise, so B and the layout do not matter: x may be any tensor ([B, N, F],
// [N, B*C, H, W], ...), and every element of model b is transformed exactly as it would be alone.
//
//   x, y, dy, dx   one shape, any rank
// Forward:  y = f(x). y may be the same buffer as x (in place).
// Backward: dx = f'(.) * dy, written (=), or added (dx += f'(.) * dy) with accumulate_dx. dx may be
// the same buffer as dy (in place) unless accumulating.
// Backward reads the output y or the input x, never both (ActivationParams::backward_reads_output):
//   from y: kRelu, kRelu6 (min(max(x, 0), 6): dx = dy where 0 < y < 6), kTanh, kSigmoid, and
//   kLeakyRelu with negative_slope >= 0. x may be an empty
//           view, so a model can run the forward in place and keep only y.
//   from x: kGelu, and kLeakyRelu with negative_slope < 0 (y does not determine the sign of x),
//           kHardswish (not monotonic on [-3, -1.5]) and kHardsigmoid (its float output rounds
//           to 1 just below x = 3, where PyTorch's gradient is still 1/6).
//           y may be an empty view; do not run the forward in place when backward is needed.
// Hardswish and Hardsigmoid run PyTorch's float arithmetic, operation for operation, so that
// values and gradients equal PyTorch's bit for bit, kinks included:
//   hardswish(x)    = x * min(max(x + 3, 0), 6) / 6
//   hardswish'(x)   = 0 for x < -3, x / 3 + 0.5 for -3 <= x < 3 (-0.5 at -3), 1 for x >= 3,
//                     NaN for NaN: PyTorch 1.13's vectorized kernel, which computes every element
//                     but a tensor's last few (its scalar tail gives 1.5 at 3 and 1 for NaN)
//   hardsigmoid(x)  = min(max(x + 3, 0), 6) / 6
//   hardsigmoid'(x) = 1/6 (the float 1.0f / 6) for -3 < x < 3, else 0
// NaN inputs give NaN outputs (as in PyTorch), so a diverged model shows up in its loss.
#pragma once

#include <cstdint>
#include <optional>

#include "core/tensor.h"

namespace hfta {

enum class ActivationKind {
  kRelu,
  kLeakyRelu,
  kGelu,
  kTanh,
  kSigmoid,
  kRelu6,
  kHardswish,
  kHardsigmoid
};

// "relu", "leaky_relu", "gelu", "tanh", "sigmoid", "relu6", "hardswish", "hardsigmoid".
const char* activation_name(ActivationKind kind);

struct ActivationParams {
  ActivationKind kind = ActivationKind::kRelu;
  float negative_slope = 0.01f;  // kLeakyRelu only: y = negative_slope * x for x < 0

  // True when backward computes the derivative from y, false when from x (see the top of file).
  bool backward_reads_output() const {
    switch (kind) {
      case ActivationKind::kGelu:
      case ActivationKind::kHardswish:
      case ActivationKind::kHardsigmoid:
        return false;
      case ActivationKind::kLeakyRelu:
        return negative_slope >= 0.0f;
      default:
        return true;
    }
  }
  // One FLOP per element, as profilers count activations: they are memory-bound, and the
  // estimate only serves as a denominator in benchmarks.
  double forward_flops(int64_t numel) const { return static_cast<double>(numel); }
};

// The tensors of one call, by name (call with designated initializers:
// activation_backward(p, {.y = y, .dy = dy, .dx = dx})).
struct ActivationForwardArgs {
  TensorView x{}, y{};
};
struct ActivationBackwardArgs {
  TensorView x{}, y{};         // what backward reads (see the top of this file)
  TensorView dy{};             // input
  TensorView dx{};             // output
  bool accumulate_dx = false;  // dx += gradient instead of dx = gradient
};

// Whether a BatchNorm (fused_ops/batchnorm2d.h, batchnorm1d.h) can apply `a` in its own passes:
// ReLU, ReLU6 and LeakyReLU with a finite slope >= 0, whose gradient a mask of the input gives.
bool batchnorm_fuses(const ActivationParams& a);
// Throws hfta::Error when a BatchNorm `op` with a fused activation would run on a device: the
// CUDA kernels take none (a device net keeps its activations as ops of their own).
void check_fused_activation_device(const std::optional<ActivationParams>& activation, Device device,
                                   const char* op);

// Throws hfta::Error when negative_slope is not finite or a tensor is missing or differs in shape
// from x (forward) or from dy (backward).
void check_activation(const ActivationParams& p, const ActivationForwardArgs& a);
void check_activation_backward(const ActivationParams& p, const ActivationBackwardArgs& a);

void activation_forward(const ActivationParams& p, const ActivationForwardArgs& a);
void activation_backward(const ActivationParams& p, const ActivationBackwardArgs& a);

namespace ref {
void activation_forward(const ActivationParams& p, const ActivationForwardArgs& a);
void activation_backward(const ActivationParams& p, const ActivationBackwardArgs& a);
}  // namespace ref

namespace cpu {
void activation_forward(const ActivationParams& p, const ActivationForwardArgs& a);
void activation_backward(const ActivationParams& p, const ActivationBackwardArgs& a);
}  // namespace cpu

// Every tensor in device memory (fused_ops/cuda/activation.cpp; defined only in a build with
// -DHFTA_CUDA=ON), every kind: tanh, sigmoid and GELU within a few ulp of the CPU's (libm
// formulas against oneDNN's polynomials), the others bit for bit. Runs on the calling thread's
// stream (backend/cuda/runtime.h) and returns without waiting for it.
namespace cuda {
void activation_forward(const ActivationParams& p, const ActivationForwardArgs& a);
void activation_backward(const ActivationParams& p, const ActivationBackwardArgs& a);
}  // namespace cuda

}  // namespace hfta
