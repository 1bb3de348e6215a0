// The CUDA embedding's per-element arithmetic (fused_ops/embedding.h's contract), written once for
// the kernels (fused_ops/cuda/embedding_kernels.cu) and the host test
// (tests/cuda/test_cuda_embedding.cpp). No project header but backend/cuda/host_device.h (nvcc
// compiles this in C++17).
//
//   weight, dweight [B, V, D]   ids [R] (shared)   y, dy [B, R, D]
//
// The weight gradient is a gather, not a scatter: the host groups the token rows by id
// (EmbeddingGroups, embedding_groups.h), and one thread per (group, model, feature) adds its
// rows' dy to the old dweight value in float, one row after another in row order. That is the CPU
// op's arithmetic exactly (it adds each row to the table in row order), so the result is the CPU
// op's bits, whatever B, with no atomics and every sum in one fixed order.
#pragma once

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace hfta::embedding_math {

struct EmbShape {
  int64_t B = 1, R = 1, V = 1, D = 1;
};

// y[b, r, d] = weight[b, ids[r], d] for e = (b * R + r) * D + d.
HFTA_HOST_DEVICE inline void forward_at(const EmbShape& s, const float* weight, const int32_t* ids,
                                        float* y, int64_t e) {
  const int64_t d = e % s.D, row = e / s.D, r = row % s.R, b = row / s.R;
  y[e] = weight[(b * s.V + ids[r]) * s.D + d];
}

// Group g (vocabulary row vocab[g], token rows order[starts[g]] .. order[starts[g + 1] - 1] in
// increasing order), model b, feature d, for i = (g * B + b) * D + d.
HFTA_HOST_DEVICE inline void dweight_at(const EmbShape& s, const int32_t* vocab,
                                        const int32_t* starts, const int32_t* order,
                                        const float* dy, float* dweight, int64_t i) {
  const int64_t d = i % s.D, b = (i / s.D) % s.B, g = i / (s.D * s.B);
  float& out = dweight[(b * s.V + vocab[g]) * s.D + d];
  float acc = out;
  for (int32_t k = starts[g]; k < starts[g + 1]; ++k) acc += dy[(b * s.R + order[k]) * s.D + d];
  out = acc;
}

}  // namespace hfta::embedding_math
