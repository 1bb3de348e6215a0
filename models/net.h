// Models as value graphs: a model is code that calls ops on values, as a PyTorch module written
// as functions, e.g.
//
//   Value basic_block(Net& n, Value x, int64_t planes, int64_t stride) {
//     Value h = n.relu(n.batchnorm2d(n.conv2d(x, "conv1", {planes, 3, stride, 1}), "bn1"));
//     ...
//     return n.relu(n.add(h, skip));
//   }
//
// The model code runs once, recording nodes with per-model shapes; finalize() then sizes the
// arenas (parameters, gradients, persistent buffers, activations), initializes every replica and
// the net replays the nodes every step without allocating.
//
// Values. A value is an activation of all B models (or the shared minibatch) with
//   - per-model features: [C, H, W] for the conv family, [F] for the linear family;
//   - a layout: kChannels stores n rows as [n, B*C, H, W] (model b's channels at [b*C, (b+1)*C)),
//     kRows as [B, n, F] (model b's rows contiguous); flatten() is the one conversion;
//   - shared: the minibatch, [n, ...features], read by every model and never copied B times.
// Any n <= capacity rows use the first elements of the value's buffer laid out for n rows.
//
// Backward replays the nodes in reverse. A value read by several nodes gets the sum of their
// gradients: the first backward to reach it writes, the others add (ops' accumulate flag, or a
// scratch buffer and an add where an op cannot accumulate). Losses are nodes; each model's loss
// gradient is 1, so each model gets exactly its own gradient. Gradients are zeroed explicitly
// (zero_grad()), parameter gradients accumulate; zero_grad_and_backward() does both for a step,
// zeroing each node's parameter gradients only when its backward comes (see there).
//
// Parameters carry PyTorch's state_dict name (scope() nests names: "layer1.0.conv1.weight"), an
// init rule and a weight-decay class. Persistent buffers (BatchNorm's running statistics) live in
// their own arena, which checkpoints, extract, eval and export include.
//
// Equivalence: model b draws its initial weights from RngStream::for_model(seed, model_ids[b],
// kRngInit), parameter by parameter in recording order, with single-model fans. A net built with
// B = 1 and model_ids = {b} therefore starts from exactly replica b's weights.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "fused_ops/activation.h"

