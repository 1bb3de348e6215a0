// The sequence ops a Net records (the "Sequence ops" of models/net.h): token activations are
// [B, n, T, D], which the row-wise fused ops read as [B, n*T, D] (n*T token rows per model).
#include <fmt/format.h>

#include <cmath>

#include "core/arena.h"
#include "core/device_memory.h"
#include "core/error.h"
#include "fused_ops/attention.h"
#include "fused_ops/cross_entropy.h"
#include "fused_ops/embedding.h"
#include "fused_ops/layernorm.h"
#include "fused_ops/linear.h"
#include "fused_ops/positions.h"
#include "models/net.h"
#include "models/rows_linear_node.h"

namespace hfta {

namespace {

// Token rows per sample of a [T, ..., F] value: every axis but the last.
int64_t rows_per_sample(const Shape& f) { return f.numel() / f[f.rank() - 1]; }

void expect_tokens(const Net& net, Value x, const std::string& op) {
  HFTA_CHECK(!net.shared(x) && net.layout(x) == Layout::kRows && net.features(x).rank() == 2,
             "{} needs per-model token features [T, D] (the output of an embedding), got {}", op,
             net.features(x).str());
}

class EmbeddingNode : public Node {
 public:
  EmbeddingNode(std::string name, EmbeddingParams p, int64_t T, int weight)
      : name_(std::move(name)), p_(p), T_(T), weight_(weight) {}
  std::string describe() const override {
    return fmt::format("{}: Embedding({}, {})", name_, p_.V, p_.D);
  }
  void forward(Net& net, int64_t n, bool) override {
    const EmbeddingParams p = rows(n);
    embedding_forward(p, {.weight = net.param(weight_).value,
                          .ids = net.index_value(inputs[0]).reshaped(p.ids_shape()),
                          .y = net.value(output).reshaped(p.y_shape())});
  }
  void backward(Net& net, int64_t n) override {
    const EmbeddingParams p = rows(n);
    embedding_backward(p, {.ids = net.index_value(inputs[0]).reshaped(p.ids_shape()),
                           .dy = net.grad(output).reshaped(p.y_shape()),
                           .dweight = net.param(weight_).grad});
  }

 private:
  EmbeddingParams rows(int64_t n) const {
    EmbeddingParams p = p_;
    p.R = n * T_;
    return p;
  }
  std::string name_;
  EmbeddingParams p_;
  int64_t T_;
  int weight_;
};

class PositionsNode : public Node {
 public:
  PositionsNode(PositionsParams p) : p_(p), table_(sinusoidal_table(p.T, p.D)) {}
  std::string describe() const override {
    return fmt::format("SinusoidalPositions({}, x_scale {})", p_.D, p_.x_scale);
  }
  void forward(Net& net, int64_t n, bool) override {
    PositionsParams p = p_;
    p.n = n;
    positions_forward(
        p, {.x = net.value(inputs[0]), .table = table(net.device()), .y = net.value(output)});
  }
  void backward(Net& net, int64_t n) override {
    InputGrad dx = net.input_grad(*this, 0);
    if (dx.view.empty()) return;
    PositionsParams p = p_;
    p.n = n;
    positions_backward(p, {.dy = net.grad(output), .dx = dx.view, .accumulate_dx = dx.accumulate});
  }
  bool accumulates_dx() const override { return true; }

