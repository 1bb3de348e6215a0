// Point-cloud ops (PointNet): per-point values [L, C] in the row layout, each node wrapping one
// fused op for all B models.
#include <fmt/format.h>

#include <vector>

#include "core/error.h"
#include "fused_ops/add_identity.h"
#include "fused_ops/batchnorm1d.h"
#include "fused_ops/bmm.h"
#include "fused_ops/concat.h"
#include "fused_ops/cross_entropy.h"
#include "fused_ops/linear.h"
#include "fused_ops/max_points.h"
#include "fused_ops/repeat_points.h"
#include "fused_ops/transform_regularizer.h"
#include "models/net.h"
#include "models/rows_linear_node.h"

namespace hfta {

namespace {

// Points per sample and channels of a per-point value ([L, C]); shared inputs may be in any
// layout (the minibatch is [n, L, C] either way).
struct PointShape {
  int64_t L = 1, C = 1;
};
PointShape expect_points(const Net& net, Value x, const std::string& op) {
  const Shape& f = net.features(x);
  HFTA_CHECK(f.rank() == 2 && (net.shared(x) || net.layout(x) == Layout::kRows),
             "{} needs per-point features [L, C] (points of C channels), got {}", op, f.str());
  return {f[0], f[1]};
}

class BatchNorm1dNode : public Node {
 public:
  BatchNorm1dNode(std::string name, BatchNorm1dParams p, int64_t L, int weight, int bias, int mean,
                  int var, int batches, int saved_mean, int saved_rstd)
      : name_(std::move(name)),
        p_(p),
        L_(L),
        weight_(weight),
        bias_(bias),
        mean_(mean),
        var_(var),
        batches_(batches),
        saved_mean_(saved_mean),
        saved_rstd_(saved_rstd) {}
  std::string describe() const override {
    return fmt::format(
        "{}: BatchNorm1d({}){}", name_, p_.C,
        p_.activation ? fmt::format(" + {}", activation_name(p_.activation->kind)) : "");
  }
  void forward(Net& net, int64_t n, bool training) override {
    const BatchNorm1dParams p = rows(n, training);
    last_training_ = training;
    batchnorm1d_forward(p, {.x = net.value(inputs[0]).reshaped(p.x_shape()),
                            .gamma = net.param(weight_).value,
                            .beta = net.param(bias_).value,
                            .running_mean = net.buffer(mean_).value,
                            .running_var = net.buffer(var_).value,
                            .saved = saved(net),
                            .y = net.value(output).reshaped(p.y_shape())});
    if (training) add_one(net.buffer(batches_).value);  // num_batches_tracked, on any device
  }
  void backward(Net& net, int64_t n) override {
    const BatchNorm1dParams p = rows(n, last_training_);
    InputGrad dx = net.input_grad(*this, 0);
    batchnorm1d_backward(p, {.x = net.value(inputs[0]).reshaped(p.x_shape()),
                             .gamma = net.param(weight_).value,
                             .beta = net.param(bias_).value,
                             .y = net.value(output).reshaped(p.y_shape()),
                             .saved = saved(net),
                             .dy = net.grad(output).reshaped(p.y_shape()),
                             .dx = dx.view.empty() ? dx.view : dx.view.reshaped(p.x_shape()),
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
  BatchNorm1dParams rows(int64_t n, bool training) const {
    BatchNorm1dParams p = p_;
    p.R = n * L_;
    p.training = training;
    return p;
  }
  BatchNorm1dSaved saved(Net& net) const {
    return {net.saved(saved_mean_), net.saved(saved_rstd_)};
  }
  std::string name_;
  BatchNorm1dParams p_;
  int64_t L_;
  int weight_, bias_, mean_, var_, batches_, saved_mean_, saved_rstd_;
  bool last_training_ = true;
};

class BmmNode : public Node {
 public:
  BmmNode(BmmParams p, bool shared_x) : p_(p), shared_x_(shared_x) {}
  std::string describe() const override {
    return fmt::format("Bmm([{}, {}] x [{}, {}])", p_.L, p_.K, p_.K, p_.M);
  }
  void forward(Net& net, int64_t n, bool) override {
    BmmParams p = p_;
    p.N = n;
    const TensorView t = net.value(inputs[1]), y = net.value(output);
    if (!shared_x_) return bmm_forward(p, {.x = net.value(inputs[0]), .t = t, .y = y});
    // Shared points: every model multiplies the same minibatch by its own matrices, one model
    // at a time, so the points are never copied B times.
    p.B = 1;
    const TensorView x = net.value(inputs[0]).reshaped(p.x_shape());
    for (int64_t b = 0; b < p_.B; ++b)
      bmm_forward(p, {.x = x,
                      .t = t.replica(b).reshaped(p.t_shape()),
                      .y = y.replica(b).reshaped(p.y_shape())});
  }
  void backward(Net& net, int64_t n) override {
    BmmParams p = p_;
    p.N = n;
    const TensorView t = net.value(inputs[1]), dy = net.grad(output);
    InputGrad dx = shared_x_ ? InputGrad{} : net.input_grad(*this, 0);
    InputGrad dt = net.input_grad(*this, 1);
    if (!shared_x_)
      return bmm_backward(p, {.x = net.value(inputs[0]),
                              .t = t,
                              .dy = dy,
                              .dx = dx.view,
                              .dt = dt.view,
                              .accumulate_dx = dx.accumulate,
                              .accumulate_dt = dt.accumulate});
    if (dt.view.empty()) return;  // the shared minibatch takes no gradient
    p.B = 1;
    const TensorView x = net.value(inputs[0]).reshaped(p.x_shape());
    for (int64_t b = 0; b < p_.B; ++b)
      bmm_backward(p, {.x = x,
                       .t = t.replica(b).reshaped(p.t_shape()),
                       .dy = dy.replica(b).reshaped(p.y_shape()),
                       .dt = dt.view.replica(b).reshaped(p.t_shape()),
                       .accumulate_dt = dt.accumulate});
  }
  bool accumulates_dx() const override { return true; }
  double forward_flops() const override { return 2.0 * p_.L * p_.K * p_.M; }
  double backward_flops(bool with_dx) const override {
    return forward_flops() * (with_dx ? 2.0 : 1.0);
  }

 private:
  BmmParams p_;
  bool shared_x_;
};

class MaxOverPointsNode : public Node {
 public:
  MaxOverPointsNode(MaxOverPointsParams p, int argmax) : p_(p), argmax_(argmax) {}
  std::string describe() const override {
    return fmt::format("MaxOverPoints({} points, {} channels)", p_.L, p_.C);
  }
  void forward(Net& net, int64_t n, bool) override {
    const MaxOverPointsParams p = rows(n);
    max_over_points_forward(p, {.x = net.value(inputs[0]).reshaped(p.x_shape()),
                                .saved = saved(net, p),
                                .y = net.value(output)});
  }
  void backward(Net& net, int64_t n) override {
    const MaxOverPointsParams p = rows(n);
    InputGrad dx = net.input_grad(*this, 0);
    if (dx.view.empty()) return;
    max_over_points_backward(p, {.saved = saved(net, p),
                                 .dy = net.grad(output),
                                 .dx = dx.view.reshaped(p.x_shape()),
                                 .accumulate_dx = dx.accumulate});
  }
  bool accumulates_dx() const override { return true; }

 private:
  MaxOverPointsParams rows(int64_t n) const {
    MaxOverPointsParams p = p_;
    p.N = n;
    return p;
  }
  MaxOverPointsSaved saved(Net& net, const MaxOverPointsParams& p) const {
    return {net.saved_index(argmax_).leading(p.argmax_shape())};
  }
  MaxOverPointsParams p_;
  int argmax_;
};

class RepeatPointsNode : public Node {
 public:
  explicit RepeatPointsNode(RepeatPointsParams p) : p_(p) {}
  std::string describe() const override {
    return fmt::format("RepeatPoints({} points, {} channels)", p_.L, p_.C);
  }
  void forward(Net& net, int64_t n, bool) override {
    RepeatPointsParams p = p_;
    p.N = n;
    repeat_points_forward(
        p, {.x = net.value(inputs[0]), .y = net.value(output).reshaped(p.y_shape())});
  }
  void backward(Net& net, int64_t n) override {
    RepeatPointsParams p = p_;
    p.N = n;
    InputGrad dx = net.input_grad(*this, 0);
    if (dx.view.empty()) return;
    repeat_points_backward(p, {.dy = net.grad(output).reshaped(p.y_shape()),
                               .dx = dx.view,
                               .accumulate_dx = dx.accumulate});
  }
  bool accumulates_dx() const override { return true; }

 private:
  RepeatPointsParams p_;
};

// Rows layout: every input is [B, n*rows_per_sample, C_i].
class ConcatNode : public Node {
 public:
  ConcatNode(ConcatParams p, int64_t rows_per_sample) : p_(p), rows_(rows_per_sample) {}
  std::string describe() const override { return fmt::format("Concat({} inputs)", p_.inputs); }
  void forward(Net& net, int64_t n, bool) override {
    const ConcatParams p = rows(n);
    ConcatForwardArgs a{.y = net.value(output).reshaped(p.y_shape())};
    for (int i = 0; i < p.inputs; ++i)
      a.x[static_cast<size_t>(i)] =
          net.value(inputs[static_cast<size_t>(i)]).reshaped(p.input_shape(i));
    concat_forward(p, a);
  }
  void backward(Net& net, int64_t n) override {
    const ConcatParams p = rows(n);
    ConcatBackwardArgs a{.dy = net.grad(output).reshaped(p.y_shape())};
    for (int i = 0; i < p.inputs; ++i) {
      InputGrad dx = net.input_grad(*this, i);
      if (dx.view.empty()) continue;
      a.dx[static_cast<size_t>(i)] = dx.view.reshaped(p.input_shape(i));
      a.accumulate_dx[static_cast<size_t>(i)] = dx.accumulate;
    }
    concat_backward(p, a);
  }
  bool accumulates_dx() const override { return true; }

 private:
  ConcatParams rows(int64_t n) const {
    ConcatParams p = p_;
    p.R = n * rows_;
    return p;
  }
  ConcatParams p_;
  int64_t rows_;
};

// Cross-entropy over n*L points per model: the classifier's op with N = n*L.
class PointCrossEntropyNode : public Node {
 public:
  PointCrossEntropyNode(int64_t L, int64_t classes, int probs)
      : L_(L), classes_(classes), probs_(probs) {}
  std::string describe() const override {
    return fmt::format("PointCrossEntropy({} points, {} classes)", L_, classes_);
  }
  void forward(Net& net, int64_t n, bool) override {
    const CrossEntropyParams p{net.B(), n * L_, classes_};
    cross_entropy_forward(p, {.logits = net.value(inputs[0]).reshaped(p.logits_shape()),
                              .labels = labels(net, p),
                              .losses = net.value(output),
                              .saved = saved(net, p)});
  }
  void backward(Net& net, int64_t n) override {
    const CrossEntropyParams p{net.B(), n * L_, classes_};
    InputGrad dlogits = net.input_grad(*this, 0);
    if (dlogits.view.empty()) return;
    cross_entropy_backward(p, {.saved = saved(net, p),
                               .labels = labels(net, p),
                               .dlosses = net.grad(output),
                               .dlogits = dlogits.view.reshaped(p.logits_shape())});
  }

 private:
  IndexView labels(Net& net, const CrossEntropyParams& p) const {
    return net.index_value(inputs[1]).leading(p.labels_shape());
  }
  CrossEntropySaved saved(Net& net, const CrossEntropyParams& p) const {
    return {net.saved(probs_).leading(p.logits_shape())};
  }
  int64_t L_, classes_;
  int probs_;
};

// y = x + I per sample (x viewed as [k, k]); dx = dy.
class AddIdentityNode : public Node {
 public:
  explicit AddIdentityNode(int64_t k) : k_(k) {}
  std::string describe() const override { return fmt::format("AddIdentity({0}x{0})", k_); }
  void forward(Net& net, int64_t n, bool) override {
    const AddIdentityParams p = rows(net, n);
    add_identity_forward(p, {.x = net.value(inputs[0]).reshaped(p.x_shape()),
                             .y = net.value(output).reshaped(p.y_shape())});
  }
  void backward(Net& net, int64_t n) override {
    InputGrad dx = net.input_grad(*this, 0);
    if (dx.view.empty()) return;
    const AddIdentityParams p = rows(net, n);
    add_identity_backward(p, {.dy = net.grad(output).reshaped(p.y_shape()),
                              .dx = dx.view.reshaped(p.x_shape()),
                              .accumulate_dx = dx.accumulate});
  }
  bool accumulates_dx() const override { return true; }

 private:
  AddIdentityParams rows(const Net& net, int64_t n) const {
    return {.B = net.B(), .N = n, .k = k_};
  }
  int64_t k_;
};

// loss_b = scale / n * sum_s ||A_bs A_bs^T - I||_F (fused_ops/transform_regularizer.h).
class TransformRegularizerNode : public Node {
 public:
  TransformRegularizerNode(int64_t k, float scale) : k_(k), scale_(scale) {}
  std::string describe() const override {
    return fmt::format("TransformRegularizer({0}x{0}, scale {1})", k_, scale_);
  }
  void forward(Net& net, int64_t n, bool) override {
    const TransformRegularizerParams p = params(net, n);
    transform_regularizer_forward(
        p, {.a = net.value(inputs[0]).reshaped(p.a_shape()), .loss = net.value(output)});
  }
  void backward(Net& net, int64_t n) override {
    InputGrad da = net.input_grad(*this, 0);
    if (da.view.empty()) return;
    const TransformRegularizerParams p = params(net, n);
    transform_regularizer_backward(p, {.a = net.value(inputs[0]).reshaped(p.a_shape()),
                                       .dloss = net.grad(output),
                                       .da = da.view.reshaped(p.a_shape()),
                                       .accumulate_dx = da.accumulate});
  }
  bool accumulates_dx() const override { return true; }

 private:
  TransformRegularizerParams params(const Net& net, int64_t n) const {
    return {.B = net.B(), .N = n, .k = k_, .scale = scale_};
  }
  int64_t k_;
  float scale_;
};

}  // namespace

Value Net::conv1d(Value x, const std::string& name, const LinearSpec& s) {
  const std::string what = scoped(name);
  const PointShape ps = expect_points(*this, x, what);
  HFTA_CHECK(s.out_features > 0, "{}: out channels must be positive, got {}", what, s.out_features);
  LinearParams p{.B = B(),
                 .N = capacity() * ps.L,
                 .in_features = ps.C,
                 .out_features = s.out_features,
                 .bias = s.bias,
                 .shared_input = shared(x)};
  // PyTorch's fans for a [out, in, 1] weight.
  const int weight = add_param(name + ".weight", p.weight_shape().drop_front(), s.weight_init, ps.C,
                               s.out_features, ParamKind::kWeight,
                               /*torch_transposed=*/true);
  params_[static_cast<size_t>(weight)].torch_kernel1 = true;
  const int bias = s.bias ? add_param(name + ".bias", p.bias_shape().drop_front(), s.bias_init,
                                      ps.C, s.out_features, ParamKind::kBias)
                          : -1;
  return add_node(std::make_unique<RowsLinearNode>(
                      fmt::format("{}: Conv1d({}, {}, kernel 1{})", what, p.in_features,
                                  p.out_features, p.bias ? "" : ", no bias"),
                      p, ps.L, weight, bias),
                  {x}, {ps.L, s.out_features}, Layout::kRows);
}

Value Net::batchnorm1d(Value x, const std::string& name, double eps, double momentum) {
  const std::string what = scoped(name);
  HFTA_CHECK(!shared(x),
             "{}: BatchNorm1d cannot read the minibatch directly: start the model "
             "with a Conv1d or Linear",
             what);
  const Shape& f = features(x);
  HFTA_CHECK(layout(x) == Layout::kRows && (f.rank() == 1 || f.rank() == 2),
             "{}: BatchNorm1d needs [C] rows or [L, C] points in the row layout, got {}", what,
             f.str());
  const int64_t L = f.rank() == 2 ? f[0] : 1, C = f[f.rank() - 1];
  BatchNorm1dParams p{.B = B(), .R = capacity() * L, .C = C, .eps = eps, .momentum = momentum};
  try {
    BatchNorm1dParams shapes = p;
    shapes.training = false;  // whether a batch has > 1 row depends on each forward
    check_batchnorm1d_params(shapes);
  } catch (const Error& e) {
    fail("{}: {}", what, e.what());
  }
  const Shape c{C};
  const int weight = add_param(name + ".weight", c, Init::constant(1.0f), C, C, ParamKind::kNorm);
  const int bias = add_param(name + ".bias", c, Init::constant(0.0f), C, C, ParamKind::kNorm);
  const int mean = add_buffer(name + ".running_mean", c, 0.0f, false);
  const int var = add_buffer(name + ".running_var", c, 1.0f, false);
  const int batches = add_buffer(name + ".num_batches_tracked", Shape{}, 0.0f, true);
  const int saved_mean = add_saved(p.param_shape()), saved_rstd = add_saved(p.param_shape());
  return add_node(std::make_unique<BatchNorm1dNode>(what, p, L, weight, bias, mean, var, batches,
                                                    saved_mean, saved_rstd),
                  {x}, f, Layout::kRows);
}

Value Net::bmm(Value x, Value t) {
  const PointShape ps = expect_points(*this, x, "Bmm");
  const Shape& ft = features(t);
  HFTA_CHECK(!shared(t) && layout(t) == Layout::kRows && ft.rank() == 2 && ft[0] == ps.C,
             "Bmm: points [{}, {}] need per-model [{}, M] matrices, got {}", ps.L, ps.C, ps.C,
             ft.str());
  BmmParams p{.B = B(), .N = capacity(), .L = ps.L, .K = ps.C, .M = ft[1]};
  return add_node(std::make_unique<BmmNode>(p, shared(x)), {x, t}, {ps.L, ft[1]}, Layout::kRows);
}

Value Net::max_over_points(Value x) {
  const PointShape ps = expect_points(*this, x, "MaxOverPoints");
  HFTA_CHECK(!shared(x),
             "MaxOverPoints cannot read the minibatch directly: start the model "
             "with a Conv1d");
  MaxOverPointsParams p{.B = B(), .N = capacity(), .L = ps.L, .C = ps.C};
  const int argmax = add_saved(p.argmax_shape());
  return add_node(std::make_unique<MaxOverPointsNode>(p, argmax), {x}, {ps.C}, Layout::kRows);
}

Value Net::add_identity(Value x, int64_t k) {
  const Shape& f = features(x);
  HFTA_CHECK(!shared(x) && layout(x) == Layout::kRows && f.rank() == 1 && k >= 1 && f[0] == k * k,
             "AddIdentity({0}x{0}) needs per-model [{1}] rows, got {2}", k, k * k, f.str());
  return add_node(std::make_unique<AddIdentityNode>(k), {x}, {k, k}, Layout::kRows);
}

Value Net::repeat_points(Value x, int64_t L) {
  const Shape& f = features(x);
  HFTA_CHECK(!shared(x) && layout(x) == Layout::kRows && f.rank() == 1,
             "RepeatPoints needs per-model [C] rows (a global feature), got {}", f.str());
  HFTA_CHECK(L >= 1, "RepeatPoints: points per sample must be positive, got {}", L);
  RepeatPointsParams p{.B = B(), .N = capacity(), .L = L, .C = f[0]};
  return add_node(std::make_unique<RepeatPointsNode>(p), {x}, {L, f[0]}, Layout::kRows);
}

Value Net::concat(const std::vector<Value>& xs) {
  HFTA_CHECK(!xs.empty() && static_cast<int>(xs.size()) <= kMaxConcatInputs,
             "Concat takes 1 to {} values, got {}", kMaxConcatInputs, xs.size());
  const Shape& first = features(xs[0]);
  ConcatParams p{.layout = ConcatLayout::kRows, .B = B(), .inputs = static_cast<int>(xs.size())};
  Shape out = first;
  out[out.rank() - 1] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Shape& f = features(xs[i]);
    bool same_lead = f.rank() == first.rank() && f.rank() >= 1;
    for (int d = 0; same_lead && d + 1 < f.rank(); ++d) same_lead = f[d] == first[d];
    HFTA_CHECK(!shared(xs[i]) && layout(xs[i]) == Layout::kRows && same_lead,
               "Concat needs per-model row values with equal leading axes, got {} and {}",
               first.str(), f.str());
    p.C[i] = f[f.rank() - 1];
    out[out.rank() - 1] += p.C[i];
  }
  const int64_t rows_per_sample = first.numel() / first[first.rank() - 1];
  p.R = capacity() * rows_per_sample;
  return add_node(std::make_unique<ConcatNode>(p, rows_per_sample), xs, out, Layout::kRows);
}

Value Net::point_cross_entropy(Value logits, Value labels) {
  const PointShape ps = expect_points(*this, logits, "PointCrossEntropy");
  HFTA_CHECK(!shared(logits), "PointCrossEntropy needs per-model logits [L, K]");
  HFTA_CHECK(shared(labels) && features(labels) == Shape{ps.L},
             "PointCrossEntropy needs the shared labels, one int32 per point ([{}] per sample)",
             ps.L);
  const int probs = add_saved(Shape{B(), capacity() * ps.L, ps.C});
  Value loss = add_node(std::make_unique<PointCrossEntropyNode>(ps.L, ps.C, probs),
                        {logits, labels}, Shape{}, Layout::kPerModel);
  add_loss(loss);
  return loss;
}

Value Net::transform_regularizer(Value a, float scale) {
  const Shape& f = features(a);
  HFTA_CHECK(!shared(a) && layout(a) == Layout::kRows && f.rank() == 2 && f[0] == f[1],
             "TransformRegularizer needs per-model [k, k] matrices, got {}", f.str());
  Value loss = add_node(std::make_unique<TransformRegularizerNode>(f[0], scale), {a}, Shape{},
                        Layout::kPerModel);
  add_loss(loss);
  return loss;
}

}  // namespace hfta
