// An array of B models of one architecture: a sequence of fused layers and a softmax
// cross-entropy head, over arenas sized once at construction (a training step never allocates).
//
// Equivalence: replica b draws its initial weights from RngStream::for_model(seed, model_ids[b],
// kRngInit), parameter by parameter in layer order, with single-model fan-in. A model built with
// B = 1 and model_ids = {b} therefore starts from exactly the weights of replica b of any array,
// and since every fused op computes each model alone, it then trains exactly as replica b does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "models/layer.h"

namespace hfta {

struct ModelSpec {
  int64_t B = 1;
  int64_t batch_size = 64;  // the most rows forward() will see
  uint64_t seed = 0;
  // Global index of each replica (its RNG stream). Empty means 0..B-1.
  std::vector<int64_t> model_ids;
};

class Model {
 public:
  // Connects the layers from `sample_shape` (one sample, e.g. [1, 28, 28]) to [num_classes],
  // carves the arenas and initializes every replica. Throws hfta::Error naming the layer whose
  // input does not fit.
  Model(std::string name, ModelSpec spec, Shape sample_shape, int64_t num_classes,
        std::vector<std::unique_ptr<Layer>> layers);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Runs all B models on one shared minibatch, images [n, ...sample_shape] and labels [n] with
  // n <= batch_size, and computes each model's mean cross-entropy loss (losses()). The batch must
  // stay alive until backward().
  void forward(const TensorView& images, const IndexView& labels, bool training);
  // Writes every parameter gradient of every model for the last forward (each model gets exactly
  // the gradient it would get alone).
  void backward();

  // Per-model mean loss and count of correctly classified rows, for the last forward().
  const std::vector<float>& losses() const { return losses_; }
  std::vector<int64_t> correct() const;

  const std::string& name() const { return name_; }
  int64_t B() const { return spec_.B; }
  const ModelSpec& spec() const { return spec_; }
  const Shape& sample_shape() const { return sample_shape_; }
  int64_t num_classes() const { return num_classes_; }
  const std::vector<Param>& params() const { return params_; }
  const Arena& param_arena() const { return param_arena_; }
  const Arena& grad_arena() const { return grad_arena_; }
  int64_t params_per_model() const;
  // Analytic forward + backward FLOPs per sample for one model (sum of the layers' counts).
  double train_flops_per_sample() const;
  // Bytes of parameters, gradients and activations, all B models.
  size_t arena_bytes() const;
  std::string describe() const;

  // Per-layer timing, off by default (HFTA_PROFILE=1 in the environment turns it on): total
  // forward and backward milliseconds of each layer since construction, one line per layer.
  bool profiling() const { return profile_; }
  std::string profile_report() const;
  void reset_profile();

  // Replica b's parameters ([params_per_model] floats, layer order), out and back in.
  std::vector<float> extract(int64_t b) const;
  void insert(int64_t b, const std::vector<float>& values);

 private:
  void layout(Arena& params, Arena& grads, Arena& acts);
  void initialize_parameters();
  TensorView input_view(const TensorView& images) const;

  std::string name_;
  ModelSpec spec_;
  Shape sample_shape_;
  int64_t num_classes_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Shape>
      features_;  // features_[i]: per-model input features of layer i; back(): logits

  Arena param_arena_, grad_arena_, act_arena_;
  std::vector<Param> params_;
  std::vector<TensorView> outputs_;  // each layer's output, for batch_size rows
  TensorView grad_a_, grad_b_;       // ping-pong input/output gradients
  TensorView probs_;                 // softmax of the logits; backward overwrites it with dlogits
  TensorView losses_view_, dlosses_;
  std::vector<float> losses_;
  TensorView images_;
  IndexView labels_;
  int64_t n_ = 0;
  bool profile_ = false;
  std::vector<double> forward_ms_, backward_ms_;  // per layer; the head is the last entry
  int64_t profiled_steps_ = 0;
};

// Builds a model by name ("mlp", "lenet"); throws hfta::Error naming the choices otherwise.
std::unique_ptr<Model> make_model(const std::string& name, const ModelSpec& spec);
std::vector<std::string> model_names();

}  // namespace hfta
