// The CUDA activations' per-element arithmetic (fused_ops/activation.h's contract), written once
// for the kernels (fused_ops/cuda/activation_kernels.cu) and the host test
// (tests/cuda/test_cuda_activation.cpp): the CPU op's float operations in its order
// (fused_ops/cpu/activation.cpp), selects where it selects, products through rounded_product so
// that nvcc contracts nothing the CPU does not, divisions as divisions. The CPU and the device
// therefore give the same bits, NaN and the kinks included. GELU, tanh and sigmoid (oneDNN's
// polynomials on the CPU) have no kernel. No project header but backend/cuda/host_device.h (nvcc
// compiles this in C++17).
#pragma once

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::activation_math {

// The kinds with a kernel; ActivationKind's (fused_ops/activation.h) map onto these
// (fused_ops/cuda/activation.cpp), which the .cu files cannot include.
enum Kind : int { kRelu = 0, kLeakyRelu = 1, kRelu6 = 2, kHardswish = 3, kHardsigmoid = 4 };

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
    default:  // ReLU selects 0, so -inf gives 0
      return v < 0.0f ? 0.0f : v;
  }
}

// The gradient f'(.) * g from `v`: the output y for ReLU, ReLU6 and LeakyReLU with slope >= 0,
// the input x for Hardswish, Hardsigmoid and LeakyReLU with slope < 0
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
