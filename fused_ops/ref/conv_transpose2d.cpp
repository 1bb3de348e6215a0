#include "fused_ops/conv_transpose2d.h"

#include <vector>

namespace hfta {
namespace ref {

namespace {

// Model b's pieces of the fused tensors, as plain single-model arrays: x [N, C_in, H, W],
// weight [C_in, C_out, kH, kW] (PyTorch's), y [N, C_out, OH, OW].
struct ModelDeconv {
  const ConvTranspose2dParams& p;
  int64_t b;
  int64_t x_channels() const { return p.shared_input ? p.in_channels : p.B * p.in_channels; }
  // NOLINTBEGIN(bugprone-easily-swappable-parameters): internal index helpers called only in
  // this file, with locals named like their parameters.
  int64_t x_index(int64_t n, int64_t c, int64_t h, int64_t w) const {
    const int64_t channel = (p.shared_input ? 0 : b * p.in_channels) + c;
    return ((n * x_channels() + channel) * p.H + h) * p.W + w;
  }
  int64_t y_index(int64_t n, int64_t o, int64_t oh, int64_t ow) const {
    return ((n * p.B * p.out_channels + b * p.out_channels + o) * p.out_h() + oh) * p.out_w() + ow;
  }
  int64_t w_index(int64_t c, int64_t o, int64_t kh, int64_t kw) const {
    return (((b * p.in_channels + c) * p.out_channels + o) * p.kernel_h + kh) * p.kernel_w + kw;
  }
  // NOLINTEND(bugprone-easily-swappable-parameters)
  // Calls f(oh, ow, kh, kw) for each output pixel that input pixel (h, w) scatters into: the
  // full (unpadded) output position h*stride + kh, less the padding trimmed off the top/left.
  template <typename F>
  void for_each_tap(int64_t h, int64_t w, F&& f) const {
    for (int64_t kh = 0; kh < p.kernel_h; ++kh) {
      const int64_t oh = h * p.stride_h - p.pad_h + kh;
      if (oh < 0 || oh >= p.out_h()) continue;
      for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
        const int64_t ow = w * p.stride_w - p.pad_w + kw;
        if (ow < 0 || ow >= p.out_w()) continue;
        f(oh, ow, kh, kw);
      }
    }
  }
};

}  // namespace

// The specification: B independent single-model transposed convolutions, written as the
// scatter PyTorch's definition describes, accumulated in double per image and rounded once.
void conv_transpose2d_forward(const ConvTranspose2dParams& p, const ConvTranspose2dForwardArgs& a) {
  check_conv_transpose2d(p, a);
  const TensorView &x = a.x, &weight = a.weight, &bias = a.bias, &y = a.y;
  const int64_t OH = p.out_h(), OW = p.out_w();
  for (int64_t b = 0; b < p.B; ++b) {
    const ModelDeconv m{p, b};
    for (int64_t n = 0; n < p.N; ++n)
      for (int64_t o = 0; o < p.out_channels; ++o) {  // one output plane at a time
        std::vector<double> acc(OH * OW, p.bias ? double(bias.data[b * p.out_channels + o]) : 0.0);
        for (int64_t c = 0; c < p.in_channels; ++c)
          for (int64_t h = 0; h < p.H; ++h)
            for (int64_t w = 0; w < p.W; ++w) {
              const double v = x.data[m.x_index(n, c, h, w)];
              m.for_each_tap(h, w, [&](int64_t oh, int64_t ow, int64_t kh, int64_t kw) {
                acc[oh * OW + ow] += v * weight.data[m.w_index(c, o, kh, kw)];
              });
            }
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow)
            y.data[m.y_index(n, o, oh, ow)] = static_cast<float>(acc[oh * OW + ow]);
      }
  }
}

// Every gradient in double per model, rounded once to float; a shared input's dx sums the
// per-model (float) gradients, as B separate models' gradients would be summed; with
// accumulate_dx they are added to dx's values instead of to zeros.
void conv_transpose2d_backward(const ConvTranspose2dParams& p,
                               const ConvTranspose2dBackwardArgs& a) {
  check_conv_transpose2d_backward(p, a);
  const TensorView &x = a.x, &weight = a.weight, &dy = a.dy, &dx = a.dx, &dweight = a.dweight,
                   &dbias = a.dbias;
  if (!dx.empty() && !a.accumulate_dx)
    for (int64_t i = 0; i < dx.numel(); ++i) dx.data[i] = 0.0f;
  const int64_t OH = p.out_h(), OW = p.out_w();
  const int64_t w_numel = p.weight_shape().numel_from(1);
  for (int64_t b = 0; b < p.B; ++b) {
    const ModelDeconv m{p, b};
    std::vector<double> dw_acc(dweight.empty() ? 0 : w_numel, 0.0);
    for (int64_t n = 0; n < p.N; ++n) {
      std::vector<double> dx_acc(dx.empty() ? 0 : p.in_channels * p.H * p.W, 0.0);
      for (int64_t o = 0; o < p.out_channels; ++o)
        for (int64_t c = 0; c < p.in_channels; ++c)
          for (int64_t h = 0; h < p.H; ++h)
            for (int64_t w = 0; w < p.W; ++w) {
              const double xv = x.data[m.x_index(n, c, h, w)];
              m.for_each_tap(h, w, [&](int64_t oh, int64_t ow, int64_t kh, int64_t kw) {
                const double g = dy.data[m.y_index(n, o, oh, ow)];
                if (!dx.empty())
                  dx_acc[(c * p.H + h) * p.W + w] += g * weight.data[m.w_index(c, o, kh, kw)];
                if (!dweight.empty())
                  dw_acc[((c * p.out_channels + o) * p.kernel_h + kh) * p.kernel_w + kw] += g * xv;
              });
            }
      if (!dx.empty())
        for (int64_t c = 0; c < p.in_channels; ++c)
          for (int64_t h = 0; h < p.H; ++h)
            for (int64_t w = 0; w < p.W; ++w)
              dx.data[m.x_index(n, c, h, w)] += static_cast<float>(dx_acc[(c * p.H + h) * p.W + w]);
    }
    if (!dweight.empty())
      for (int64_t i = 0; i < w_numel; ++i)
        dweight.data[b * w_numel + i] += static_cast<float>(dw_acc[i]);
    if (p.bias && !dbias.empty())
      for (int64_t o = 0; o < p.out_channels; ++o) {
        double acc = 0.0;
        for (int64_t n = 0; n < p.N; ++n)
          for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) acc += dy.data[m.y_index(n, o, oh, ow)];
        dbias.data[b * p.out_channels + o] += static_cast<float>(acc);
      }
  }
}

}  // namespace ref
}  // namespace hfta
