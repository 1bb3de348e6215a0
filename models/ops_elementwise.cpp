// The elementwise and reshaping ops a Net records (activations, channel scaling, flatten, add,
// dropout): each node wraps one fused op for all B models of the array (models/ops.cpp has the
// layers with parameters, pooling and the loss).
#include <fmt/format.h>

#include "core/error.h"
#include "fused_ops/activation.h"
#include "fused_ops/add.h"
#include "fused_ops/dropout.h"
#include "fused_ops/flatten.h"
#include "fused_ops/scale_channels.h"
#include "models/net.h"
#include "models/op_checks.h"

namespace hfta {

using op_checks::expect_image;
using op_checks::expect_not_shared;
using op_checks::with_rows;

namespace {

class ActivationNode : public Node {
 public:
  explicit ActivationNode(ActivationParams p) : p_(p) {}
  std::string describe() const override {
    const std::string name = p_.kind == ActivationKind::kLeakyRelu
                                 ? fmt::format("leaky_relu({})", p_.negative_slope)
                                 : std::string(activation_name(p_.kind));
    return absorbed_ ? name + " (run by the op before it)" : name;
  }
  void forward(Net& net, int64_t, bool) override {
    if (absorbed_) return;
    activation_forward(p_, {.x = net.value(inputs[0]), .y = net.value(output)});
  }
  void backward(Net& net, int64_t) override {
    if (absorbed_) return;
    InputGrad dx = net.input_grad(*this, 0);
    if (dx.view.empty()) return;
    activation_backward(p_, {.x = net.value(inputs[0]),
                             .y = net.value(output),
                             .dy = net.grad(output),
                             .dx = dx.view,
                             .accumulate_dx = dx.accumulate});
  }
  bool accumulates_dx() const override { return true; }
  // Kinds whose backward reads y only (fused_ops/activation.h) may run in place: x's buffer then
  // holds y, and backward never needs x.
  bool may_overwrite_input() const override { return p_.backward_reads_output(); }
  std::optional<ActivationParams> fusable_activation() const override {
    if (!p_.backward_reads_output()) return std::nullopt;
    return p_;
  }
  void absorbed_by_producer() override { absorbed_ = true; }

 private:
  ActivationParams p_;
  bool absorbed_ = false;  // its producer applies it (Net::fuse_norm_activations)
};

// Squeeze-and-excitation's `scale * x`: inputs x [C, H, W] and s [C, 1, 1], both per model in
// the channel layout.
class ScaleChannelsNode : public Node {
 public:
  explicit ScaleChannelsNode(ScaleChannelsParams p) : p_(p) {}
  std::string describe() const override { return fmt::format("ScaleChannels({})", p_.C); }
  void forward(Net& net, int64_t n, bool) override {
    const ScaleChannelsParams p = with_rows(p_, n);
    scale_channels_forward(p, {.x = x(net, p), .s = s(net, p), .y = y(net, p)});
  }
  void backward(Net& net, int64_t n) override {
    const ScaleChannelsParams p = with_rows(p_, n);
    InputGrad dx = net.input_grad(*this, 0), ds = net.input_grad(*this, 1);
    scale_channels_backward(p, {.x = x(net, p),
                                .s = s(net, p),
                                .dy = net.grad(output).reshaped(p.x_shape()),
                                .dx = dx.view.empty() ? dx.view : dx.view.reshaped(p.x_shape()),
                                .ds = ds.view.empty() ? ds.view : ds.view.reshaped(p.s_shape()),
                                .accumulate_dx = dx.accumulate,
                                .accumulate_ds = ds.accumulate});
  }
  bool accumulates_dx() const override { return true; }

 private:
  TensorView x(Net& net, const ScaleChannelsParams& p) const {
    return net.value(inputs[0]).reshaped(p.x_shape());
  }
  TensorView s(Net& net, const ScaleChannelsParams& p) const {
    return net.value(inputs[1]).reshaped(p.s_shape());
  }
  TensorView y(Net& net, const ScaleChannelsParams& p) const {
    return net.value(output).reshaped(p.x_shape());
  }
  ScaleChannelsParams p_;
};

class FlattenNode : public Node {
 public:
  explicit FlattenNode(FlattenParams p) : p_(p) {}
  std::string describe() const override { return "Flatten"; }
  void forward(Net& net, int64_t n, bool) override {
    const FlattenParams p = with_rows(p_, n);
    flatten_forward(p, {.x = net.value(inputs[0]).reshaped(p.x_shape()), .y = net.value(output)});
  }
  void backward(Net& net, int64_t n) override {
    const FlattenParams p = with_rows(p_, n);
    InputGrad dx = net.input_grad(*this, 0);
    if (dx.view.empty()) return;
    flatten_backward(p, {.dy = net.grad(output),
                         .dx = dx.view.reshaped(p.x_shape()),
                         .accumulate_dx = dx.accumulate});
  }
  bool accumulates_dx() const override { return true; }
  bool backward_reads_output() const override { return false; }

