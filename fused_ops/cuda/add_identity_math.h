// The CUDA "plus the identity"'s per-element arithmetic (fused_ops/add_identity.h), written once
// for the kernel (fused_ops/cuda/add_identity_kernels.cu) and the host test
// (tests/cuda/test_cuda_add_identity.cpp): the CPU op's one add per element (of 1 on the
// diagonal, 0 elsewhere), so the bits are the CPU's, -0 + 0 = +0 included. No project header but
// backend/cuda/host_device.h: nvcc compiles this in C++17.
#pragma once

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::add_identity_math {

// y[i] = x[i] + (1 if element i of its k x k matrix is on the diagonal, else 0); y may be x.
HFTA_HOST_DEVICE inline void add_identity_at(const float* x, float* y, int64_t k, int64_t i) {
  const int64_t e = i % (k * k);
  y[i] = x[i] + (e / k == e % k ? 1.0f : 0.0f);
}

}  // namespace hfta::add_identity_math
