// The CUDA channel scaling's per-element and per-row arithmetic (fused_ops/scale_channels.h's
// contract), written once for the kernels (fused_ops/cuda/scale_channels_kernels.cu) and the host
// test (tests/cuda/test_cuda_scale_channels.cpp): the CPU op's (fused_ops/cpu/scale_channels.cpp)
// float products, rounded once each (rounded_product), and its scale gradient: a row's products in
// double over 8 lanes (element i into lane i % 8), the lanes added in its fixed tree. A product
// of two floats is exact in double, so an fma there changes nothing. Same bits as the CPU. No
// project header but backend/cuda/host_device.h (nvcc compiles this in C++17).
#pragma once

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::scale_channels_math {

// Element e of the [rows, hw] tensors: y[e] = x[e] * s[e / hw]; y may be x.
HFTA_HOST_DEVICE inline void forward_at(const float* x, const float* s, float* y, int64_t hw,
                                        int64_t e) {
  y[e] = rounded_product(x[e], s[e / hw]);
}

// dx[e] = dy[e] * s[e / hw], written or added; dx may be dy unless accumulating.
HFTA_HOST_DEVICE inline void dx_at(const float* dy, const float* s, float* dx, int64_t hw,
                                   bool accumulate, int64_t e) {
  const float g = rounded_product(dy[e], s[e / hw]);
  dx[e] = accumulate ? dx[e] + g : g;
}

// ds[r] = sum_i dy[r, i] * x[r, i], written or added.
HFTA_HOST_DEVICE inline void ds_at(const float* x, const float* dy, float* ds, int64_t hw,
                                   bool accumulate, int64_t r) {
  const float* xr = x + r * hw;
  const float* gr = dy + r * hw;
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < hw; ++i)
    lanes[i % 8] += static_cast<double>(gr[i]) * static_cast<double>(xr[i]);
  const double sum = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) +
                     ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
  const float g = static_cast<float>(sum);
  ds[r] = accumulate ? ds[r] + g : g;
}

}  // namespace hfta::scale_channels_math