 private:
  FlattenParams p_;
};

class AddNode : public Node {
 public:
  std::string describe() const override { return "Add"; }
  void forward(Net& net, int64_t, bool) override {
    add_forward({.a = net.value(inputs[0]), .b = net.value(inputs[1]), .y = net.value(output)});
  }
  void backward(Net& net, int64_t) override {
    const TensorView dy = net.grad(output);
    for (int i = 0; i < 2; ++i) {
      InputGrad dx = net.input_grad(*this, i);
      if (!dx.view.empty()) add_backward({.dy = dy, .dx = dx.view, .accumulate_dx = dx.accumulate});
    }
  }
  bool accumulates_dx() const override { return true; }
  bool backward_reads_output() const override { return false; }
};

class DropoutNode : public Node {
 public:
  DropoutNode(float p, int mask) : p_(p), mask_(mask) {}
  std::string describe() const override { return fmt::format("Dropout({})", p_); }
  void forward(Net& net, int64_t n, bool training) override {
    last_ = params(net, n, training);
    dropout_forward(last_, {.x = net.value(inputs[0]),
                            .streams = net.dropout_streams(),
                            .saved = saved(net),
                            .y = net.value(output)});
  }
  void backward(Net& net, int64_t) override {
    InputGrad dx = net.input_grad(*this, 0);
    if (dx.view.empty()) return;
    dropout_backward(last_, {.saved = saved(net),
                             .dy = net.grad(output),
                             .dx = dx.view,
                             .accumulate_dx = dx.accumulate});
  }
  bool accumulates_dx() const override { return true; }

 private:
  DropoutParams params(const Net& net, int64_t n, bool training) const {
    const Shape& f = net.features(inputs[0]);
    if (net.layout(inputs[0]) == Layout::kChannels)
      return DropoutParams::conv_channels(net.B(), n, f[0], f.numel_from(1), p_, training);
    return DropoutParams::model_major(net.B(), n * f.numel(), p_, training);
  }
  DropoutSaved saved(Net& net) const {
    return {net.saved(mask_).leading(net.value(inputs[0]).shape)};
  }
  float p_;
  int mask_;
  DropoutParams last_;
};

}  // namespace

namespace {
Value activation(Net& net, Value x, ActivationParams p) {
  expect_not_shared(net, x, activation_name(p.kind));
  return net.add_node(std::make_unique<ActivationNode>(p), {x}, net.features(x), net.layout(x));
}
}  // namespace

Value Net::relu(Value x) { return activation(*this, x, {.kind = ActivationKind::kRelu}); }

Value Net::relu6(Value x) { return activation(*this, x, {.kind = ActivationKind::kRelu6}); }

Value Net::leaky_relu(Value x, float negative_slope) {
  return activation(*this, x,
                    {.kind = ActivationKind::kLeakyRelu, .negative_slope = negative_slope});
}

Value Net::tanh(Value x) { return activation(*this, x, {.kind = ActivationKind::kTanh}); }

Value Net::sigmoid(Value x) { return activation(*this, x, {.kind = ActivationKind::kSigmoid}); }

Value Net::gelu(Value x) { return activation(*this, x, {.kind = ActivationKind::kGelu}); }

Value Net::hardswish(Value x) { return activation(*this, x, {.kind = ActivationKind::kHardswish}); }

Value Net::hardsigmoid(Value x) {
  return activation(*this, x, {.kind = ActivationKind::kHardsigmoid});
}

Value Net::scale_channels(Value x, Value scale) {
  expect_image(*this, x, "ScaleChannels");
  expect_not_shared(*this, x, "ScaleChannels");
  expect_not_shared(*this, scale, "ScaleChannels");
  const Shape& f = features(x);
  HFTA_CHECK(layout(scale) == Layout::kChannels && features(scale) == Shape({f[0], 1, 1}),
             "ScaleChannels: the scale has features {}, expected [{}, 1, 1] (one per channel of "
             "the input {}) in the channel layout",
             features(scale).str(), f[0], f.str());
  ScaleChannelsParams p{.B = B(), .N = capacity(), .C = f[0], .HW = f[1] * f[2]};
  return add_node(std::make_unique<ScaleChannelsNode>(p), {x, scale}, f, Layout::kChannels);
}

Value Net::flatten(Value x) {
  expect_image(*this, x, "Flatten");
  expect_not_shared(*this, x, "Flatten");
  const Shape& f = features(x);
  FlattenParams p{.B = B(), .N = capacity(), .C = f[0], .H = f[1], .W = f[2]};
  return add_node(std::make_unique<FlattenNode>(p), {x}, {p.features()}, Layout::kRows);
}

Value Net::add(Value a, Value b) {
  expect_not_shared(*this, a, "Add");
  expect_not_shared(*this, b, "Add");
  HFTA_CHECK(features(a) == features(b) && layout(a) == layout(b),
             "Add: the operands have features {} and {} (or different layouts); a residual "
             "connection needs equal shapes (use a strided 1x1 conv on the skip path)",
             features(a).str(), features(b).str());
  return add_node(std::make_unique<AddNode>(), {a, b}, features(a), layout(a));
}

Value Net::dropout(Value x, float p) {
  expect_not_shared(*this, x, "Dropout");
  p = spec_.dropout.value_or(p);
  HFTA_CHECK(p >= 0.0f && p < 1.0f, "Dropout: p must be in [0, 1), got {}", p);
  const int mask = add_saved(batch_shape(x, capacity()));
  return add_node(std::make_unique<DropoutNode>(p, mask), {x}, features(x), layout(x));
}

}  // namespace hfta
