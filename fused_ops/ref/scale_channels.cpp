// The specification: B independent single-model loops, the scale gradient summed in double and
// rounded once.
#include "fused_ops/scale_channels.h"

namespace hfta::ref {

// dx + dy * s rounds the product first (no FMA), as the fast path and PyTorch do.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

void scale_channels_forward(const ScaleChannelsParams& p, const ScaleChannelsForwardArgs& a) {
  check_scale_channels(p, a);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t n = 0; n < p.N; ++n)
      for (int64_t c = 0; c < p.C; ++c) {
        const int64_t row = n * p.B * p.C + b * p.C + c;
        const float scale = a.s.data[row];
        for (int64_t i = 0; i < p.HW; ++i)
          a.y.data[row * p.HW + i] = a.x.data[row * p.HW + i] * scale;
      }
}

void scale_channels_backward(const ScaleChannelsParams& p, const ScaleChannelsBackwardArgs& a) {
  check_scale_channels_backward(p, a);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t n = 0; n < p.N; ++n)
      for (int64_t c = 0; c < p.C; ++c) {
        const int64_t row = n * p.B * p.C + b * p.C + c;
        const float* dy = a.dy.data + row * p.HW;
        if (!a.ds.empty()) {
          const float* x = a.x.data + row * p.HW;
          double sum = 0.0;
          for (int64_t i = 0; i < p.HW; ++i) sum += static_cast<double>(dy[i]) * x[i];
          const float g = static_cast<float>(sum);
          a.ds.data[row] = a.accumulate_ds ? a.ds.data[row] + g : g;
        }
        if (!a.dx.empty()) {
          const float scale = a.s.data[row];
          float* dx = a.dx.data + row * p.HW;
          for (int64_t i = 0; i < p.HW; ++i) {
            const float g = dy[i] * scale;
            dx[i] = a.accumulate_dx ? dx[i] + g : g;
          }
        }
      }
}

#pragma GCC pop_options

}  // namespace hfta::ref
