#include "fused_ops/activation.h"

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
  }
  return 1.0;
}

}  // namespace

// The specification: f applied to every element in double, rounded once.
void activation_forward(const ActivationParams& p, const ActivationForwardArgs& a) {
  check_activation(p, a);
  const TensorView &x = a.x, &y = a.y;
  for (int64_t i = 0; i < x.numel(); ++i) y.data[i] = static_cast<float>(activate(p, x.data[i]));
}

void activation_backward(const ActivationParams& p, const ActivationBackwardArgs& a) {
  check_activation_backward(p, a);
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
