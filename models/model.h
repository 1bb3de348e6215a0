// An array of B classifiers of one architecture: a Net (models/net.h) recorded by the model's
// definition from the sample shape to logits, plus a softmax cross-entropy loss over the shared
// labels. Arenas are sized once at construction; a training step never allocates.
//
// Equivalence: replica b draws its initial weights from RngStream::for_model(seed, model_ids[b],
// kRngInit), parameter by parameter in recording order, with single-model fans. A model built with
// B = 1 and model_ids = {b} therefore starts from exactly the weights of replica b of any array,
// and since every fused op computes each model alone, it then trains exactly as replica b does.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "models/net.h"

namespace hfta {

struct ModelSpec {
  int64_t B = 1;
  int64_t batch_size = 64;  // the most rows forward() will see
  uint64_t seed = 0;
  // Global index of each replica (its RNG streams). Empty means 0..B-1.
  std::vector<int64_t> model_ids;
  // One sample's shape (e.g. [3, 32, 32]) and the number of classes; empty / 0 = the
  // architecture's default (model_info()).
  Shape sample_shape = {};
  int64_t num_classes = 0;
  // Overrides the architecture's dropout probabilities (0 turns dropout off).
  std::optional<float> dropout;
};

// A model definition: records the net from the shared images to per-model logits [num_classes].
using ModelDefinition = Value (*)(Net& net, Value images, int64_t num_classes);

class Model {
 public:
  // Records `definition` for spec.B models, carves the arenas and initializes every replica.
  // Throws hfta::Error naming the op whose input does not fit.
  Model(std::string name, ModelSpec spec, ModelDefinition definition);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Runs all B models on one shared minibatch, images [n, ...sample_shape] and labels [n] with
  // n <= batch_size, and computes each model's mean cross-entropy loss (losses()). The batch must
  // stay alive until backward().
  void forward(const TensorView& images, const IndexView& labels, bool training);
  // Zeroes and then writes every parameter gradient of every model for the last forward (each
  // model gets exactly the gradient it would get alone).
  void backward();

  // Per-model mean loss and count of correctly classified rows, for the last forward().
  const std::vector<float>& losses() const { return losses_; }
  std::vector<int64_t> correct() const;

  const std::string& name() const { return name_; }
  int64_t B() const { return spec_.B; }
  const ModelSpec& spec() const { return spec_; }
  const Shape& sample_shape() const { return spec_.sample_shape; }
  int64_t num_classes() const { return spec_.num_classes; }
  Net& net() { return net_; }
  const Net& net() const { return net_; }
  const std::vector<Param>& params() const { return net_.params(); }
  const std::vector<ModelBuffer>& buffers() const { return net_.buffers(); }
  const Arena& param_arena() const { return net_.param_arena(); }
  const Arena& grad_arena() const { return net_.grad_arena(); }
  int64_t params_per_model() const { return net_.params_per_model(); }
  // Analytic forward + backward FLOPs per sample for one model (sum of the ops' counts).
  double train_flops_per_sample() const { return net_.train_flops_per_sample(); }
  // Bytes of parameters, gradients, buffers and activations, all B models.
  size_t arena_bytes() const { return net_.arena_bytes(); }
  std::string describe() const;

  // Per-op timing, off by default (HFTA_PROFILE=1 in the environment turns it on).
  bool profiling() const { return net_.profiling(); }
  std::string profile_report() const;
  void reset_profile() { net_.reset_profile(); }

  // Replica b's parameters ([params_per_model] floats, recording order), out and back in.
  std::vector<float> extract(int64_t b) const;
  void insert(int64_t b, const std::vector<float>& values);

 private:
  std::string name_;
  ModelSpec spec_;
  Net net_;
  Value images_, labels_, logits_, loss_;
  std::vector<float> losses_;
};

// What make_model knows about an architecture.
struct ModelInfo {
  std::string name;
  Shape default_sample_shape;
  int64_t default_num_classes = 10;
  ModelDefinition definition = nullptr;
};

// Builds a model by name; throws hfta::Error naming the choices otherwise.
std::unique_ptr<Model> make_model(const std::string& name, const ModelSpec& spec);
std::vector<std::string> model_names();
const ModelInfo& model_info(const std::string& name);

// The architectures (models/zoo_*.cpp).
Value define_mlp(Net& n, Value images, int64_t num_classes);
Value define_lenet(Net& n, Value images, int64_t num_classes);
Value define_resnet18(Net& n, Value images, int64_t num_classes);
Value define_mobilenetv2(Net& n, Value images, int64_t num_classes);

}  // namespace hfta