namespace hfta {

// kPerModel: no rows, [B, ...features] (per-model losses).
enum class Layout { kChannels, kRows, kPerModel };

// A handle to a value recorded in a Net.
struct Value {
  int32_t id = -1;
  bool valid() const { return id >= 0; }
};

// How a parameter's initial values are drawn, per model, from its init stream.
enum class InitRule {
  kUniformFanIn,         // U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's Linear/Conv default
  kKaimingNormalFanOut,  // N(0, 2 / fan_out): kaiming_normal_(mode="fan_out", relu)
  kNormal,               // N(mean, value^2)
  kConstant,             // value
  kUniform,              // U(-value, value): word_language_model's init_weights (0.1)
  kXavierUniform,        // U(-a, a), a = sqrt(6 / (fan_in + fan_out)): MultiheadAttention's in_proj
};
struct Init {
  InitRule rule = InitRule::kUniformFanIn;
  float value = 0.0f;  // kNormal: the standard deviation; kConstant: the value
  float mean = 0.0f;   // kNormal only
  static Init constant(float v) { return {InitRule::kConstant, v}; }
  static Init normal(float stddev, float mean = 0.0f) { return {InitRule::kNormal, stddev, mean}; }
  static Init kaiming_normal_fan_out() { return {InitRule::kKaimingNormalFanOut, 0.0f}; }
  static Init uniform(float bound) { return {InitRule::kUniform, bound}; }
  static Init xavier_uniform() { return {InitRule::kXavierUniform, 0.0f}; }
};

// What a parameter is, for weight decay exemptions (--no-decay-norm-bias).
enum class ParamKind { kWeight, kBias, kNorm };

// One parameter tensor [B, ...] and its gradient, carved at the same offset of their arenas.
struct Param {
  std::string name;  // PyTorch's state_dict name, e.g. "layer1.0.conv1.weight"
  TensorView value;
  TensorView grad;
  Init init;
  int64_t fan_in = 1;  // single-model fans, as PyTorch computes them for this tensor
  int64_t fan_out = 1;
  ParamKind kind = ParamKind::kWeight;
  // Stored [in, out] here and [out, in] in PyTorch (Linear weights): export transposes it.
  bool torch_transposed = false;
  // PyTorch adds a trailing kernel axis of 1 ([out, in, 1]: a Conv1d with kernel 1).
  bool torch_kernel1 = false;
};

// A persistent buffer [B, ...] (running statistics): saved and restored with the parameters, never
// trained. `integer` marks counters that PyTorch stores as int64 (num_batches_tracked).
struct ModelBuffer {
  std::string name;
  TensorView value;
  float initial = 0.0f;
  bool integer = false;
};

class Net;

// One recorded op over all B models. Nodes read their tensors from the net at run time.
class Node {
 public:
  virtual ~Node() = default;
  // E.g. "layer1.0.conv1: Conv2d(64, 64, kernel 3, stride 1, pad 1, no bias)".
  virtual std::string describe() const = 0;
  virtual void forward(Net& net, int64_t n, bool training) = 0;
  // Writes (or adds, see Net::input_grad) the inputs' gradients and accumulates the parameters'.
  virtual void backward(Net& net, int64_t n) = 0;
  // Whether the op can add its input gradient into an existing one (accumulate flag).
  virtual bool accumulates_dx() const { return false; }
  // In-place execution (Net::finalize): an op whose forward may write its output over its first
  // input, because its backward gives the same gradient from the output alone (ReLU, ReLU6), and
  // the ops whose backward never reads their own output, whose output may therefore be
  // overwritten by such a consumer (the default is the safe answer for both).
  virtual bool may_overwrite_input() const { return false; }
  virtual bool backward_reads_output() const { return true; }
  // Activation fusion (Net::finalize): an activation node names the activation its input's
  // producer may take over; a producer that can (BatchNorm2d, BatchNorm1d) takes it over, writes
  // the activation's output and takes the activation's output gradient, and the activation node
  // does nothing (absorbed_by_producer).
  virtual std::optional<ActivationParams> fusable_activation() const { return std::nullopt; }
  virtual bool absorb_activation(const ActivationParams&) { return false; }
  virtual void absorbed_by_producer() {}
  // Whether backward writes (=) its parameters' gradients instead of adding to them when
  // Net::param_grads_fresh() says they hold nothing yet (in zero_grad_and_backward()).
  virtual bool writes_param_grads() const { return false; }
  // Multiply-add x2 FLOPs per sample for one model: forward, and backward (parameters and, when
  // with_dx, the input gradient). Memory-bound elementwise nodes count 0.
  virtual double forward_flops() const { return 0.0; }
  virtual double backward_flops(bool with_dx) const { return 0.0; }

