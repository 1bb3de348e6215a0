// The CUDA activations' per-element arithmetic (fused_ops/activation.h's contract), written once
// for the kernels (fused_ops/cuda/activation_kernels.cu) and the host test
// (tests/cuda/test_cuda_activation.cpp): the CPU op's float operations in its order
// (fused_ops/cpu/activation.cpp), selects where it selects, products through rounded_product so
// that nvcc contracts nothing the CPU does not, divisions as divisions. The CPU and the device
// therefore give the same bits, NaN and the kinks included.
// Tanh, sigmoid and GELU are the exception: the CPU runs oneDNN's eltwise polynomials, whose bits
// no formula of ours reproduces, so these use accurate libm formulas instead (CUDA's libdevice on
// the device, the host's libm in the mirror) and agree with the CPU and the reference within a
// few ulp, not bit for bit:
//   tanh:     y = tanhf(x);                              dx = fmaf(-y, y, 1) * dy     (from y)
//   sigmoid:  e = expf(-|x|), y = 1/(1+e) or e/(1+e);    dx = fmaf(-y, y, y) * dy     (from y)
//   GELU:     y = 0.5 x erfc(-x/sqrt 2) (PyTorch's exact, erf-based GELU: 1 + erf(z) is
//             erfc(-z), which keeps its relative precision where 1 + erf(z) cancels, x < -3);
//             dx = (Phi(x) + x phi(x)) dy, phi(x) = exp(-x^2/2)/sqrt(2 pi)          (from x)
// The derivatives are fused_ops/ref/activation.cpp's (1 - y^2, y (1 - y), Phi + x phi); the
// fmaf forms round 1 - y^2 and y - y^2 once, where (1 - y*y) would lose the digits of y*y near
// |y| = 1. CUDA documents tanhf and expf within 2 ulp and erfcf within 4 ulp; the tests' bounds
// (tests/cuda/test_cuda_activation.cpp) assume 4 ulp for every call, device or host.
// No project header but backend/cuda/host_device.h (nvcc compiles this in C++17).
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::activation_math {

// The kinds with a kernel; ActivationKind's (fused_ops/activation.h) map onto these
// (fused_ops/cuda/activation.cpp), which the .cu files cannot include.
enum Kind : int {
  kRelu = 0,
  kLeakyRelu = 1,
  kRelu6 = 2,
  kHardswish = 3,
  kHardsigmoid = 4,
  kTanh = 5,
  kSigmoid = 6,
  kGelu = 7
};

// float(1/sqrt(2)) and float(1/sqrt(2 pi)).
inline constexpr float kInvSqrt2 = 0.70710678118654752440f;
inline constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

// sigmoid(v) from e = exp(-|v|), which neither overflows nor loses v's sign; NaN stays NaN.
HFTA_HOST_DEVICE inline float sigmoid_value(float v) {
  const float e = exp_f(-(v < 0.0f ? -v : v)), d = 1.0f + e;
  return v >= 0.0f ? 1.0f / d : e / d;
}

// Phi(v) = 0.5 erfc(-v / sqrt 2), the normal CDF.
HFTA_HOST_DEVICE inline float normal_cdf(float v) {
  return 0.5f * erfc_f(-rounded_product(v, kInvSqrt2));
}

// y = f(x). `v < 0` and `6 < t` are false for NaN, which passes through.
HFTA_HOST_DEVICE inline float forward_value(int kind, float slope, float v) {
  switch (kind) {
    case kLeakyRelu: {
      const float scaled = rounded_product(slope, v);
      return v < 0.0f ? scaled : v;
    }
    case kRelu6: {
      const float low = v < 0.0f ? 0.0f : v;
      return v > 6.0f ? 6.0f : low;
    }
    case kHardswish:
    case kHardsigmoid: {
      const float t = v + 3.0f, low = t < 0.0f ? 0.0f : t, r = 6.0f < low ? 6.0f : low;
      return kind == kHardswish ? rounded_product(v, r) / 6.0f : r / 6.0f;
    }
    case kTanh:
      return tanh_f(v);
    case kSigmoid:
      return sigmoid_value(v);
    case kGelu:
      return rounded_product(v, normal_cdf(v));
    default:  // ReLU selects 0, so -inf gives 0
      return v < 0.0f ? 0.0f : v;
  }
}

// The gradient f'(.) * g from `v`: the output y for ReLU, ReLU6, tanh, sigmoid and LeakyReLU
// with slope >= 0, the input x for GELU, Hardswish, Hardsigmoid and LeakyReLU with slope < 0
// (ActivationParams::backward_reads_output).
HFTA_HOST_DEVICE inline float backward_value(int kind, float slope, float v, float g) {
  switch (kind) {
    case kLeakyRelu: {
      const float scaled = rounded_product(slope, g);
      return v > 0.0f ? g : scaled;
    }
    case kRelu6:
      return v > 0.0f && v < 6.0f ? g : 0.0f;
    case kHardswish: {
      const float mid = rounded_product(g, v / 3.0f + 0.5f), high = v >= 3.0f ? g : mid;
      return v < -3.0f ? 0.0f : high;
    }
    case kHardsigmoid: {
      const float inside = rounded_product(g, 1.0f / 6.0f);
      return v > -3.0f && v < 3.0f ? inside : 0.0f;
    }
    case kTanh:
      return rounded_product(fma_rn(-v, v, 1.0f), g);
    case kSigmoid:
      return rounded_product(fma_rn(-v, v, v), g);
    case kGelu: {
      const float pdf = rounded_product(kInvSqrt2Pi, exp_f(-0.5f * rounded_product(v, v)));
      return rounded_product(fma_rn(v, pdf, normal_cdf(v)), g);
    }
    default:
      return v > 0.0f ? g : 0.0f;
  }
}

// y[i] = f(x[i]); y may be x.
HFTA_HOST_DEVICE inline void activation_forward_at(int kind, float slope, const float* x, float* y,
                                                   int64_t i) {
  y[i] = forward_value(kind, slope, x[i]);
}

// dx[i] = f' * dy[i], or dx[i] += f' * dy[i] (accumulate); `v` is what backward reads (see
// backward_value); dx may be dy unless accumulating.
HFTA_HOST_DEVICE inline void activation_backward_at(int kind, float slope, const float* v,
                                                    const float* dy, float* dx, bool accumulate,
                                                    int64_t i) {
  const float d = backward_value(kind, slope, v[i], dy[i]);
  dx[i] = accumulate ? dx[i] + d : d;
}

}  // namespace hfta::activation_math
