// The ops a Net records: each node wraps one fused op for all B models of the array. The layers
// with parameters, pooling and the loss are here; the elementwise and reshaping ops are in
// models/ops_elementwise.cpp.
#include <fmt/format.h>

#include "core/error.h"
#include "fused_ops/add_identity.h"
#include "fused_ops/batchnorm2d.h"
#include "fused_ops/conv2d.h"
#include "fused_ops/cross_entropy.h"
#include "fused_ops/linear.h"
#include "fused_ops/pool2d.h"
#include "models/net.h"
#include "models/op_checks.h"

namespace hfta {

using op_checks::expect_image;
using op_checks::expect_not_shared;
using op_checks::with_rows;

namespace {

std::string no_bias(bool bias) { return bias ? "" : ", no bias"; }

class Conv2dNode : public Node {
 public:
  // saved: the net's saved tensor for the weights forward keeps for backward, or -1
  // (conv2d_saved_floats).
  Conv2dNode(std::string name, Conv2dParams p, int weight, int bias, int saved)
      : name_(std::move(name)), p_(p), weight_(weight), bias_(bias), saved_(saved) {}
  std::string describe() const override {
    return fmt::format("{}: Conv2d({}, {}, kernel {}, stride {}, pad {}{}{})", name_,
                       p_.in_channels, p_.out_channels, p_.kernel_h, p_.stride_h, p_.pad_h,
                       p_.groups > 1 ? fmt::format(", groups {}", p_.groups) : "",
                       no_bias(p_.bias));
  }
  void forward(Net& net, int64_t n, bool) override {
    Conv2dParams p = with_rows(p_, n);
    conv2d_forward(p, {.x = input(net, p),
                       .weight = net.param(weight_).value,
                       .bias = bias_value(net),
                       .y = net.value(output),
                       .saved = saved_value(net)});
  }
  void backward(Net& net, int64_t n) override {
    Conv2dParams p = with_rows(p_, n);
    InputGrad dx = net.input_grad(*this, 0);
    conv2d_backward(p, {.x = input(net, p),
                        .weight = net.param(weight_).value,
                        .dy = net.grad(output),
                        .dx = dx.view,
                        .dweight = net.param(weight_).grad,
                        .dbias = bias_ >= 0 ? net.param(bias_).grad : TensorView(),
                        .accumulate_dx = dx.accumulate,
                        .accumulate_dparams = !net.param_grads_fresh(),
                        .saved = saved_value(net)});
  }
  bool accumulates_dx() const override { return true; }
  bool writes_param_grads() const override { return true; }
  bool backward_reads_output() const override { return false; }
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
  TensorView input(Net& net, const Conv2dParams& p) const {
    return net.value(inputs[0]).reshaped(p.x_shape());
  }
  TensorView bias_value(Net& net) const {
    return bias_ >= 0 ? net.param(bias_).value : TensorView();
  }
  TensorView saved_value(Net& net) const { return saved_ >= 0 ? net.saved(saved_) : TensorView(); }
  std::string name_;
  Conv2dParams p_;
  int weight_, bias_, saved_;
};

class LinearNode : public Node {
 public:
  LinearNode(std::string name, LinearParams p, int weight, int bias)
      : name_(std::move(name)), p_(p), weight_(weight), bias_(bias) {}
  std::string describe() const override {
    return fmt::format("{}: Linear({}, {}{})", name_, p_.in_features, p_.out_features,
                       no_bias(p_.bias));
  }
  void forward(Net& net, int64_t n, bool) override {
    LinearParams p = with_rows(p_, n);
    linear_forward(p, {.x = net.value(inputs[0]).reshaped(p.x_shape()),
                       .weight = net.param(weight_).value,
                       .bias = bias_ >= 0 ? net.param(bias_).value : TensorView(),
                       .y = net.value(output)});
  }
  void backward(Net& net, int64_t n) override {
    LinearParams p = with_rows(p_, n);
    InputGrad dx = net.input_grad(*this, 0);
    linear_backward(p, {.x = net.value(inputs[0]).reshaped(p.x_shape()),
                        .weight = net.param(weight_).value,
                        .dy = net.grad(output),
                        .dx = dx.view.empty() ? dx.view : dx.view.reshaped(p.x_shape()),
                        .dweight = net.param(weight_).grad,
                        .dbias = bias_ >= 0 ? net.param(bias_).grad : TensorView(),
                        .accumulate_dx = dx.accumulate,
                        .accumulate_dparams = !net.param_grads_fresh()});
  }
  bool accumulates_dx() const override { return true; }
  bool writes_param_grads() const override { return true; }
  bool backward_reads_output() const override { return false; }
  double forward_flops() const override { return 2.0 * p_.in_features * p_.out_features; }
  double backward_flops(bool with_dx) const override {
    return forward_flops() * (with_dx ? 2.0 : 1.0);
  }