  std::vector<Value> inputs;
  Value output;
};

// Where a node's backward writes one input's gradient: `view` (empty: not wanted); with
// `accumulate` the node adds into it instead of overwriting.
struct InputGrad {
  TensorView view;
  bool accumulate = false;
};

struct NetSpec {
  int64_t B = 1;
  int64_t capacity = 64;  // the most rows a forward will see
  uint64_t seed = 0;
  std::vector<int64_t> model_ids;  // global index of each replica (its RNG streams); empty = 0..B-1
  // Overrides every dropout probability the model code asks for (--dropout; 0 turns it off).
  std::optional<float> dropout;
  // An activation that alone reads a BatchNorm's output runs in the BatchNorm's passes on the
  // CPU (Net::finalize; the same values and gradients bit for bit). false keeps every op apart:
  // tests compare the two, and profiles can time the activations alone.
  bool fuse_activations = true;
  // Storage only: parameters, gradients and buffers, no activations (a net that holds the state
  // of an array whose steps run on smaller nets bound to it, see bind_state()).
  bool state_only = false;
  // No state of its own: parameters, gradients and buffers are slices of another net's,
  // attached by bind_state() before each run (execution plans, models/plan.h).
  bool external_state = false;
  // Where the arenas live and the ops run: kCuda puts every parameter, gradient, buffer and
  // activation in CUDA device memory (initial values drawn on the host, then copied), and the
  // inputs must be there too (docs/cuda.md).
  Device device = Device::kCpu;
};

class Net {
 public:
  explicit Net(NetSpec spec);
  Net(const Net&) = delete;
  Net& operator=(const Net&) = delete;
  ~Net();

  int64_t B() const { return spec_.B; }
  int64_t capacity() const { return spec_.capacity; }
  const NetSpec& spec() const { return spec_; }
  Device device() const { return spec_.device; }

  // ---- Recording -------------------------------------------------------------------------
  // The shared minibatch: float samples of shape `sample` or int32 indices (labels).
  Value input(const Shape& sample);
  Value index_input(const Shape& sample);
  // A per-model input: each model's own rows (a GAN's noise, a generator's samples fed to a
  // discriminator), [n, B*C, ...] in the channel layout for [C, ...] samples, [B, n, F] for [F].
  // The caller's buffer is read in place. With `needs_grad`, backward() writes its gradient,
  // readable as grad(v) afterwards (a generator trained through its discriminator).
  Value model_input(const Shape& sample, bool needs_grad = false);

  // Names: a scope prefixes every parameter and buffer recorded while it lives.
  class Scope {
   public:
    explicit Scope(Net& net) : net_(&net) {}
    Scope(Scope&& other) noexcept : net_(other.net_) { other.net_ = nullptr; }
    Scope(const Scope&) = delete;
    ~Scope();

   private:
    Net* net_;
  };
  [[nodiscard]] Scope scope(const std::string& name);
  // `leaf` inside the current scope: "layer1.0" + "conv1" -> "layer1.0.conv1".
  std::string scoped(const std::string& leaf) const;

  // Per-model shape, layout and sharing of a recorded value.
  const Shape& features(Value v) const;
  Layout layout(Value v) const;
  bool shared(Value v) const;
  // The whole array's shape for n rows.
  Shape batch_shape(Value v, int64_t n) const;

  // Adds a node producing a new value (used by the op methods in models/ops.h).
  Value add_node(std::unique_ptr<Node> node, const std::vector<Value>& inputs, Shape features,
                 Layout layout);
  // Declares a parameter / persistent buffer / per-step saved tensor of the node being recorded.
  // The returned index resolves to views after finalize() (param(i), buffer(i), saved(i)).
  int add_param(const std::string& leaf, const Shape& per_model, Init init, int64_t fan_in,
                int64_t fan_out, ParamKind kind, bool torch_transposed = false);
  int add_buffer(const std::string& leaf, const Shape& per_model, float initial, bool integer);
  // A saved tensor of 4-byte elements: float (saved(i)) or int32 (saved_index(i)).
  int add_saved(const Shape& whole);
  // Marks a loss: a [B] value of per-model losses whose gradient is 1 for each model.
  void add_loss(Value per_model_loss);
  // Marks v as an output whose gradient the caller writes into grad(v) before each backward():
  // the generator of a GAN, whose gradient comes from the discriminator's input gradient. A net
  // may have such outputs instead of (or besides) losses.
  void add_output_grad(Value v);
  // Replaces the init rule of the recorded parameter `name` (full name, before finalize()): for
  // rules an op does not take, e.g. DCGAN's N(1, 0.02) BatchNorm scales.
  void set_init(const std::string& name, Init init);

