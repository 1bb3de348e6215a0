// The activations a CPU BatchNorm kernel applies in its own passes (fused_ops/batchnorm2d.h,
// fused_ops/batchnorm1d.h): forward's values and backward's gradients element for element as
// fused_ops/cpu/activation.cpp computes them, the gradient decided on the activation's input.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "fused_ops/activation.h"

namespace hfta::cpu {

// The fused activation (fused_ops/batchnorm2d.h, batchnorm1d.h) as a compile-time kind, so that
// the loops stay free of branches.
enum class Fused { kNone, kRelu, kRelu6, kLeakyRelu };

// `pick ? a : b` as integer masks. Written as a ?: select, GCC vectorizes it in the long rows but
// compiles the small planes' rows (a 1x1 plane's row is one element) to a compare and a branch,
// which mispredicts on a convolution's output signs: the fused backward then ran 3x slower than
// BatchNorm and ReLU6 apart on MobileNetV2's 1x1 planes.
inline float pick_either(bool pick, float a, float b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(pick);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & mask) |
                              (std::bit_cast<uint32_t>(b) & ~mask));
}

// The activation op's values (fused_ops/cpu/activation.cpp): `z < 0` and `z > 6` are false for
// NaN, which passes through.
template <Fused kAct>
inline float activate(float z, float slope) {
  if constexpr (kAct == Fused::kRelu) {
    return pick_either(z < 0.0f, 0.0f, z);
  } else if constexpr (kAct == Fused::kRelu6) {
    return pick_either(z > 6.0f, 6.0f, pick_either(z < 0.0f, 0.0f, z));
  } else if constexpr (kAct == Fused::kLeakyRelu) {
    return pick_either(z < 0.0f, slope * z, z);
  } else {
    return z;
  }
}

// The gradient of the activation's input from that of its output g, decided on the activation's
// input z: y > 0 exactly when z > 0, 0 < y < 6 exactly when 0 < z < 6, and NaN fails both, so
// this is the activation's backward from its output, element for element (0, not -0, where it
// stops the gradient).
template <Fused kAct>
inline float gradient_through(float z, float g, float slope) {
  if constexpr (kAct == Fused::kRelu) {
    return pick_either(z > 0.0f, g, 0.0f);
  } else if constexpr (kAct == Fused::kRelu6) {
    return pick_either((z > 0.0f) & (z < 6.0f), g, 0.0f);
  } else if constexpr (kAct == Fused::kLeakyRelu) {
    return pick_either(z > 0.0f, g, slope * g);
  } else {
    return g;
  }
}

// Calls body(std::integral_constant<Fused, kind>) with the kind of `activation`.
template <typename Body>
void with_activation(const std::optional<ActivationParams>& activation, Body&& body) {
  if (!activation) return body(std::integral_constant<Fused, Fused::kNone>());
  switch (activation->kind) {
    case ActivationKind::kRelu6:
      return body(std::integral_constant<Fused, Fused::kRelu6>());
    case ActivationKind::kLeakyRelu:
      // Slope 0 is ReLU, as the activation op runs it (0, not -0, below zero).
      if (activation->negative_slope != 0.0f)
        return body(std::integral_constant<Fused, Fused::kLeakyRelu>());
      [[fallthrough]];
    default:  // kRelu (batchnorm_fuses admits no other)
      return body(std::integral_constant<Fused, Fused::kRelu>());
  }
}

}  // namespace hfta::cpu
