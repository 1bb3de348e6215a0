// The CUDA token gather's arithmetic (fused_ops/gather_tokens.h), written once for the kernels
// (fused_ops/cuda/gather_tokens_kernels.cu), the op's host side (fused_ops/cuda/gather_tokens.cpp:
// the row groups) and the host test (tests/cuda/test_cuda_gather_tokens.cpp). Backward is a
// gather, not the CPU op's scatter: each dx element adds the gradients of the output rows that
// name its row, in increasing output row, onto 0 or onto dx, exactly the CPU op's float adds in
// its order, so the bits are the CPU's without atomics. The rows are grouped by input row on the
// host (a stable counting sort), where the op has them anyway to check them. No project header
// but backend/cuda/host_device.h (nvcc compiles this in C++17).
//
//   x, dx [B, R, D]   rows [K]   y, dy [B, K, D]
//   groups: starts [R + 1] then order [the rows that name an input row], one int32 block; input
//   row i's output rows are order[starts[i] .. starts[i + 1]), increasing.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cuda/host_device.h"

namespace hfta::gather_tokens_math {

// Output element e = (b*K + r)*D + d.
HFTA_HOST_DEVICE inline void forward_at(const float* x, const int32_t* rows, float* y, int64_t R,
                                        int64_t K, int64_t D, int64_t e) {
  const int64_t d = e % D, br = e / D, r = br % K, b = br / K;
  const int32_t i = rows[r];
  y[e] = i < 0 ? 0.0f : x[(b * R + i) * D + d];
}

// Input gradient element e = (b*R + i)*D + d.
HFTA_HOST_DEVICE inline void backward_at(const int32_t* groups, const float* dy, float* dx,
                                         int64_t R, int64_t K, int64_t D, bool accumulate,
                                         int64_t e) {
  const int64_t d = e % D, bi = e / D, i = bi % R, b = bi / R;
  const int32_t* order = groups + R + 1;
  float v = accumulate ? dx[e] : 0.0f;
  for (int32_t g = groups[i]; g < groups[i + 1]; ++g) v += dy[(b * K + order[g]) * D + d];
  dx[e] = v;
}

// The groups block for rows [K] of an input of R rows (rows < R, checked by the caller; negative
// rows belong to no group). Host code.
inline std::vector<int32_t> group_rows(const int32_t* rows, int64_t K, int64_t R) {
  std::vector<int32_t> block(static_cast<size_t>(R + 1), 0);
  for (int64_t r = 0; r < K; ++r)
    if (rows[r] >= 0) ++block[static_cast<size_t>(rows[r]) + 1];
  for (int64_t i = 0; i < R; ++i)
    block[static_cast<size_t>(i + 1)] += block[static_cast<size_t>(i)];
  const int32_t named = block[static_cast<size_t>(R)];
  std::vector<int32_t> next(block.begin(), block.end() - 1);  // the next free slot of each group
  block.resize(static_cast<size_t>(R + 1 + named));
  for (int64_t r = 0; r < K; ++r)
    if (rows[r] >= 0)
      block[static_cast<size_t>(R + 1 + next[static_cast<size_t>(rows[r])]++)] =
          static_cast<int32_t>(r);
  return block;
}

}  // namespace hfta::gather_tokens_math
