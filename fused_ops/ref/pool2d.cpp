#include "fused_ops/pool2d.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace hfta {
namespace ref {

// The specification: B independent single-model poolings, written as PyTorch's CPU kernels
// (aten/src/ATen/native/cpu/{Max,Avg,AdaptiveAvg}PoolKernel.cpp) with double accumulation.
// Model b's channel c of sample n is the plane (n, b*C + c) of the fused tensor.

namespace {

int64_t plane_of(int64_t B, int64_t C, int64_t b, int64_t n, int64_t c) {
  return (n * B + b) * C + c;
}

// Window [start, end) of output index o along an axis, clipped to the input; `padded_size` is
// the window clipped to the padded input instead (what count_include_pad divides by).
struct Window {
  int64_t start, end, padded_size;
};

// NOLINTBEGIN(bugprone-easily-swappable-parameters): an internal kernel helper called only in this
// file, at a few call sites that pass locals named like its parameters.
Window window(int64_t o, int64_t size, int64_t kernel, int64_t stride, int64_t pad) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  int64_t start = o * stride - pad;
  int64_t end = std::min(start + kernel, size + pad);
  int64_t padded_size = end - start;
  return {std::max<int64_t>(start, 0), std::min(end, size), padded_size};
}

// The divisor of one average-pooling window.
double avg_divisor(const Pool2dParams& p, const Window& wh, const Window& ww) {
  return p.count_include_pad ? double(wh.padded_size * ww.padded_size)
                             : double((wh.end - wh.start) * (ww.end - ww.start));
}

// PyTorch's adaptive bins: [floor(i*size/out), ceil((i+1)*size/out)).
int64_t bin_start(int64_t i, int64_t size, int64_t out) { return (i * size) / out; }
int64_t bin_end(int64_t i, int64_t size, int64_t out) { return ((i + 1) * size + out - 1) / out; }

}  // namespace

void pool2d_forward(const Pool2dParams& p, const Pool2dForwardArgs& a) {
  const TensorView &x = a.x, &y = a.y;
  const Pool2dSaved& saved = a.saved;
  check_pool2d(p, a);
  const int64_t H = p.H, W = p.W, OH = p.out_h(), OW = p.out_w();
  const int64_t sh = p.effective_stride_h(), sw = p.effective_stride_w();
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t n = 0; n < p.N; ++n)
      for (int64_t c = 0; c < p.C; ++c) {
        const int64_t plane = plane_of(p.B, p.C, b, n, c);
        const float* xp = x.data + plane * H * W;
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            const Window wh = window(oh, H, p.kernel_h, sh, p.pad_h);
            const Window ww = window(ow, W, p.kernel_w, sw, p.pad_w);
            const int64_t out = (plane * OH + oh) * OW + ow;
            if (p.kind == PoolKind::kMax) {
              // Padding is -inf: only real elements compete. The first maximum in scan order
              // wins ties; a NaN always wins (it propagates, as in PyTorch).
              float best = -std::numeric_limits<float>::infinity();
              int64_t best_index = wh.start * W + ww.start;
              for (int64_t h = wh.start; h < wh.end; ++h)
                for (int64_t w = ww.start; w < ww.end; ++w) {
                  const float v = xp[h * W + w];
                  if (v > best || std::isnan(v)) best = v, best_index = h * W + w;
                }
              y.data[out] = best;
              if (!saved.argmax.empty()) saved.argmax.data[out] = static_cast<int32_t>(best_index);
            } else {
              double sum = 0.0;
              for (int64_t h = wh.start; h < wh.end; ++h)
                for (int64_t w = ww.start; w < ww.end; ++w) sum += xp[h * W + w];
              y.data[out] = static_cast<float>(sum / avg_divisor(p, wh, ww));
            }
          }
      }
}