  // ---- Ops (models/ops_*.cpp) --------------------------------------------------------------
  // Each records one node; `name` is the module's name in PyTorch's state_dict ("conv1").
  struct Conv2dSpec {
    int64_t out_channels = 1;
    int64_t kernel = 1;
    int64_t stride = 1;
    int64_t pad = 0;
    int64_t groups = 1;  // depthwise: groups = input channels
    bool bias = true;
    Init weight_init = {};
    Init bias_init = {};
  };
  Value conv2d(Value x, const std::string& name, const Conv2dSpec& spec);
  struct LinearSpec {
    int64_t out_features = 1;
    bool bias = true;
    Init weight_init = {};
    Init bias_init = {};
  };
  Value linear(Value x, const std::string& name, const LinearSpec& spec);
  // BatchNorm2d: weight 1, bias 0, running_mean 0, running_var 1, PyTorch's eps and momentum.
  Value batchnorm2d(Value x, const std::string& name, double eps = 1e-5, double momentum = 0.1);
  Value relu(Value x);
  Value relu6(Value x);
  // MobileNetV3's activations (PyTorch's float arithmetic and gradients, fused_ops/activation.h).
  Value hardswish(Value x);
  Value hardsigmoid(Value x);
  // Squeeze-and-excitation's `scale * x`: x [C, H, W] times a per-model scale [C, 1, 1], one
  // value per sample and channel (fused_ops/scale_channels.h).
  Value scale_channels(Value x, Value scale);
  Value max_pool2d(Value x, int64_t kernel, int64_t stride = 0, int64_t pad = 0);
  Value adaptive_avg_pool2d(Value x, int64_t out_h, int64_t out_w);
  // [C, H, W] (kChannels) -> [C*H*W] (kRows).
  Value flatten(Value x);
  // a + b, same features and layout (a residual connection).
  Value add(Value a, Value b);
  Value dropout(Value x, float p);
  // Per-model mean softmax cross-entropy of kRows logits [K] against shared int32 labels: a
  // [B] loss value, marked as a loss.
  Value cross_entropy(Value logits, Value labels);

  // ---- Point-cloud ops (models/ops_point.cpp) ----------------------------------------------
  // Per-point values have features [L, C] in the row layout ([B, n, L, C]: model b's n*L points
  // contiguous, C channels each); the shared points input is [n, L, C] (input(Shape{L, C})).
  //
  // Conv1d(in, out, kernel 1) over [L, in] points: a Linear over n*L rows (weight stored [in,
  // out], PyTorch's [out, in, 1]; PyTorch's default init). Reads the shared points directly.
  Value conv1d(Value x, const std::string& name, const LinearSpec& spec);
  // BatchNorm1d(C) over [L, C] points (statistics over n*L rows) or [C] rows (over n rows).
  Value batchnorm1d(Value x, const std::string& name, double eps = 1e-5, double momentum = 0.1);
  // Per sample: [L, K] points (per model or shared) times a per-model [K, M] matrix -> [L, M]
  // (torch.bmm of PointNet's transforms).
  Value bmm(Value x, Value t);
  // [L, C] -> [C]: the max over each sample's points (PointNet's global feature).
  Value max_over_points(Value x);
  // [k*k] rows -> [k, k] matrices plus the identity (the T-Net's "x + iden" and view).
  Value add_identity(Value x, int64_t k);
  // [C] -> [L, C]: each sample's feature copied to its L points (segmentation's global feature).
  Value repeat_points(Value x, int64_t L);
  // Joins per-model row values along the last axis: [..., C_i] -> [..., sum C_i] (equal leading
  // axes, e.g. [L, 64] and [L, 1024] -> [L, 1088]).
  Value concat(const std::vector<Value>& xs);
  // Per-model mean softmax cross-entropy of per-point logits [L, K] against shared int32 labels
  // [L] per sample (mean over all n*L points): a [B] loss value, marked as a loss.
  Value point_cross_entropy(Value logits, Value labels);
  // PointNet's feature-transform regularizer on [k, k] matrices A: per model, scale times the
  // mean over samples of ||I - A A^T||_F (fxia22's feature_transform_regularizer), marked as a
  // loss added to the model's other losses.
  Value transform_regularizer(Value a, float scale);

