// An array of B models of one architecture, built from fused ops.
//
// A concrete model declares its tensors in layout() and its computation in forward()/backward().
// layout() runs twice, first on counting arenas (sizes only) and then on real ones, so the
// arenas are sized once at setup and a training step never allocates.
//
// Equivalence: replica b draws its initial weights from RngStream::for_model(seed, model_ids[b],
// kRngInit), in layout order, with single-model fan-in. A model trained alone with
// model_ids = {b} therefore starts from exactly the weights of replica b of any array.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace hfta {

struct ModelSpec {
  int64_t B = 1;
  int64_t batch_size = 64;  // the largest minibatch forward() will see
  uint64_t seed = 0;
  // Global index of each replica (its RNG stream). Empty means 0..B-1.
  std::vector<int64_t> model_ids;
};

// One parameter tensor `[B, ...]` and its gradient, carved at the same offset of their arenas.
struct Param {
  std::string name;
  TensorView value;
  TensorView grad;
  int64_t fan_in = 1;  // single-model fan-in, for initialization
};

class Model {
 public:
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  virtual std::string name() const = 0;
  // Shape of one sample, e.g. [1, 28, 28]; the minibatch is [n, ...sample_shape].
  virtual Shape sample_shape() const = 0;
  virtual int64_t num_classes() const = 0;

  // Runs all B models on one shared minibatch of n = images.shape[0] <= batch_size rows and
  // computes each model's mean cross-entropy loss; see losses().
  void forward(const TensorView& images, const IndexView& labels, bool training);
  // Accumulates every parameter gradient of every model (each model gets its own gradient).
  void backward();
  void zero_grads();

  const std::vector<float>& losses() const { return losses_; }
  // Per-model count of rows whose argmax equals the label, for the last forward().
  std::vector<int64_t> correct() const;

  int64_t B() const { return spec_.B; }
  const ModelSpec& spec() const { return spec_; }
  const std::vector<Param>& params() const { return params_; }
  const Arena& param_arena() const { return param_arena_; }
  const Arena& grad_arena() const { return grad_arena_; }
  int64_t params_per_model() const;
  // Forward+backward FLOPs per sample for one model (analytic count, see each model).
  virtual double train_flops_per_sample() const = 0;

  // Copies replica b's parameters out ([params_per_model] floats, layout order) and back in.
  std::vector<float> extract(int64_t b) const;
  void insert(int64_t b, const std::vector<float>& values);

 protected:
  explicit Model(ModelSpec spec);
  // Builds the arenas: call once from the concrete constructor.
  void build();

  // Called by build(): declare parameters with add_param and activations with add_activation.
  virtual void layout() = 0;
  virtual void forward_layers(const TensorView& images, int64_t n, bool training) = 0;
  // Returns the logits [B, n, num_classes] of the last forward.
  virtual TensorView logits(int64_t n) const = 0;
  virtual void backward_layers(const TensorView& dlogits, int64_t n) = 0;

  // Returns a copy: the views stay valid, the registry may grow.
  Param add_param(const std::string& name, const Shape& shape, int64_t fan_in);
  TensorView add_activation(const Shape& shape);
  // The first `n` rows of an activation laid out for batch_size rows. `batch_dim` is where N
  // sits in the shape (0 for [N, B*C, H, W], 1 for [B, N, F]).
  static TensorView rows(const TensorView& t, int64_t n, int batch_dim);

  ModelSpec spec_;
  bool training_ = true;
  int64_t last_n_ = 0;

 private:
  void initialize_parameters();

  Arena param_arena_, grad_arena_, act_arena_;
  std::vector<Param> params_;
  std::vector<float> losses_;
  // Cross-entropy state, sized for batch_size.
  TensorView probs_, dlogits_;
  IndexView labels_;
};

// Builds a model by name ("mlp", "lenet"); throws hfta::Error naming the choices otherwise.
std::unique_ptr<Model> make_model(const std::string& name, const ModelSpec& spec);
std::vector<std::string> model_names();

}  // namespace hfta
