// The generative ops a Net records (DCGAN): transposed convolution, LeakyReLU / Tanh / Sigmoid,
// and the BCE-with-logits loss against a constant target.
#include <fmt/format.h>

#include <algorithm>

#include "core/device_memory.h"
#include "core/error.h"
#include "fused_ops/bce.h"
#include "fused_ops/conv_transpose2d.h"
#include "models/net.h"

namespace hfta {

namespace {

class ConvTranspose2dNode : public Node {
 public:
  ConvTranspose2dNode(std::string name, ConvTranspose2dParams p, int weight, int bias)
      : name_(std::move(name)), p_(p), weight_(weight), bias_(bias) {}
  std::string describe() const override {
    return fmt::format("{}: ConvTranspose2d({}, {}, kernel {}, stride {}, pad {}{})", name_,
                       p_.in_channels, p_.out_channels, p_.kernel_h, p_.stride_h, p_.pad_h,
                       p_.bias ? "" : ", no bias");
  }
  void forward(Net& net, int64_t n, bool) override {
    const ConvTranspose2dParams p = rows(n);
    conv_transpose2d_forward(p, {.x = net.value(inputs[0]).reshaped(p.x_shape()),
                                 .weight = net.param(weight_).value,
                                 .bias = bias_ >= 0 ? net.param(bias_).value : TensorView(),
                                 .y = net.value(output)});
  }
  void backward(Net& net, int64_t n) override {
    const ConvTranspose2dParams p = rows(n);
    InputGrad dx = net.input_grad(*this, 0);
    conv_transpose2d_backward(p, {.x = net.value(inputs[0]).reshaped(p.x_shape()),
                                  .weight = net.param(weight_).value,
                                  .dy = net.grad(output),
                                  .dx = dx.view,
                                  .dweight = net.param(weight_).grad,
                                  .dbias = bias_ >= 0 ? net.param(bias_).grad : TensorView(),
                                  .accumulate_dx = dx.accumulate});
  }
  bool accumulates_dx() const override { return true; }
  double forward_flops() const override {
    ConvTranspose2dParams one = p_;
    one.B = 1;
    one.N = 1;
    return one.forward_flops();
  }
  double backward_flops(bool with_dx) const override {
    return forward_flops() * (with_dx ? 2.0 : 1.0);
  }

 private:
  ConvTranspose2dParams rows(int64_t n) const {
    ConvTranspose2dParams p = p_;
    p.N = n;
    return p;
  }
  std::string name_;
  ConvTranspose2dParams p_;
  int weight_, bias_;
};

// The targets are a saved [capacity] tensor filled with the constant before each forward (cheap:
// one float per row), since the fused op reads a target vector shared by the B models.
class BceNode : public Node {
 public:
  BceNode(float target, int targets, int mean_sigmoid)
      : target_(target), targets_(targets), mean_sigmoid_(mean_sigmoid) {}
  std::string describe() const override { return fmt::format("BCEWithLogits(target {})", target_); }
  void forward(Net& net, int64_t n, bool) override {
    const BceWithLogitsParams p{.B = net.B(), .N = n};
    const TensorView t = targets(net, n);
    fill_view(t, target_);  // on the net's device
    bce_with_logits_forward(p, {.logits = net.value(inputs[0]).reshaped(p.logits_shape()),
                                .targets = t,
                                .losses = net.value(output),
                                .mean_sigmoid = net.saved(mean_sigmoid_)});
  }
  void backward(Net& net, int64_t n) override {
    const BceWithLogitsParams p{.B = net.B(), .N = n};
    InputGrad dx = net.input_grad(*this, 0);
    if (dx.view.empty()) return;
    bce_with_logits_backward(p, {.logits = net.value(inputs[0]).reshaped(p.logits_shape()),
                                 .targets = targets(net, n),
                                 .dlosses = net.grad(output),
                                 .dlogits = dx.view.reshaped(p.logits_shape()),
                                 .accumulate_dx = dx.accumulate});
  }
  bool accumulates_dx() const override { return true; }

 private:
  TensorView targets(Net& net, int64_t n) const { return net.saved(targets_).leading(Shape{n}); }
  float target_;
  int targets_, mean_sigmoid_;
};

}  // namespace

Value Net::conv_transpose2d(Value x, const std::string& name, const ConvTranspose2dSpec& s) {
  const std::string what = scoped(name);
  const Shape& f = features(x);
  HFTA_CHECK(f.rank() == 3 && layout(x) == Layout::kChannels,
             "{}: ConvTranspose2d needs [C, H, W] features in the channel layout, got {}", what,
             f.str());
  ConvTranspose2dParams p{.B = B(),
                          .N = capacity(),
                          .in_channels = f[0],
                          .out_channels = s.out_channels,
                          .H = f[1],
                          .W = f[2],
                          .kernel_h = s.kernel,
                          .kernel_w = s.kernel,
                          .stride_h = s.stride,
                          .stride_w = s.stride,
                          .pad_h = s.pad,
                          .pad_w = s.pad,
                          .bias = s.bias,
                          .shared_input = shared(x)};
  try {
    check_conv_transpose2d_params(p);
  } catch (const Error& e) {
    fail("{}: {}", what, e.what());
  }
  // PyTorch's fans for a [C_in, C_out, k, k] weight: it reads dim 1 as the fan-in, so a
  // transposed conv's default init bound is 1/sqrt(C_out * k * k).
  const int64_t area = s.kernel * s.kernel;
  const int64_t fan_in = s.out_channels * area, fan_out = f[0] * area;
  const int weight = add_param(name + ".weight", p.weight_shape().drop_front(), s.weight_init,
                               fan_in, fan_out, ParamKind::kWeight);
  const int bias = s.bias ? add_param(name + ".bias", p.bias_shape().drop_front(), s.bias_init,
                                      fan_in, fan_out, ParamKind::kBias)
                          : -1;
  return add_node(std::make_unique<ConvTranspose2dNode>(what, p, weight, bias), {x},
                  {s.out_channels, p.out_h(), p.out_w()}, Layout::kChannels);
}

Value Net::bce_with_logits(Value logits, float target, int* mean_sigmoid) {
  HFTA_CHECK(!shared(logits) && layout(logits) == Layout::kRows && features(logits).numel() == 1,
             "BCEWithLogits needs one per-model logit per row in the row layout (flatten() a "
             "[1, 1, 1] conv output), got {}",
             features(logits).str());
  HFTA_CHECK(target >= 0.0f && target <= 1.0f, "BCEWithLogits: target {} is outside [0, 1]",
             target);
  const int targets = add_saved(Shape{capacity()});
  const int ms = add_saved(Shape{B()});
  if (mean_sigmoid != nullptr) *mean_sigmoid = ms;
  Value loss = add_node(std::make_unique<BceNode>(target, targets, ms), {logits}, Shape{},
                        Layout::kPerModel);
  add_loss(loss);
  return loss;
}

}  // namespace hfta
