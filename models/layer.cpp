#include "models/layer.h"

#include <fmt/format.h>

#include "core/error.h"
#include "fused_ops/activation.h"
#include "fused_ops/conv2d.h"
#include "fused_ops/flatten.h"
#include "fused_ops/linear.h"
#include "fused_ops/pool2d.h"

namespace hfta {

Shape batch_shape(int64_t B, int64_t n, const Shape& features) {
  if (features.rank() == 3) return {n, B * features[0], features[1], features[2]};
  HFTA_CHECK(features.rank() == 1, "per-model features {} are neither [C, H, W] nor [F]",
             features.str());
  return {B, n, features[0]};
}

Param LayerContext::add_param(const std::string& name, const Shape& shape, int64_t fan_in) {
  Param p{name, params_.carve(shape), grads_.carve(shape), fan_in};
  registry_.push_back(p);
  return p;
}

namespace {

// Rethrows an op's error with the layer it came from.
template <typename F>
void with_layer(const Layer& layer, F&& f) {
  try {
    f();
  } catch (const Error& e) {
    fail("{}: {}", layer.describe(), e.what());
  }
}

class LinearLayer : public Layer {
 public:
  LinearLayer(int64_t out, bool bias) : out_(out), bias_(bias) {}
  std::string describe() const override {
    return fmt::format("Linear({}, {}{})", p_.in_features, out_, bias_ ? "" : ", no bias");
  }
  Shape connect(const Shape& in, bool shared_input) override {
    // A shared input is the minibatch itself: any sample shape is read as its flat features.
    HFTA_CHECK(shared_input || in.rank() == 1,
               "Linear({}) needs [F] features, got {}: add a flatten() before it", out_, in.str());
    p_.in_features = in.numel();
    p_.out_features = out_;
    p_.bias = bias_;
    p_.shared_input = shared_input;
    return {out_};
  }
  void layout(LayerContext& ctx) override {
    p_.B = ctx.B;
    weight_ = ctx.add_param("weight", p_.weight_shape(), p_.in_features);
    if (bias_) bias_param_ = ctx.add_param("bias", p_.bias_shape(), p_.in_features);
  }
  void forward(const TensorView& x, const TensorView& y, int64_t n, bool) override {
    LinearParams p = with_rows(n);
    with_layer(*this, [&] {
      linear_forward(p, {.x = x.reshaped(p.x_shape()),
                         .weight = weight_.value,
                         .bias = bias_param_.value,
                         .y = y});
    });
  }
  void backward(const TensorView& x, const TensorView&, const TensorView& dy, const TensorView& dx,
                int64_t n) override {
    LinearParams p = with_rows(n);
    with_layer(*this, [&] {
      linear_backward(p, {.x = x.reshaped(p.x_shape()),
                          .weight = weight_.value,
                          .dy = dy,
                          .dx = dx.empty() ? dx : dx.reshaped(p.x_shape()),
                          .dweight = weight_.grad,
                          .dbias = bias_param_.grad});
    });
  }
  double forward_flops() const override { return 2.0 * p_.in_features * p_.out_features; }
  double backward_flops(bool with_dx) const override {
    return forward_flops() * (with_dx ? 2.0 : 1.0);
  }

 private:
  LinearParams with_rows(int64_t n) const {
    LinearParams p = p_;
    p.N = n;
    return p;
  }
  int64_t out_;
  bool bias_;
  LinearParams p_;
  Param weight_, bias_param_;
};

class Conv2dLayer : public Layer {
 public:
  Conv2dLayer(int64_t out, int64_t kernel, int64_t stride, int64_t pad, bool bias)
      : out_(out), kernel_(kernel), stride_(stride), pad_(pad), bias_(bias) {}
  std::string describe() const override {
    return fmt::format("Conv2d({}, {}, kernel {}, stride {}, pad {}{})", p_.in_channels, out_,
                       kernel_, stride_, pad_, bias_ ? "" : ", no bias");
  }
  Shape connect(const Shape& in, bool shared_input) override {
    HFTA_CHECK(in.rank() == 3, "Conv2d({}) needs [C, H, W] features, got {}", out_, in.str());
    p_ = Conv2dParams{.in_channels = in[0],
                      .out_channels = out_,
                      .H = in[1],
                      .W = in[2],
                      .kernel_h = kernel_,
                      .kernel_w = kernel_,
                      .stride_h = stride_,
                      .stride_w = stride_,
                      .pad_h = pad_,
                      .pad_w = pad_,
                      .bias = bias_,
                      .shared_input = shared_input};
    with_layer(*this, [&] { check_conv2d_params(p_); });
    return {out_, p_.out_h(), p_.out_w()};
  }
  void layout(LayerContext& ctx) override {
    p_.B = ctx.B;
    int64_t fan_in = p_.in_channels * kernel_ * kernel_;
    weight_ = ctx.add_param("weight", p_.weight_shape(), fan_in);
    if (bias_) bias_param_ = ctx.add_param("bias", p_.bias_shape(), fan_in);
  }
  void forward(const TensorView& x, const TensorView& y, int64_t n, bool) override {
    Conv2dParams p = with_rows(n);
    with_layer(*this, [&] {
      conv2d_forward(p, {.x = x, .weight = weight_.value, .bias = bias_param_.value, .y = y});
    });
  }
  void backward(const TensorView& x, const TensorView&, const TensorView& dy, const TensorView& dx,
                int64_t n) override {
    Conv2dParams p = with_rows(n);
    with_layer(*this, [&] {
      conv2d_backward(p, {.x = x,
                          .weight = weight_.value,
                          .dy = dy,
                          .dx = dx,
                          .dweight = weight_.grad,
                          .dbias = bias_param_.grad});
    });
  }
  double forward_flops() const override {
    Conv2dParams one = p_;
    one.B = 1;
    one.N = 1;
    return one.forward_flops();
  }
  double backward_flops(bool with_dx) const override {
    return forward_flops() * (with_dx ? 2.0 : 1.0);
  }