  // ---- Generative ops (models/ops_gan.cpp) -------------------------------------------------
  // ConvTranspose2d (groups 1, output_padding 0), weight [C_in, C_out, k, k] per model as in
  // PyTorch. The input may be shared or per-model.
  struct ConvTranspose2dSpec {
    int64_t out_channels = 1;
    int64_t kernel = 1;
    int64_t stride = 1;
    int64_t pad = 0;
    bool bias = true;
    Init weight_init = {};
    Init bias_init = {};
  };
  Value conv_transpose2d(Value x, const std::string& name, const ConvTranspose2dSpec& spec);
  Value leaky_relu(Value x, float negative_slope = 0.01f);
  Value tanh(Value x);
  Value sigmoid(Value x);
  // Per-model mean BCE-with-logits of one logit per row (kRows [1] features, e.g. a flattened
  // [1, 1, 1] conv output) against the constant `target` (1 real, 0 fake): a [B] loss value,
  // marked as a loss. When `mean_sigmoid` is given it receives the index of a saved [B] tensor
  // (saved(i)) that each forward fills with the mean sigmoid of the logits: D(x) / D(G(z)).
  Value bce_with_logits(Value logits, float target, int* mean_sigmoid = nullptr);

  // ---- Sequence ops (models/ops_text.cpp) --------------------------------------------------
  // Token sequences: the shared tokens are an index_input(Shape{T}) ([n, T] int32 per batch);
  // token activations have per-model features [T, D] in the row layout, [B, n, T, D], which
  // row-wise ops read as [B, n*T, D]. relu(), add() and dropout() work on them unchanged.
  struct EmbeddingSpec {
    int64_t vocab = 1;
    int64_t dim = 1;
    Init weight_init = Init::normal(1.0f);  // torch.nn.Embedding's default N(0, 1)
  };
  // [T] shared token ids -> [T, D] (PyTorch's nn.Embedding, parameter name + ".weight" [V, D]).
  // Ids outside [0, V) throw hfta::Error at forward.
  Value embedding(Value tokens, const std::string& name, const EmbeddingSpec& spec);
  // x * x_scale + the sinusoidal table of word_language_model's PositionalEncoding (no
  // parameters; x_scale = sqrt(D) folds in its TransformerModel's embedding scaling).
  Value sinusoidal_positions(Value x, float x_scale = 1.0f);
  // Linear on the last axis of every token: [T, F] -> [T, out_features], parameters
  // name + ".weight" / ".bias".
  Value token_linear(Value x, const std::string& name, const LinearSpec& spec);
  // torch.nn.MultiheadAttention self-attention (batch of queries = keys = values = x [T, D]):
  // in_proj_weight [3D, D] and in_proj_bias (xavier_uniform / 0), the attention core,
  // out_proj (Linear default init, bias 0), recorded as linear + attention + linear nodes.
  struct SelfAttentionSpec {
    int64_t heads = 1;
    bool causal = true;
    float dropout = 0.0f;  // on the attention probabilities; --dropout overrides it
  };
  Value self_attention(Value x, const std::string& name, const SelfAttentionSpec& spec);
  // torch.nn.LayerNorm over the last axis (weight 1, bias 0).
  Value layernorm(Value x, const std::string& name, double eps = 1e-5);
  Value gelu(Value x);
  // Token rows picked from x [T, D] by shared flat indices [K] (an index_input): per window of n
  // sequences, the n*K indices select rows of its n*T (in [0, n*T), or -1 for a zero row) and
  // pack them into [K, D] features (n*K rows). A masked LM's output layer then runs on the
  // predicted rows only (models/masked_lm.h). Backward scatter-adds into x's gradient.
  Value gather_tokens(Value x, Value rows);
  // Per-model mean cross-entropy over every token of logits [T, V] against shared next-token
  // targets [T] (rows labelled ignore_index skipped): a [B] loss value, marked as a loss.
  Value token_cross_entropy(Value logits, Value targets,
                            std::optional<int32_t> ignore_index = std::nullopt);

