// The depthwise convolution's portable scalar loops (conv2d_depthwise.h's detail::): the
// functions behind the op on a build without AVX-512, and the reference the kernel tests hold
// the AVX-512 tiles to.
#include <cstdint>

#include "core/parallel.h"
#include "fused_ops/cpu/conv2d_depthwise.h"

// NOLINTBEGIN(bugprone-easily-swappable-parameters): raw-pointer entry points, as in
// conv2d_depthwise.cpp.
namespace hfta::cpu::detail {

bool depthwise_shape_applies(const Conv2dParams& p) {
  return !p.shared_input && p.groups == p.in_channels && p.out_channels == p.in_channels &&
         p.dilation_h == 1 && p.dilation_w == 1 && p.kernel_h == p.kernel_w &&
         (p.kernel_h == 3 || p.kernel_h == 5) && p.stride_h == p.stride_w &&
         (p.stride_h == 1 || p.stride_h == 2);
}

void depthwise_conv2d_forward_portable(const Conv2dParams& p, const float* x, const float* w,
                                       const float* bias, float* y) {
  const int64_t C = p.B * p.in_channels, H = p.H, W = p.W, OH = p.out_h(), OW = p.out_w();
  const int64_t KH = p.kernel_h, KW = p.kernel_w, SH = p.stride_h, SW = p.stride_w;
  parallel_for(p.N * C, [&](int64_t i) {
    const int64_t c = i % C;
    const float* xp = x + i * H * W;
    const float* wc = w + c * KH * KW;
    float* yp = y + i * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        float acc = bias ? bias[c] : 0.0f;
        for (int64_t kh = 0; kh < KH; ++kh) {
          const int64_t ih = oh * SH - p.pad_h + kh;
          if (ih < 0 || ih >= H) continue;
          for (int64_t kw = 0; kw < KW; ++kw) {
            const int64_t iw = ow * SW - p.pad_w + kw;
            if (iw >= 0 && iw < W) acc += wc[kh * KW + kw] * xp[ih * W + iw];
          }
        }
        yp[oh * OW + ow] = acc;
      }
  });
}

void depthwise_conv2d_backward_portable(const Conv2dParams& p, const float* x, const float* w,
                                        const float* dy, float* dx, float* dw, float* db,
                                        bool accumulate_dx) {
  const int64_t C = p.B * p.in_channels, H = p.H, W = p.W, OH = p.out_h(), OW = p.out_w();
  const int64_t KH = p.kernel_h, KW = p.kernel_w, SH = p.stride_h, SW = p.stride_w;
  // Output index of input index i through tap k along one axis, or -1 when none.
  auto source = [](int64_t i, int64_t pad, int64_t k, int64_t s, int64_t out) -> int64_t {
    const int64_t t = i + pad - k;
    if (t < 0 || t % s != 0 || t / s >= out) return -1;
    return t / s;
  };
  if (dx)
    parallel_for(p.N * C, [&](int64_t i) {
      const int64_t c = i % C;
      const float* dyp = dy + i * OH * OW;
      const float* wc = w + c * KH * KW;
      float* dxp = dx + i * H * W;
      for (int64_t ih = 0; ih < H; ++ih)
        for (int64_t iw = 0; iw < W; ++iw) {
          float acc = 0.0f;
          for (int64_t kh = 0; kh < KH; ++kh) {
            const int64_t oh = source(ih, p.pad_h, kh, SH, OH);
            if (oh < 0) continue;
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t ow = source(iw, p.pad_w, kw, SW, OW);
              if (ow >= 0) acc += wc[kh * KW + kw] * dyp[oh * OW + ow];
            }
          }
          dxp[ih * W + iw] = accumulate_dx ? dxp[ih * W + iw] + acc : acc;
        }
    });
  if (dw || db)
    parallel_for(C, [&](int64_t c) {  // each channel's sums over the images on one thread
      for (int64_t n = 0; n < p.N; ++n) {
        const float* xp = x + (n * C + c) * H * W;
        const float* dyp = dy + (n * C + c) * OH * OW;
        if (db) {
          float acc = 0.0f;
          for (int64_t i = 0; i < OH * OW; ++i) acc += dyp[i];
          db[c] += acc;
        }
        if (!dw) continue;
        for (int64_t kh = 0; kh < KH; ++kh)
          for (int64_t kw = 0; kw < KW; ++kw) {
            float acc = 0.0f;
            for (int64_t oh = 0; oh < OH; ++oh) {
              const int64_t ih = oh * SH - p.pad_h + kh;
              if (ih < 0 || ih >= H) continue;
              for (int64_t ow = 0; ow < OW; ++ow) {
                const int64_t iw = ow * SW - p.pad_w + kw;
                if (iw >= 0 && iw < W) acc += dyp[oh * OW + ow] * xp[ih * W + iw];
              }
            }
            dw[c * KH * KW + kh * KW + kw] += acc;
          }
      }
    });
}

}  // namespace hfta::cpu::detail
// NOLINTEND(bugprone-easily-swappable-parameters)
