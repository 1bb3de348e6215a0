// The CUDA concatenation's index map (fused_ops/concat.h), written once for the kernels
// (fused_ops/cuda/concat_kernels.cu) and the host test (tests/cuda/test_cuda_concat.cpp). Both
// layouts are "outer" blocks of y, each the inputs' runs one after another, as the CPU op
// (fused_ops/cpu/concat.cpp) sees them: kRows block (b, r), input i's run its C_i features;
// kChannels block (n, b), input i's run its C_i*S channel elements. One input at a time: its
// element e = o*run + t is y's element o*y_run + offset + t. Copies and at most one add, so the
// bits are the CPU's. No project header but backend/cuda/host_device.h (nvcc compiles it in C++17).
#pragma once

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::concat_math {

// One input's place in y: its run per outer block, y's run, and where its run starts in y's.
struct Slice {
  int64_t run = 1, y_run = 1, offset = 0;
};

HFTA_HOST_DEVICE inline int64_t y_index(const Slice& s, int64_t e) {
  return (e / s.run) * s.y_run + s.offset + e % s.run;
}

// Input element e: y's element is a copy of it.
HFTA_HOST_DEVICE inline void forward_at(const float* x, float* y, const Slice& s, int64_t e) {
  y[y_index(s, e)] = x[e];
}

// Input element e of the gradient: dy's element, written or added (each dx element once).
HFTA_HOST_DEVICE inline void backward_at(const float* dy, float* dx, const Slice& s,
                                         bool accumulate, int64_t e) {
  const float g = dy[y_index(s, e)];
  dx[e] = accumulate ? dx[e] + g : g;
}

}  // namespace hfta::concat_math