  // Sizes the arenas, carves every tensor, initializes parameters and buffers. Throws
  // hfta::Error when nothing was recorded or no loss was marked.
  void finalize();
  bool finalized() const { return finalized_; }

  // ---- Running ---------------------------------------------------------------------------
  // For a net built with external_state: points its parameters, gradients and buffers at models
  // [first, first + B()) of `owner`, a net recorded by the same code for more models, and takes
  // their model ids (so dropout draws what those models would draw in `owner`). Cheap (a pointer
  // per tensor): plans rebind a net for every chunk of models.
  void bind_state(const Net& owner, int64_t first);
  void set_input(Value v, const TensorView& batch);
  void set_input(Value v, const IndexView& batch);
  int64_t rows() const { return n_; }
  // Runs every node on the inputs' rows; `training` selects batch statistics and dropout.
  void forward(bool training);
  // Zeroes every parameter gradient (explicit: gradients accumulate across backward calls).
  void zero_grad();
  // Gradients of every loss (sum over losses, each model's weight 1) for the last forward.
  void backward();
  // zero_grad() then backward(), with the same result, but on the CPU each node's parameter
  // gradients are zeroed just before its backward (in cache when the op adds to them, instead of
  // a pass over the whole arena that the ops then read back from memory), or not at all when the
  // node writes them (Node::writes_param_grads: convolutions and linear layers). A node's
  // parameters are those declared (add_param) since the previous node was added; no node adds to
  // another node's parameter gradients.
  void zero_grad_and_backward();
  // During a node's backward in zero_grad_and_backward(): whether its parameter gradients hold
  // nothing yet, so that a node that writes_param_grads() writes them (=) instead of adding.
  bool param_grads_fresh() const { return param_grads_fresh_; }

  // Views for n rows, for nodes and callers.
  TensorView value(Value v) const;
  IndexView index_value(Value v) const;
  TensorView grad(Value v) const;  // empty when v needs no gradient
  // The gradient target of a node's input i during its backward (see InputGrad).
  InputGrad input_grad(const Node& node, int i);
  const Param& param(int i) const { return params_[static_cast<size_t>(i)]; }
  const ModelBuffer& buffer(int i) const { return buffers_[static_cast<size_t>(i)]; }
  TensorView saved(int i) const { return saved_[static_cast<size_t>(i)]; }
  IndexView saved_index(int i) const;
  // One RNG stream per model for dropout, reseeded at every training forward from (seed,
  // model id, training forward count), so a resumed run draws what an uninterrupted one would.
  std::vector<RngStream>& dropout_streams() { return dropout_streams_; }
  void set_training_forwards(int64_t count) { training_forwards_ = count; }
  int64_t training_forwards() const { return training_forwards_; }

  // ---- Slots (models/slots.cpp) ----------------------------------------------------------
  // Model b's dropout counts training forwards from its origin (0 unless the slot was refilled):
  // its k-th training forward draws what a fresh net's k-th draws.
  const std::vector<int64_t>& forward_origins() const { return forward_origins_; }
  void set_forward_origins(const std::vector<int64_t>& origins);
  // Slot b becomes a fresh model `model_id`: parameters and buffers re-initialized from that id's
  // init stream (exactly a new net's model with that id), gradients zeroed, dropout counted from
  // now. Nets bound to this one take the new id at their next bind_state(). Throws hfta::Error
  // for b out of range or a net without state of its own.
  void reinit_model(int64_t b, int64_t model_id);
  // Copies model `from` of `src` (a net recorded by the same code) into slot `to`: parameters,
  // gradients, buffers, model id and dropout origin, bit for bit. The training forward counts
  // must agree (the caller sets them first) for the dropout origins to mean the same.
  void copy_model(const Net& src, int64_t from, int64_t to);

