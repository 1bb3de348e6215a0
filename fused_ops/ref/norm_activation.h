// The reference BatchNorms' fused activation (fused_ops/batchnorm2d.h, batchnorm1d.h): the
// activation op's reference itself, forward on the float the normalization rounds to and
// backward from the output, so a fused reference is the two reference ops one after the other.
#pragma once

#include <optional>

#include "fused_ops/activation.h"

namespace hfta::ref {

inline float activate(const std::optional<ActivationParams>& act, float z) {
  if (!act) return z;
  float y = 0.0f;
  hfta::ref::activation_forward(*act,
                                {.x = TensorView(&z, Shape{1}), .y = TensorView(&y, Shape{1})});
  return y;
}

// The gradient of the activation's input from its output's: dy itself without an activation.
inline float gradient_through(const std::optional<ActivationParams>& act, const TensorView& y,
                              const TensorView& dy, int64_t at) {
  if (!act) return dy.data[at];
  float out = y.data[at], grad = dy.data[at], dz = 0.0f;
  hfta::ref::activation_backward(*act, {.y = TensorView(&out, Shape{1}),
                                        .dy = TensorView(&grad, Shape{1}),
                                        .dx = TensorView(&dz, Shape{1})});
  return dz;
}

}  // namespace hfta::ref
