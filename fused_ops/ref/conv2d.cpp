#include "fused_ops/conv2d.h"

#include <vector>

namespace hfta {
namespace ref {

namespace {

// Model b's pieces of the fused tensors, as plain single-model NCHW / OIHW arrays with strides.
struct ModelConv {
  const Conv2dParams& p;
  int64_t b;
  int64_t cin_g() const { return p.in_channels / p.groups; }
  int64_t cout_g() const { return p.out_channels / p.groups; }
  int64_t x_channels() const { return p.shared_input ? p.in_channels : p.B * p.in_channels; }
  // Index of x[n, c, h, w] of model b (c is the model's own channel).
  // NOLINTBEGIN(bugprone-easily-swappable-parameters): an internal kernel helper called only in
  // this file, at a few call sites that pass locals named like its parameters.
  int64_t x_index(int64_t n, int64_t c, int64_t h, int64_t w) const {
    // NOLINTEND(bugprone-easily-swappable-parameters)
    const int64_t channel = (p.shared_input ? 0 : b * p.in_channels) + c;
    return ((n * x_channels() + channel) * p.H + h) * p.W + w;
  }
  int64_t y_index(int64_t n, int64_t o, int64_t oh, int64_t ow) const {
    return ((n * p.B * p.out_channels + b * p.out_channels + o) * p.out_h() + oh) * p.out_w() + ow;
  }
  int64_t w_index(int64_t o, int64_t i, int64_t kh, int64_t kw) const {
    return (((b * p.out_channels + o) * cin_g() + i) * p.kernel_h + kh) * p.kernel_w + kw;
  }
  // Calls f(c, h, w, i, kh, kw) for each input pixel that output pixel (o, oh, ow) reads:
  // c is the input channel, i its index inside output channel o's group.
  template <typename F>
  void for_each_tap(int64_t o, int64_t oh, int64_t ow, F&& f) const {
    const int64_t g = o / cout_g();
    for (int64_t i = 0; i < cin_g(); ++i)
      for (int64_t kh = 0; kh < p.kernel_h; ++kh) {
        const int64_t h = oh * p.stride_h - p.pad_h + kh * p.dilation_h;
        if (h < 0 || h >= p.H) continue;
        for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
          const int64_t w = ow * p.stride_w - p.pad_w + kw * p.dilation_w;
          if (w < 0 || w >= p.W) continue;
          f(g * cin_g() + i, h, w, i, kh, kw);
        }
      }
  }
};

}  // namespace

// The specification: B independent single-model convolutions, double accumulation.
void conv2d_forward(const Conv2dParams& p, const Conv2dForwardArgs& a) {
  check_conv2d(p, a);
  const TensorView &x = a.x, &weight = a.weight, &bias = a.bias, &y = a.y;
  for (int64_t b = 0; b < p.B; ++b) {
    const ModelConv m{p, b};
    for (int64_t n = 0; n < p.N; ++n)
      for (int64_t o = 0; o < p.out_channels; ++o)
        for (int64_t oh = 0; oh < p.out_h(); ++oh)
          for (int64_t ow = 0; ow < p.out_w(); ++ow) {
            double acc = p.bias ? bias.data[b * p.out_channels + o] : 0.0;
            m.for_each_tap(
                o, oh, ow, [&](int64_t c, int64_t h, int64_t w, int64_t i, int64_t kh, int64_t kw) {
                  acc +=
                      double(x.data[m.x_index(n, c, h, w)]) * weight.data[m.w_index(o, i, kh, kw)];
                });
            y.data[m.y_index(n, o, oh, ow)] = static_cast<float>(acc);
          }
  }
}

// Accumulates every gradient in double, per model, then rounds once to float; dx of a shared
// input sums the per-model (float) gradients, as B separate models' gradients would be summed;
// with accumulate_dx they are added to dx's values instead of to zeros.
void conv2d_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a) {
  check_conv2d_backward(p, a);
  const TensorView &x = a.x, &weight = a.weight, &dy = a.dy, &dx = a.dx, &dweight = a.dweight,
                   &dbias = a.dbias;
  if (!dx.empty() && !a.accumulate_dx)
    for (int64_t i = 0; i < dx.numel(); ++i) dx.data[i] = 0.0f;
  const Shape one_x{p.N, p.in_channels, p.H, p.W};
  const Shape one_w = p.weight_shape().drop_front();
  for (int64_t b = 0; b < p.B; ++b) {
    const ModelConv m{p, b};
    std::vector<double> dx_acc(dx.empty() ? 0 : one_x.numel(), 0.0);
    std::vector<double> dw_acc(dweight.empty() ? 0 : one_w.numel(), 0.0);
    for (int64_t n = 0; n < p.N; ++n)
      for (int64_t o = 0; o < p.out_channels; ++o)
        for (int64_t oh = 0; oh < p.out_h(); ++oh)
          for (int64_t ow = 0; ow < p.out_w(); ++ow) {
            const double g = dy.data[m.y_index(n, o, oh, ow)];
            m.for_each_tap(o, oh, ow,
                           [&](int64_t c, int64_t h, int64_t w, int64_t i, int64_t kh, int64_t kw) {
                             if (!dx.empty())
                               dx_acc[((n * p.in_channels + c) * p.H + h) * p.W + w] +=
                                   g * weight.data[m.w_index(o, i, kh, kw)];
                             if (!dweight.empty())
                               dw_acc[((o * m.cin_g() + i) * p.kernel_h + kh) * p.kernel_w + kw] +=
                                   g * x.data[m.x_index(n, c, h, w)];
                           });
          }
    if (!dx.empty())
      for (int64_t n = 0; n < p.N; ++n)
        for (int64_t c = 0; c < p.in_channels; ++c)
          for (int64_t h = 0; h < p.H; ++h)
            for (int64_t w = 0; w < p.W; ++w)
              dx.data[m.x_index(n, c, h, w)] +=
                  static_cast<float>(dx_acc[((n * p.in_channels + c) * p.H + h) * p.W + w]);
    if (!dweight.empty())
      for (int64_t i = 0; i < one_w.numel(); ++i)
        dweight.data[b * one_w.numel() + i] += static_cast<float>(dw_acc[i]);
    if (p.bias && !dbias.empty())
      for (int64_t o = 0; o < p.out_channels; ++o) {
        double acc = 0.0;
        for (int64_t n = 0; n < p.N; ++n)
          for (int64_t oh = 0; oh < p.out_h(); ++oh)
            for (int64_t ow = 0; ow < p.out_w(); ++ow) acc += dy.data[m.y_index(n, o, oh, ow)];
        dbias.data[b * p.out_channels + o] += static_cast<float>(acc);
      }
  }
}

}  // namespace ref
}  // namespace hfta