  // ---- Introspection ---------------------------------------------------------------------
  const std::vector<Param>& params() const { return params_; }
  const std::vector<ModelBuffer>& buffers() const { return buffers_; }
  const Arena& param_arena() const { return param_arena_; }
  const Arena& grad_arena() const { return grad_arena_; }
  int64_t params_per_model() const;
  int64_t buffers_per_model() const;
  double train_flops_per_sample() const;
  // Bytes of every arena (parameters, gradients, buffers, activations, gradients of
  // activations), all B models.
  size_t arena_bytes() const;
  std::string describe() const;
  const std::vector<Value>& losses() const { return losses_; }

  // Per-node timing, on when HFTA_PROFILE=1: ms per step of each node, forward and backward.
  bool profiling() const { return profile_; }
  std::string profile_report() const;
  void reset_profile();
  // The same as numbers: each node's describe() and ms per step, forward and backward.
  struct NodeTime {
    std::string node;
    double forward_ms = 0.0, backward_ms = 0.0;
  };
  std::vector<NodeTime> profile() const;

 private:
  friend class Scope;
  struct ValueInfo;
  ValueInfo& info(Value v);
  const ValueInfo& info(Value v) const;
  void check_value(Value v, const char* what) const;
  // Assigns each activation gradient its offset; returns the arena bytes they need.
  size_t plan_gradient_memory();
  void plan_in_place();
  void fuse_norm_activations();
  void zero_param_grad(const Param& p);
  void prepare_param_grads(size_t node);
  void check_input_device(Device device, const char* what) const;
  // Host views of the parameters and buffers (in recording order): the tensors themselves on the
  // CPU; on a device, the same layout in host copies of the two arenas (read from the device when
  // `read`), which write_host_state() copies back.
  struct HostState;
  HostState host_state(bool read) const;
  void write_host_state(const HostState& state);
  void initialize();
  void initialize_model(int64_t b, const HostState& state);

  NetSpec spec_;
  std::vector<std::string> scope_;
  std::vector<ValueInfo> values_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Param> params_;
  std::vector<ModelBuffer> buffers_;
  std::vector<Shape> saved_shapes_;
  std::vector<TensorView> saved_;
  std::vector<Shape> param_shapes_, buffer_shapes_;
  std::vector<Value> losses_;
  std::vector<Value> grad_outputs_;  // add_output_grad(): gradients written by the caller
  bool finalized_ = false;
  Arena param_arena_, grad_arena_, buffer_arena_, act_arena_, act_grad_arena_;
  TensorView scratch_;            // an input gradient for ops that cannot accumulate, then added
  int32_t pending_scratch_ = -1;  // the value whose gradient scratch_ holds during a backward
  // The parameters each node declared: [node_params_[i], node_params_[i + 1]) for node i.
  std::vector<int32_t> node_params_{0};
  // zero_grad_and_backward(): the parameters whose gradients are not zeroed yet.
  std::vector<uint8_t> grads_unzeroed_;
  bool param_grads_fresh_ = false;
  std::vector<RngStream> dropout_streams_;
  int64_t training_forwards_ = 0;
  std::vector<int64_t> forward_origins_;  // [B], see forward_origins()
  int64_t n_ = 0;
  bool forward_done_ = false;
  const Node* current_ = nullptr;  // the node running backward
  bool profile_ = false;
  std::vector<double> forward_ms_, backward_ms_;
  int64_t profiled_steps_ = 0;
};

}  // namespace hfta