 private:
  // The table where the net runs: a device net's copy is made on its first forward.
  TensorView table(Device device) {
    const TensorView host(table_.data(), Shape{p_.T, p_.D});
    if (device == Device::kCpu) return host;
    if (device_table_.empty()) {
      device_arena_ = Arena(Arena::align_up(table_.size() * sizeof(float)), "positions", device);
      device_table_ = device_arena_.carve(host.shape);
      copy_view(host, device_table_, "the positions table's copy to the device");
    }
    return device_table_;
  }
  PositionsParams p_;
  std::vector<float> table_;
  Arena device_arena_;
  TensorView device_table_;
};

class AttentionNode : public Node {
 public:
  AttentionNode(std::string name, AttentionParams p, int probs, int mask)
      : name_(std::move(name)), p_(p), probs_(probs), mask_(mask) {}
  std::string describe() const override {
    return fmt::format("{}: Attention({} heads{}, dropout {})", name_, p_.H,
                       p_.causal ? ", causal" : "", p_.dropout_p);
  }
  void forward(Net& net, int64_t n, bool training) override {
    last_ = p_;
    last_.n = n;
    last_.training = training;
    attention_forward(last_, {.qkv = net.value(inputs[0]),
                              .streams = net.dropout_streams(),
                              .saved = saved(net, last_),
                              .out = net.value(output)});
  }
  void backward(Net& net, int64_t) override {
    InputGrad dx = net.input_grad(*this, 0);
    if (dx.view.empty()) return;
    attention_backward(last_, {.qkv = net.value(inputs[0]),
                               .saved = saved(net, last_),
                               .dout = net.grad(output),
                               .dqkv = dx.view,
                               .accumulate_dx = dx.accumulate});
  }
  bool accumulates_dx() const override { return true; }
  double forward_flops() const override {
    AttentionParams one = p_;
    one.B = 1;
    one.n = 1;
    return one.forward_flops();
  }
  double backward_flops(bool) const override { return 2.0 * forward_flops(); }

 private:
  AttentionSaved saved(Net& net, const AttentionParams& p) const {
    return {net.saved(probs_).leading(p.probs_shape()),
            mask_ >= 0 ? net.saved(mask_).leading(p.probs_shape()) : TensorView()};
  }
  std::string name_;
  AttentionParams p_, last_;
  int probs_, mask_;
};

class LayerNormNode : public Node {
 public:
  LayerNormNode(std::string name, LayerNormParams p, int64_t rows, int weight, int bias, int mean,
                int rstd)
      : name_(std::move(name)),
        p_(p),
        rows_(rows),
        weight_(weight),
        bias_(bias),
        mean_(mean),
        rstd_(rstd) {}
  std::string describe() const override { return fmt::format("{}: LayerNorm({})", name_, p_.F); }
  void forward(Net& net, int64_t n, bool) override {
    const LayerNormParams p = with_rows(n);
    layernorm_forward(p, {.x = net.value(inputs[0]).reshaped(p.x_shape()),
                          .gamma = net.param(weight_).value,
                          .beta = net.param(bias_).value,
                          .saved = saved(net, p),
                          .y = net.value(output).reshaped(p.y_shape())});
  }
  void backward(Net& net, int64_t n) override {
    const LayerNormParams p = with_rows(n);
    InputGrad dx = net.input_grad(*this, 0);
    layernorm_backward(p, {.x = net.value(inputs[0]).reshaped(p.x_shape()),
                           .gamma = net.param(weight_).value,
                           .saved = saved(net, p),
                           .dy = net.grad(output).reshaped(p.y_shape()),
                           .dx = dx.view.empty() ? dx.view : dx.view.reshaped(p.x_shape()),
                           .dgamma = net.param(weight_).grad,
                           .dbeta = net.param(bias_).grad,
                           .accumulate_dx = dx.accumulate});
  }
  bool accumulates_dx() const override { return true; }

 private:
  LayerNormParams with_rows(int64_t n) const {
    LayerNormParams p = p_;
    p.N = n * rows_;
    return p;
  }
  LayerNormSaved saved(Net& net, const LayerNormParams& p) const {
    return {net.saved(mean_).leading(p.saved_shape()), net.saved(rstd_).leading(p.saved_shape())};
  }
  std::string name_;
  LayerNormParams p_;
  int64_t rows_;
  int weight_, bias_, mean_, rstd_;
};

class TokenCrossEntropyNode : public Node {
 public:
  TokenCrossEntropyNode(CrossEntropyParams p, int64_t T, int probs) : p_(p), T_(T), probs_(probs) {}
  std::string describe() const override { return fmt::format("CrossEntropy({}) per token", p_.K); }
  void forward(Net& net, int64_t n, bool) override {
    const CrossEntropyParams p = with_rows(n);
    cross_entropy_forward(p, {.logits = net.value(inputs[0]).reshaped(p.logits_shape()),
                              .labels = net.index_value(inputs[1]).reshaped(p.labels_shape()),
                              .losses = net.value(output),
                              .saved = saved(net, p)});
  }
  void backward(Net& net, int64_t n) override {
    const CrossEntropyParams p = with_rows(n);
    InputGrad dlogits = net.input_grad(*this, 0);
    if (dlogits.view.empty()) return;
    cross_entropy_backward(p, {.saved = saved(net, p),
                               .labels = net.index_value(inputs[1]).reshaped(p.labels_shape()),
                               .dlosses = net.grad(output),
                               .dlogits = dlogits.view.reshaped(p.logits_shape())});
  }

