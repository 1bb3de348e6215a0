#include "fused_ops/activation.h"

#include <algorithm>
#include <cmath>

namespace hfta {
namespace ref {

namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

double activate(const ActivationParams& p, double x) {
  switch (p.kind) {
    case ActivationKind::kRelu:
      return x < 0.0 ? 0.0 : x;  // NaN stays NaN
    case ActivationKind::kLeakyRelu:
      return x < 0.0 ? p.negative_slope * x : x;
    case ActivationKind::kGelu:
      return 0.5 * x * (1.0 + std::erf(x * kInvSqrt2));
    case ActivationKind::kTanh:
      return std::tanh(x);
    case ActivationKind::kSigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case ActivationKind::kRelu6:
      return x < 0.0 ? 0.0 : (x > 6.0 ? 6.0 : x);  // NaN stays NaN
    case ActivationKind::kHardswish:
    case ActivationKind::kHardsigmoid:
      break;  // in float, below
  }
  return x;
}

// f'(x) written through the output y where backward_reads_output(), through x otherwise.
double derivative(const ActivationParams& p, double x, double y) {
  switch (p.kind) {
    case ActivationKind::kRelu:
      return y > 0.0 ? 1.0 : 0.0;
    case ActivationKind::kLeakyRelu:
      return (p.backward_reads_output() ? y : x) > 0.0 ? 1.0 : p.negative_slope;
    case ActivationKind::kGelu:
      return 0.5 * (1.0 + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
    case ActivationKind::kTanh:
      return 1.0 - y * y;
    case ActivationKind::kSigmoid:
      return y * (1.0 - y);
    case ActivationKind::kRelu6:
      return y > 0.0 && y < 6.0 ? 1.0 : 0.0;
    case ActivationKind::kHardswish:
    case ActivationKind::kHardsigmoid:
      break;  // in float, below
  }
  return 1.0;
}

// Hardswish and Hardsigmoid: PyTorch's float operations one by one (fused_ops/activation.h), so
// the specification is PyTorch's rounding rather than the exact function rounded once. No FMA
// contraction: dx + dy * f'(x) must round the product first, as PyTorch's separate ops do.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
bool is_hard(ActivationKind kind) {
  return kind == ActivationKind::kHardswish || kind == ActivationKind::kHardsigmoid;
}

// relu6(x + 3) written with std::max/std::min in PyTorch's argument order, so NaN stays NaN.
float relu6_shifted(float x) { return std::min(std::max(x + 3.0f, 0.0f), 6.0f); }

float hard_forward(ActivationKind kind, float x) {
  if (kind == ActivationKind::kHardswish) return x * relu6_shifted(x) / 6.0f;
  return relu6_shifted(x) / 6.0f;
}

float hard_gradient(ActivationKind kind, float x, float dy) {
  if (kind == ActivationKind::kHardswish) {
    if (x < -3.0f) return 0.0f;
    if (x >= 3.0f) return dy;
    return dy * (x / 3.0f + 0.5f);  // NaN for NaN
  }
  return x > -3.0f && x < 3.0f ? dy * (1.0f / 6.0f) : 0.0f;
}

void hard_backward(ActivationKind kind, const ActivationBackwardArgs& a) {
  for (int64_t i = 0; i < a.dy.numel(); ++i) {
    const float grad = hard_gradient(kind, a.x.data[i], a.dy.data[i]);
    a.dx.data[i] = a.accumulate_dx ? a.dx.data[i] + grad : grad;
  }
}
#pragma GCC pop_options

}  // namespace

// The specification: f applied to every element in double, rounded once.
void activation_forward(const ActivationParams& p, const ActivationForwardArgs& a) {
  check_activation(p, a);
  const TensorView &x = a.x, &y = a.y;
  if (is_hard(p.kind)) {
    for (int64_t i = 0; i < x.numel(); ++i) y.data[i] = hard_forward(p.kind, x.data[i]);
    return;
  }
  for (int64_t i = 0; i < x.numel(); ++i) y.data[i] = static_cast<float>(activate(p, x.data[i]));
}

void activation_backward(const ActivationParams& p, const ActivationBackwardArgs& a) {
  check_activation_backward(p, a);
  if (is_hard(p.kind)) return hard_backward(p.kind, a);
  const TensorView &x = a.x, &y = a.y, &dy = a.dy, &dx = a.dx;
  const bool from_y = p.backward_reads_output();
  for (int64_t i = 0; i < dy.numel(); ++i) {
    double xi = from_y ? 0.0 : x.data[i], yi = from_y ? y.data[i] : 0.0;
    const float grad = static_cast<float>(derivative(p, xi, yi) * dy.data[i]);
    dx.data[i] = a.accumulate_dx ? dx.data[i] + grad : grad;
  }
}

}  // namespace ref
}  // namespace hfta