 private:
  std::string name_;
  LinearParams p_;
  int weight_, bias_;
};

class BatchNorm2dNode : public Node {
 public:
  BatchNorm2dNode(std::string name, BatchNorm2dParams p, int weight, int bias, int mean, int var,
                  int batches, int saved_mean, int saved_rstd)
      : name_(std::move(name)),
        p_(p),
        weight_(weight),
        bias_(bias),
        mean_(mean),
        var_(var),
        batches_(batches),
        saved_mean_(saved_mean),
        saved_rstd_(saved_rstd) {}
  std::string describe() const override {
    return fmt::format(
        "{}: BatchNorm2d({}){}", name_, p_.C,
        p_.activation ? fmt::format(" + {}", activation_name(p_.activation->kind)) : "");
  }
  void forward(Net& net, int64_t n, bool training) override {
    BatchNorm2dParams p = rows(n, training);
    last_training_ = training;
    batchnorm2d_forward(p, {.x = net.value(inputs[0]),
                            .gamma = net.param(weight_).value,
                            .beta = net.param(bias_).value,
                            .running_mean = net.buffer(mean_).value,
                            .running_var = net.buffer(var_).value,
                            .saved = saved(net),
                            .y = net.value(output)});
    if (training) add_one(net.buffer(batches_).value);  // num_batches_tracked, on any device
  }
  void backward(Net& net, int64_t n) override {
    BatchNorm2dParams p = rows(n, last_training_);
    InputGrad dx = net.input_grad(*this, 0);
    batchnorm2d_backward(p, {.x = net.value(inputs[0]),
                             .gamma = net.param(weight_).value,
                             .beta = net.param(bias_).value,
                             .y = net.value(output),
                             .saved = saved(net),
                             .dy = net.grad(output),
                             .dx = dx.view,
                             .dgamma = net.param(weight_).grad,
                             .dbeta = net.param(bias_).grad,
                             .accumulate_dx = dx.accumulate});
  }
  bool accumulates_dx() const override { return true; }
  bool backward_reads_output() const override { return false; }
  bool absorb_activation(const ActivationParams& a) override {
    if (p_.activation || !batchnorm_fuses(a)) return false;
    p_.activation = a;
    return true;
  }

 private:
  BatchNorm2dParams rows(int64_t n, bool training) const {
    BatchNorm2dParams p = with_rows(p_, n);
    p.training = training;
    return p;
  }
  BatchNorm2dSaved saved(Net& net) const {
    return {net.saved(saved_mean_), net.saved(saved_rstd_)};
  }
  std::string name_;
  BatchNorm2dParams p_;
  int weight_, bias_, mean_, var_, batches_, saved_mean_, saved_rstd_;
  bool last_training_ = true;
};

class Pool2dNode : public Node {
 public:
  Pool2dNode(Pool2dParams p, int argmax) : p_(p), argmax_(argmax) {}
  std::string describe() const override {
    return fmt::format("{}Pool2d(kernel {}, stride {}, pad {})",
                       p_.kind == PoolKind::kMax ? "Max" : "Avg", p_.kernel_h,
                       p_.effective_stride_h(), p_.pad_h);
  }
  void forward(Net& net, int64_t n, bool) override {
    Pool2dParams p = with_rows(p_, n);
    pool2d_forward(p, {.x = net.value(inputs[0]), .saved = saved(net, p), .y = net.value(output)});
  }
  void backward(Net& net, int64_t n) override {
    Pool2dParams p = with_rows(p_, n);
    InputGrad dx = net.input_grad(*this, 0);
    if (dx.view.empty()) return;
    pool2d_backward(p, {.saved = saved(net, p),
                        .dy = net.grad(output),
                        .dx = dx.view,
                        .accumulate_dx = dx.accumulate});
  }
  bool accumulates_dx() const override { return true; }
  bool backward_reads_output() const override { return false; }
  double forward_flops() const override {
    Pool2dParams one = p_;
    one.B = 1;
    one.N = 1;
    return one.forward_flops();
  }

