// CPU fused concat: both layouts are one loop over "outer" blocks, each the concatenation of one
// contiguous run per input. kRows: block (b, r), input i's run is its C_i features; kChannels:
// block (n, b), input i's run is its C_i*S channel elements. So y[o] = (x_0[o], x_1[o], ...),
// every run a memcpy (or an add for accumulated gradients). Memory-bound: the blocks are split
// over the threads in chunks of about 16K floats of y, small tensors stay on the caller.
#include "fused_ops/concat.h"

#include <algorithm>
#include <cstring>

#include "core/parallel.h"

namespace hfta::cpu {

namespace {

struct Blocks {
  int64_t count = 0;  // outer blocks
  int64_t unit = 1;   // floats per feature in a block: 1 (rows) or S (channels)
};

Blocks blocks_of(const ConcatParams& p) {
  if (p.layout == ConcatLayout::kRows) return {p.B * p.R, 1};
  return {p.N * p.B, p.S};
}

// Runs body(o0, o1) over chunks of the outer blocks, each y_run floats of y.
template <typename F>
void for_each_block_chunk(const Blocks& blocks, int64_t y_run, F&& body) {
  constexpr int64_t kChunkFloats = 1 << 14;
  const int64_t count = blocks.count;
  const int64_t per_chunk = std::max<int64_t>(1, kChunkFloats / y_run);
  const int64_t chunks = (count + per_chunk - 1) / per_chunk;
  if (chunks <= 1) return body(int64_t{0}, count);
  parallel_for(chunks,
               [&](int64_t k) { body(k * per_chunk, std::min(count, (k + 1) * per_chunk)); });
}

}  // namespace

void concat_forward(const ConcatParams& p, const ConcatForwardArgs& a) {
  const Blocks k = blocks_of(p);
  const int64_t y_run = p.total_C() * k.unit;
  for_each_block_chunk(k, y_run, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      float* y = a.y.data + o * y_run;
      for (int i = 0; i < p.inputs; ++i) {
        const int64_t run = p.C[i] * k.unit;
        std::memcpy(y, a.x[i].data + o * run, sizeof(float) * static_cast<size_t>(run));
        y += run;
      }
    }
  });
}

void concat_backward(const ConcatParams& p, const ConcatBackwardArgs& a) {
  const Blocks k = blocks_of(p);
  const int64_t y_run = p.total_C() * k.unit;
  for_each_block_chunk(k, y_run, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      const float* dy = a.dy.data + o * y_run;
      for (int i = 0; i < p.inputs; ++i) {
        const int64_t run = p.C[i] * k.unit;
        if (!a.dx[i].empty()) {
          float* dx = a.dx[i].data + o * run;
          if (a.accumulate_dx[i]) {
#pragma omp simd
            for (int64_t e = 0; e < run; ++e) dx[e] += dy[e];
          } else {
            std::memcpy(dx, dy, sizeof(float) * static_cast<size_t>(run));
          }
        }
        dy += run;
      }
    }
  });
}

}  // namespace hfta::cpu
