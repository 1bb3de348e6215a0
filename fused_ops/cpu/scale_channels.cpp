// CPU channel scaling (squeeze-and-excitation). Memory-bound: rows of HW elements, one scale
// each, spread over the threads in blocks of about 16K elements. The scale gradient of a row is
// summed in double over 8 lanes in a fixed order (element i into lane i % 8), so it depends on
// neither the thread count nor the row's place in the array: fused equals alone bit for bit.
#include "fused_ops/scale_channels.h"

#include <algorithm>

#include "core/parallel.h"

namespace hfta::cpu {

namespace {

// Calls body(first_row, end_row) over [0, rows) in blocks of about 16K elements.
template <typename F>
void for_each_row_block(int64_t rows, int64_t hw, F&& body) {
  const int64_t per_block = std::max<int64_t>(1, (int64_t{1} << 14) / hw);
  const int64_t blocks = (rows + per_block - 1) / per_block;
  parallel_for(blocks,
               [&](int64_t k) { body(k * per_block, std::min(rows, (k + 1) * per_block)); });
}

}  // namespace

void scale_channels_forward(const ScaleChannelsParams& p, const ScaleChannelsForwardArgs& a) {
  const int64_t hw = p.HW;
  for_each_row_block(p.N * p.B * p.C, hw, [&](int64_t first, int64_t end) {
    for (int64_t r = first; r < end; ++r) {
      const float* __restrict x = a.x.data + r * hw;
      float* __restrict y = a.y.data + r * hw;  // may be x: each element is read, then written
      const float scale = a.s.data[r];
#pragma omp simd
      for (int64_t i = 0; i < hw; ++i) y[i] = x[i] * scale;
    }
  });
}

// No FMA contraction: dx += dy * s rounds the product first, as the reference does.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
void scale_channels_backward(const ScaleChannelsParams& p, const ScaleChannelsBackwardArgs& a) {
  const int64_t hw = p.HW;
  const bool want_dx = !a.dx.empty(), want_ds = !a.ds.empty();
  for_each_row_block(p.N * p.B * p.C, hw, [&](int64_t first, int64_t end) {
    for (int64_t r = first; r < end; ++r) {
      const float* dy = a.dy.data + r * hw;
      if (want_ds) {
        const float* x = a.x.data + r * hw;
        double lanes[8] = {};
        int64_t i = 0;
        for (; i + 8 <= hw; i += 8)
#pragma omp simd
          for (int l = 0; l < 8; ++l)
            lanes[l] += static_cast<double>(dy[i + l]) * static_cast<double>(x[i + l]);
        for (int l = 0; i < hw; ++i, ++l)
          lanes[l] += static_cast<double>(dy[i]) * static_cast<double>(x[i]);
        const double sum = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) +
                           ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
        const float g = static_cast<float>(sum);
        a.ds.data[r] = a.accumulate_ds ? a.ds.data[r] + g : g;
      }
      if (want_dx) {
        const float scale = a.s.data[r];
        float* dx = a.dx.data + r * hw;  // may be dy when not accumulating
        if (a.accumulate_dx) {
#pragma omp simd
          for (int64_t i = 0; i < hw; ++i) dx[i] += dy[i] * scale;
        } else {
#pragma omp simd
          for (int64_t i = 0; i < hw; ++i) dx[i] = dy[i] * scale;
        }
      }
    }
  });
}
#pragma GCC pop_options

}  // namespace hfta::cpu