void pool2d_backward(const Pool2dParams& p, const Pool2dBackwardArgs& a) {
  const TensorView &dy = a.dy, &dx = a.dx;
  const Pool2dSaved& saved = a.saved;
  check_pool2d_backward(p, a);
  const int64_t H = p.H, W = p.W, OH = p.out_h(), OW = p.out_w();
  const int64_t sh = p.effective_stride_h(), sw = p.effective_stride_w();
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t n = 0; n < p.N; ++n)
      for (int64_t c = 0; c < p.C; ++c) {
        const int64_t plane = plane_of(p.B, p.C, b, n, c);
        // Accumulate the plane's gradient in double, then write it (=, or += with accumulate_dx).
        std::vector<double> grad(H * W, 0.0);
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            const int64_t out = (plane * OH + oh) * OW + ow;
            if (p.kind == PoolKind::kMax) {
              const int64_t at = saved.argmax.data[out];
              HFTA_CHECK(at >= 0 && at < H * W,
                         "max_pool2d saved argmax holds {} at output {}, outside the {}x{} input "
                         "plane: pass the argmax that pool2d_forward filled for these params",
                         at, out, H, W);
              grad[at] += dy.data[out];
            } else {
              const Window wh = window(oh, H, p.kernel_h, sh, p.pad_h);
              const Window ww = window(ow, W, p.kernel_w, sw, p.pad_w);
              const double share = dy.data[out] / avg_divisor(p, wh, ww);
              for (int64_t h = wh.start; h < wh.end; ++h)
                for (int64_t w = ww.start; w < ww.end; ++w) grad[h * W + w] += share;
            }
          }
        for (int64_t i = 0; i < H * W; ++i) {
          float& out = dx.data[plane * H * W + i];
          out = a.accumulate_dx ? out + static_cast<float>(grad[i]) : static_cast<float>(grad[i]);
        }
      }
}

void adaptive_avg_pool2d_forward(const AdaptiveAvgPool2dParams& p,
                                 const AdaptiveAvgPool2dForwardArgs& a) {
  const TensorView &x = a.x, &y = a.y;
  check_adaptive_avg_pool2d(p, a);
  const int64_t H = p.H, W = p.W, OH = p.out_h, OW = p.out_w;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t n = 0; n < p.N; ++n)
      for (int64_t c = 0; c < p.C; ++c) {
        const int64_t plane = plane_of(p.B, p.C, b, n, c);
        const float* xp = x.data + plane * H * W;
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            const int64_t h0 = bin_start(oh, H, OH), h1 = bin_end(oh, H, OH);
            const int64_t w0 = bin_start(ow, W, OW), w1 = bin_end(ow, W, OW);
            double sum = 0.0;
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t w = w0; w < w1; ++w) sum += xp[h * W + w];
            y.data[(plane * OH + oh) * OW + ow] = static_cast<float>(sum / ((h1 - h0) * (w1 - w0)));
          }
      }
}

void adaptive_avg_pool2d_backward(const AdaptiveAvgPool2dParams& p,
                                  const AdaptiveAvgPool2dBackwardArgs& a) {
  const TensorView &dy = a.dy, &dx = a.dx;
  check_adaptive_avg_pool2d_backward(p, a);
  const int64_t H = p.H, W = p.W, OH = p.out_h, OW = p.out_w;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t n = 0; n < p.N; ++n)
      for (int64_t c = 0; c < p.C; ++c) {
        const int64_t plane = plane_of(p.B, p.C, b, n, c);
        std::vector<double> grad(H * W, 0.0);
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            const int64_t h0 = bin_start(oh, H, OH), h1 = bin_end(oh, H, OH);
            const int64_t w0 = bin_start(ow, W, OW), w1 = bin_end(ow, W, OW);
            const double share =
                dy.data[(plane * OH + oh) * OW + ow] / double((h1 - h0) * (w1 - w0));
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t w = w0; w < w1; ++w) grad[h * W + w] += share;
          }
        for (int64_t i = 0; i < H * W; ++i) {
          float& out = dx.data[plane * H * W + i];
          out = a.accumulate_dx ? out + static_cast<float>(grad[i]) : static_cast<float>(grad[i]);
        }
      }
}

}  // namespace ref
}  // namespace hfta