 private:
  Pool2dSaved saved(Net& net, const Pool2dParams& p) const {
    if (argmax_ < 0) return {};
    return {net.saved_index(argmax_).leading(p.argmax_shape())};
  }
  Pool2dParams p_;
  int argmax_;
};

class AdaptiveAvgPool2dNode : public Node {
 public:
  explicit AdaptiveAvgPool2dNode(AdaptiveAvgPool2dParams p) : p_(p) {}
  std::string describe() const override {
    return fmt::format("AdaptiveAvgPool2d({}, {})", p_.out_h, p_.out_w);
  }
  void forward(Net& net, int64_t n, bool) override {
    const AdaptiveAvgPool2dParams p = with_rows(p_, n);
    adaptive_avg_pool2d_forward(p, {.x = net.value(inputs[0]), .y = net.value(output)});
  }
  void backward(Net& net, int64_t n) override {
    const AdaptiveAvgPool2dParams p = with_rows(p_, n);
    InputGrad dx = net.input_grad(*this, 0);
    if (dx.view.empty()) return;
    adaptive_avg_pool2d_backward(
        p, {.dy = net.grad(output), .dx = dx.view, .accumulate_dx = dx.accumulate});
  }
  bool accumulates_dx() const override { return true; }
  bool backward_reads_output() const override { return false; }

 private:
  AdaptiveAvgPool2dParams p_;
};

class CrossEntropyNode : public Node {
 public:
  CrossEntropyNode(int64_t classes, int probs) : classes_(classes), probs_(probs) {}
  std::string describe() const override { return fmt::format("CrossEntropy({})", classes_); }
  void forward(Net& net, int64_t n, bool) override {
    CrossEntropyParams p{net.B(), n, classes_};
    cross_entropy_forward(p, {.logits = net.value(inputs[0]),
                              .labels = net.index_value(inputs[1]),
                              .losses = net.value(output),
                              .saved = saved(net, p)});
  }
  void backward(Net& net, int64_t n) override {
    CrossEntropyParams p{net.B(), n, classes_};
    InputGrad dlogits = net.input_grad(*this, 0);
    if (dlogits.view.empty()) return;
    cross_entropy_backward(p, {.saved = saved(net, p),
                               .labels = net.index_value(inputs[1]),
                               .dlosses = net.grad(output),
                               .dlogits = dlogits.view});
  }