 private:
  Conv2dParams with_rows(int64_t n) const {
    Conv2dParams p = p_;
    p.N = n;
    return p;
  }
  int64_t out_, kernel_, stride_, pad_;
  bool bias_;
  Conv2dParams p_;
  Param weight_, bias_param_;
};

class MaxPool2dLayer : public Layer {
 public:
  MaxPool2dLayer(int64_t kernel, int64_t stride) : kernel_(kernel), stride_(stride) {}
  std::string describe() const override {
    return fmt::format("MaxPool2d(kernel {}, stride {})", kernel_, p_.effective_stride_h());
  }
  Shape connect(const Shape& in, bool shared_input) override {
    HFTA_CHECK(!shared_input,
               "MaxPool2d cannot be the first layer: it has no parameters, so "
               "the B models would compute the same thing");
    HFTA_CHECK(in.rank() == 3, "MaxPool2d needs [C, H, W] features, got {}", in.str());
    p_ = Pool2dParams{.kind = PoolKind::kMax,
                      .C = in[0],
                      .H = in[1],
                      .W = in[2],
                      .kernel_h = kernel_,
                      .kernel_w = kernel_,
                      .stride_h = stride_,
                      .stride_w = stride_};
    with_layer(*this, [&] { check_pool2d_params(p_); });
    return {in[0], p_.out_h(), p_.out_w()};
  }
  void layout(LayerContext& ctx) override {
    p_.B = ctx.B;
    p_.N = ctx.capacity;
    argmax_ = ctx.add_state<int32_t>(p_.argmax_shape());
  }
  void forward(const TensorView& x, const TensorView& y, int64_t n, bool) override {
    Pool2dParams p = with_rows(n);
    with_layer(*this, [&] { pool2d_forward(p, {.x = x, .saved = saved(p), .y = y}); });
  }
  void backward(const TensorView&, const TensorView&, const TensorView& dy, const TensorView& dx,
                int64_t n) override {
    Pool2dParams p = with_rows(n);
    with_layer(*this, [&] { pool2d_backward(p, {.saved = saved(p), .dy = dy, .dx = dx}); });
  }

 private:
  Pool2dParams with_rows(int64_t n) const {
    Pool2dParams p = p_;
    p.N = n;
    return p;
  }
  Pool2dSaved saved(const Pool2dParams& p) const {
    return {IndexView(argmax_.data, p.argmax_shape())};
  }
  int64_t kernel_, stride_;
  Pool2dParams p_;
  IndexView argmax_;
};

class ActivationLayer : public Layer {
 public:
  explicit ActivationLayer(ActivationParams p) : p_(p) {}
  std::string describe() const override { return activation_name(p_.kind); }
  Shape connect(const Shape& in, bool shared_input) override {
    HFTA_CHECK(!shared_input, "{} cannot be the first layer", describe());
    return in;
  }
  void forward(const TensorView& x, const TensorView& y, int64_t, bool) override {
    with_layer(*this, [&] { activation_forward(p_, {.x = x, .y = y}); });
  }
  void backward(const TensorView& x, const TensorView& y, const TensorView& dy,
                const TensorView& dx, int64_t) override {
    with_layer(*this, [&] { activation_backward(p_, {.x = x, .y = y, .dy = dy, .dx = dx}); });
  }

 private:
  ActivationParams p_;
};

class FlattenLayer : public Layer {
 public:
  std::string describe() const override { return "Flatten"; }
  Shape connect(const Shape& in, bool shared_input) override {
    HFTA_CHECK(!shared_input,
               "Flatten cannot be the first layer: a Linear reads the minibatch "
               "flat already");
    HFTA_CHECK(in.rank() == 3, "Flatten needs [C, H, W] features, got {}", in.str());
    p_ = FlattenParams{.C = in[0], .H = in[1], .W = in[2]};
    return {p_.features()};
  }
  void layout(LayerContext& ctx) override { p_.B = ctx.B; }
  void forward(const TensorView& x, const TensorView& y, int64_t n, bool) override {
    FlattenParams p = p_;
    p.N = n;
    with_layer(*this, [&] { flatten_forward(p, {.x = x, .y = y}); });
  }
  void backward(const TensorView&, const TensorView&, const TensorView& dy, const TensorView& dx,
                int64_t n) override {
    FlattenParams p = p_;
    p.N = n;
    with_layer(*this, [&] { flatten_backward(p, {.dy = dy, .dx = dx}); });
  }

 private:
  FlattenParams p_;
};

}  // namespace

std::unique_ptr<Layer> linear(int64_t out_features, bool bias) {
  return std::make_unique<LinearLayer>(out_features, bias);
}
std::unique_ptr<Layer> conv2d(int64_t out_channels, int64_t kernel, int64_t stride, int64_t pad,
                              bool bias) {
  return std::make_unique<Conv2dLayer>(out_channels, kernel, stride, pad, bias);
}
std::unique_ptr<Layer> max_pool2d(int64_t kernel, int64_t stride) {
  return std::make_unique<MaxPool2dLayer>(kernel, stride);
}
std::unique_ptr<Layer> relu() {
  return std::make_unique<ActivationLayer>(ActivationParams{.kind = ActivationKind::kRelu});
}
std::unique_ptr<Layer> flatten() { return std::make_unique<FlattenLayer>(); }

}  // namespace hfta