 private:
  CrossEntropyParams with_rows(int64_t n) const {
    CrossEntropyParams p = p_;
    p.N = n * T_;
    return p;
  }
  CrossEntropySaved saved(Net& net, const CrossEntropyParams& p) const {
    return {net.saved(probs_).leading(p.logits_shape())};
  }
  CrossEntropyParams p_;
  int64_t T_;
  int probs_;
};

// A token linear with explicit parameter leaves (MultiheadAttention's in_proj_weight is no module).
Value record_token_linear(Net& net, Value x, const std::string& what,
                          const std::string& weight_leaf, const std::string& bias_leaf,
                          const Net::LinearSpec& s) {
  const Shape& f = net.features(x);
  HFTA_CHECK(!net.shared(x) && net.layout(x) == Layout::kRows && f.rank() >= 1,
             "{}: a per-token Linear needs per-model features [T, F] in the row layout, got {}",
             what, f.str());
  HFTA_CHECK(s.out_features > 0, "{}: out_features must be positive, got {}", what, s.out_features);
  const int64_t rows = rows_per_sample(f);
  LinearParams p{.B = net.B(),
                 .N = net.capacity() * rows,
                 .in_features = f[f.rank() - 1],
                 .out_features = s.out_features,
                 .bias = s.bias};
  const int weight = net.add_param(weight_leaf, p.weight_shape().drop_front(), s.weight_init,
                                   p.in_features, p.out_features, ParamKind::kWeight,
                                   /*torch_transposed=*/true);
  const int bias = s.bias ? net.add_param(bias_leaf, p.bias_shape().drop_front(), s.bias_init,
                                          p.in_features, p.out_features, ParamKind::kBias)
                          : -1;
  Shape out = f;
  out[f.rank() - 1] = s.out_features;
  return net.add_node(
      std::make_unique<RowsLinearNode>(
          fmt::format("{}: Linear({}, {}) per token", what, p.in_features, p.out_features), p, rows,
          weight, bias),
      {x}, out, Layout::kRows);
}

}  // namespace

Value Net::embedding(Value tokens, const std::string& name, const EmbeddingSpec& s) {
  const std::string what = scoped(name);
  HFTA_CHECK(shared(tokens) && features(tokens).rank() == 1,
             "{}: Embedding reads the shared token ids [T] (an index_input), got {}", what,
             features(tokens).str());
  HFTA_CHECK(s.vocab >= 1 && s.dim >= 1, "{}: vocabulary {} and dimension {} must be positive",
             what, s.vocab, s.dim);
  const int64_t T = features(tokens)[0];
  EmbeddingParams p{.B = B(), .R = capacity() * T, .V = s.vocab, .D = s.dim};
  // PyTorch's fans of a [V, D] weight: fan_in D, fan_out V.
  const int weight = add_param(name + ".weight", Shape{s.vocab, s.dim}, s.weight_init, s.dim,
                               s.vocab, ParamKind::kWeight);
  return add_node(std::make_unique<EmbeddingNode>(what, p, T, weight), {tokens}, Shape{T, s.dim},
                  Layout::kRows);
}

Value Net::sinusoidal_positions(Value x, float x_scale) {
  expect_tokens(*this, x, "SinusoidalPositions");
  const Shape& f = features(x);
  PositionsParams p{.B = B(),
                    .n = capacity(),
                    .T = f[0],
                    .D = f[1],
                    .kind = PositionKind::kSinusoidal,
                    .P = f[0],
                    .x_scale = x_scale};
  HFTA_CHECK(std::isfinite(x_scale), "SinusoidalPositions: x_scale must be finite, got {}",
             x_scale);
  return add_node(std::make_unique<PositionsNode>(p), {x}, f, Layout::kRows);
}

Value Net::token_linear(Value x, const std::string& name, const LinearSpec& spec) {
  return record_token_linear(*this, x, scoped(name), name + ".weight", name + ".bias", spec);
}

Value Net::self_attention(Value x, const std::string& name, const SelfAttentionSpec& s) {
  const std::string what = scoped(name);
  expect_tokens(*this, x, what);
  const int64_t T = features(x)[0], D = features(x)[1];
  HFTA_CHECK(s.heads >= 1 && D % s.heads == 0,
             "{}: the width {} must be a multiple of the head count {} (--emsize, --nhead)", what,
             D, s.heads);
  const float p_drop = spec_.dropout.value_or(s.dropout);
  HFTA_CHECK(p_drop >= 0.0f && p_drop < 1.0f, "{}: dropout must be in [0, 1), got {}", what,
             p_drop);
  Scope inner = scope(name);
  Value qkv = record_token_linear(*this, x, what + ".in_proj", "in_proj_weight", "in_proj_bias",
                                  {.out_features = 3 * D,
                                   .weight_init = Init::xavier_uniform(),
                                   .bias_init = Init::constant(0)});
  AttentionParams p{.B = B(),
                    .n = capacity(),
                    .T = T,
                    .D = D,
                    .H = s.heads,
                    .causal = s.causal,
                    .dropout_p = p_drop};
  const int probs = add_saved(p.probs_shape());
  const int mask = p_drop > 0.0f ? add_saved(p.probs_shape()) : -1;
  Value heads = add_node(std::make_unique<AttentionNode>(what, p, probs, mask), {qkv}, Shape{T, D},
                         Layout::kRows);
  return token_linear(heads, "out_proj", {.out_features = D, .bias_init = Init::constant(0.0f)});
}

Value Net::layernorm(Value x, const std::string& name, double eps) {
  const std::string what = scoped(name);
  const Shape& f = features(x);
  HFTA_CHECK(!shared(x) && layout(x) == Layout::kRows && f.rank() >= 1,
             "{}: LayerNorm needs per-model features in the row layout, got {}", what, f.str());
  const int64_t F = f[f.rank() - 1], rows = rows_per_sample(f);
  LayerNormParams p{.B = B(), .N = capacity() * rows, .F = F, .eps = eps};
  try {
    check_layernorm_params(p);
  } catch (const Error& e) {
    fail("{}: {}", what, e.what());
  }
  const int weight =
      add_param(name + ".weight", Shape{F}, Init::constant(1.0f), F, F, ParamKind::kNorm);
  const int bias =
      add_param(name + ".bias", Shape{F}, Init::constant(0.0f), F, F, ParamKind::kNorm);
  const int mean = add_saved(p.saved_shape()), rstd = add_saved(p.saved_shape());
  return add_node(std::make_unique<LayerNormNode>(what, p, rows, weight, bias, mean, rstd), {x}, f,
                  Layout::kRows);
}

Value Net::token_cross_entropy(Value logits, Value targets, std::optional<int32_t> ignore_index) {
  expect_tokens(*this, logits, "CrossEntropy per token");
  const int64_t T = features(logits)[0], V = features(logits)[1];
  HFTA_CHECK(shared(targets) && features(targets) == Shape{T},
             "CrossEntropy per token needs the shared targets [{}] (an index_input), got {}", T,
             features(targets).str());
  CrossEntropyParams p{.B = B(), .N = capacity() * T, .K = V, .ignore_index = ignore_index};
  const int probs = add_saved(p.logits_shape());
  Value loss = add_node(std::make_unique<TokenCrossEntropyNode>(p, T, probs), {logits, targets},
                        Shape{}, Layout::kPerModel);
  add_loss(loss);
  return loss;
}

}  // namespace hfta