 private:
  CrossEntropySaved saved(Net& net, const CrossEntropyParams& p) const {
    return {net.saved(probs_).leading(p.logits_shape())};
  }
  int64_t classes_;
  int probs_;
};

}  // namespace

Value Net::conv2d(Value x, const std::string& name, const Conv2dSpec& s) {
  const std::string what = scoped(name);
  expect_image(*this, x, what);
  const Shape& f = features(x);
  Conv2dParams p{.B = B(),
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
                 .groups = s.groups,
                 .bias = s.bias,
                 .shared_input = shared(x)};
  try {
    check_conv2d_params(p);
  } catch (const Error& e) {
    fail("{}: {}", what, e.what());
  }
  // PyTorch's fans for a [C_out, C_in/groups, k, k] weight.
  const int64_t area = s.kernel * s.kernel;
  const int64_t fan_in = (f[0] / s.groups) * area, fan_out = s.out_channels * area;
  const int weight = add_param(name + ".weight", p.weight_shape().drop_front(), s.weight_init,
                               fan_in, fan_out, ParamKind::kWeight);
  const int bias = s.bias ? add_param(name + ".bias", p.bias_shape().drop_front(), s.bias_init,
                                      fan_in, fan_out, ParamKind::kBias)
                          : -1;
  // The CPU kernels' saved weights (conv2d.h); a device's kernels save nothing.
  const int64_t saved_floats = device() == Device::kCpu ? conv2d_saved_floats(p) : 0;
  const int saved = saved_floats > 0 ? add_saved(Shape{saved_floats}) : -1;
  return add_node(std::make_unique<Conv2dNode>(what, p, weight, bias, saved), {x},
                  {s.out_channels, p.out_h(), p.out_w()}, Layout::kChannels);
}

Value Net::linear(Value x, const std::string& name, const LinearSpec& s) {
  const std::string what = scoped(name);
  const Shape& f = features(x);
  HFTA_CHECK(shared(x) || (layout(x) == Layout::kRows && f.rank() == 1),
             "{}: Linear needs [F] features, got {}: add a flatten() before it", what, f.str());
  LinearParams p{.B = B(),
                 .N = capacity(),
                 .in_features = f.numel(),
                 .out_features = s.out_features,
                 .bias = s.bias,
                 .shared_input = shared(x)};
  HFTA_CHECK(s.out_features > 0, "{}: out_features must be positive, got {}", what, s.out_features);
  const int weight = add_param(name + ".weight", p.weight_shape().drop_front(), s.weight_init,
                               p.in_features, p.out_features, ParamKind::kWeight,
                               /*torch_transposed=*/true);
  const int bias = s.bias ? add_param(name + ".bias", p.bias_shape().drop_front(), s.bias_init,
                                      p.in_features, p.out_features, ParamKind::kBias)
                          : -1;
  return add_node(std::make_unique<LinearNode>(what, p, weight, bias), {x}, {s.out_features},
                  Layout::kRows);
}

Value Net::batchnorm2d(Value x, const std::string& name, double eps, double momentum) {
  const std::string what = scoped(name);
  expect_image(*this, x, what);
  expect_not_shared(*this, x, what);
  const Shape& f = features(x);
  BatchNorm2dParams p{
      .B = B(), .N = capacity(), .C = f[0], .H = f[1], .W = f[2], .eps = eps, .momentum = momentum};
  try {
    // Shapes and hyperparameters only: whether a training batch has more than one value per
    // channel depends on the rows of each forward.
    BatchNorm2dParams shapes = p;
    shapes.training = false;
    check_batchnorm2d_params(shapes);
  } catch (const Error& e) {
    fail("{}: {}", what, e.what());
  }
  const Shape c{f[0]};
  const int weight =
      add_param(name + ".weight", c, Init::constant(1.0f), f[0], f[0], ParamKind::kNorm);
  const int bias = add_param(name + ".bias", c, Init::constant(0.0f), f[0], f[0], ParamKind::kNorm);
  const int mean = add_buffer(name + ".running_mean", c, 0.0f, false);
  const int var = add_buffer(name + ".running_var", c, 1.0f, false);
  const int batches = add_buffer(name + ".num_batches_tracked", Shape{}, 0.0f, true);
  const int saved_mean = add_saved(p.param_shape()), saved_rstd = add_saved(p.param_shape());
  return add_node(std::make_unique<BatchNorm2dNode>(what, p, weight, bias, mean, var, batches,
                                                    saved_mean, saved_rstd),
                  {x}, f, Layout::kChannels);
}

Value Net::max_pool2d(Value x, int64_t kernel, int64_t stride, int64_t pad) {
  const std::string what = fmt::format("MaxPool2d({})", kernel);
  expect_image(*this, x, what);
  expect_not_shared(*this, x, what);
  const Shape& f = features(x);
  Pool2dParams p{.kind = PoolKind::kMax,
                 .B = B(),
                 .N = capacity(),
                 .C = f[0],
                 .H = f[1],
                 .W = f[2],
                 .kernel_h = kernel,
                 .kernel_w = kernel,
                 .stride_h = stride,
                 .stride_w = stride,
                 .pad_h = pad,
                 .pad_w = pad};
  try {
    check_pool2d_params(p);
  } catch (const Error& e) {
    fail("{}: {}", what, e.what());
  }
  const int argmax = add_saved(p.argmax_shape());
  return add_node(std::make_unique<Pool2dNode>(p, argmax), {x}, {f[0], p.out_h(), p.out_w()},
                  Layout::kChannels);
}

Value Net::adaptive_avg_pool2d(Value x, int64_t out_h, int64_t out_w) {
  const std::string what = fmt::format("AdaptiveAvgPool2d({}, {})", out_h, out_w);
  expect_image(*this, x, what);
  expect_not_shared(*this, x, what);
  HFTA_CHECK(out_h >= 1 && out_w >= 1, "{}: output size must be positive", what);
  const Shape& f = features(x);
  AdaptiveAvgPool2dParams p{
      .B = B(), .N = capacity(), .C = f[0], .H = f[1], .W = f[2], .out_h = out_h, .out_w = out_w};
  return add_node(std::make_unique<AdaptiveAvgPool2dNode>(p), {x}, {f[0], out_h, out_w},
                  Layout::kChannels);
}

Value Net::cross_entropy(Value logits, Value labels) {
  HFTA_CHECK(layout(logits) == Layout::kRows && features(logits).rank() == 1 && !shared(logits),
             "CrossEntropy needs per-model logits [K] in the row layout, got {}",
             features(logits).str());
  HFTA_CHECK(shared(labels) && features(labels).rank() == 0,
             "CrossEntropy needs the shared labels (one int32 per row)");
  const int64_t K = features(logits)[0];
  const int probs = add_saved(Shape{B(), capacity(), K});
  Value loss = add_node(std::make_unique<CrossEntropyNode>(K, probs), {logits, labels}, Shape{},
                        Layout::kPerModel);
  add_loss(loss);
  return loss;
}

}  // namespace hfta
