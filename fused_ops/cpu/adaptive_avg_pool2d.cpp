// CPU adaptive average pooling (fused_ops/pool2d.h's contract): PyTorch's bins, parallel over the
// N*B*C planes (each contiguous and independent in the [N, B*C, H, W] layout, so B only lengthens
// the loop); an output as large as the input is a copy.
#include <algorithm>

#include "core/parallel.h"
#include "fused_ops/pool2d.h"

namespace hfta::cpu {

namespace {

// PyTorch's adaptive bins: [floor(i*size/out), ceil((i+1)*size/out)).
inline int64_t bin_start(int64_t i, int64_t size, int64_t out) { return (i * size) / out; }
inline int64_t bin_end(int64_t i, int64_t size, int64_t out) {
  return ((i + 1) * size + out - 1) / out;
}

// Output as large as the input: every bin is one element, so pooling copies (MobileNetV2's and
// ResNet-18's global pooling of 1x1 planes on 32x32 images, where the per-plane bin loops cost
// many times the copy: docs/benchmarks.md, "Pointwise convolutions as GEMMs").
bool is_identity(const AdaptiveAvgPool2dParams& p) { return p.out_h == p.H && p.out_w == p.W; }

}  // namespace

void adaptive_avg_pool2d_forward(const AdaptiveAvgPool2dParams& p,
                                 const AdaptiveAvgPool2dForwardArgs& a) {
  const TensorView &x = a.x, &y = a.y;
  const int64_t H = p.H, W = p.W, OH = p.out_h, OW = p.out_w;
  if (is_identity(p)) {
    for_each_chunk(x.numel(), [&](int64_t begin, int64_t end) {
      std::copy(x.data + begin, x.data + end, y.data + begin);
    });
    return;
  }
  parallel_for(p.N * p.B * p.C, [&](int64_t plane) {
    const float* xp = x.data + plane * H * W;
    float* yp = y.data + plane * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t h0 = bin_start(oh, H, OH), h1 = bin_end(oh, H, OH);
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t w0 = bin_start(ow, W, OW), w1 = bin_end(ow, W, OW);
        float sum = 0.0f;
        for (int64_t h = h0; h < h1; ++h) {
          const float* xr = xp + h * W;
#pragma omp simd reduction(+ : sum)
          for (int64_t w = w0; w < w1; ++w) sum += xr[w];
        }
        yp[oh * OW + ow] = sum / float((h1 - h0) * (w1 - w0));
      }
    }
  });
}

void adaptive_avg_pool2d_backward(const AdaptiveAvgPool2dParams& p,
                                  const AdaptiveAvgPool2dBackwardArgs& a) {
  const TensorView &dy = a.dy, &dx = a.dx;
  const int64_t H = p.H, W = p.W, OH = p.out_h, OW = p.out_w;
  if (is_identity(p)) {
    for_each_chunk(dy.numel(), [&](int64_t begin, int64_t end) {
      if (a.accumulate_dx)
        for (int64_t i = begin; i < end; ++i) dx.data[i] += dy.data[i];
      else
        std::copy(dy.data + begin, dy.data + end, dx.data + begin);
    });
    return;
  }
  parallel_for(p.N * p.B * p.C, [&](int64_t plane) {
    const float* dyp = dy.data + plane * OH * OW;
    float* dxp = dx.data + plane * H * W;
    if (!a.accumulate_dx) std::fill(dxp, dxp + H * W, 0.0f);
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t h0 = bin_start(oh, H, OH), h1 = bin_end(oh, H, OH);
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t w0 = bin_start(ow, W, OW), w1 = bin_end(ow, W, OW);
        const float share = dyp[oh * OW + ow] / float((h1 - h0) * (w1 - w0));
        for (int64_t h = h0; h < h1; ++h)
#pragma omp simd
          for (int64_t w = w0; w < w1; ++w) dxp[h * W + w] += share;
      }
    }
  });
}

}  // namespace hfta::cpu
