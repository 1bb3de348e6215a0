#include "fused_ops/flatten.h"

namespace hfta {
namespace ref {

// The specification, element by element: model b's sample n, channel c, pixel (h, w) sits at
// [n, b*C + c, h, w] in the conv layout and at [b, n, (c*H + h)*W + w] in the linear layout.

void flatten_forward(const FlattenParams& p, const FlattenForwardArgs& a) {
  check_flatten(p, a);
  const TensorView &x = a.x, &y = a.y;
  const int64_t B = p.B, N = p.N, C = p.C, H = p.H, W = p.W;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w)
            y.data[(b * N + n) * p.features() + (c * H + h) * W + w] =
                x.data[((n * B * C + b * C + c) * H + h) * W + w];
}

void flatten_backward(const FlattenParams& p, const FlattenBackwardArgs& a) {
  check_flatten_backward(p, a);
  const TensorView &dy = a.dy, &dx = a.dx;
  const int64_t B = p.B, N = p.N, C = p.C, H = p.H, W = p.W;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w) {
            const float grad = dy.data[(b * N + n) * p.features() + (c * H + h) * W + w];
            float& out = dx.data[((n * B * C + b * C + c) * H + h) * W + w];
            out = a.accumulate_dx ? out + grad : grad;
          }
}

}  // namespace ref
}  // namespace hfta
