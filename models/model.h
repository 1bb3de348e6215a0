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
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/device_memory.h"
#include "core/tensor.h"
#include "models/net.h"
#include "models/plan.h"

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
  // The order the models run a step in (models/plan.h); not kAuto (workflows resolve it).
  ExecutionPlan plan = {};
  // Threads the plan spreads workers over; 0 = OpenMP's thread count.
  int threads = 0;
  // Where the models live and run (NetSpec::device). kCuda needs plan fused; host minibatches
  // given to forward() and train_steps() are copied to the device once per step for all models,
  // and losses() and correct() are copied back.
  Device device = Device::kCpu;
};

// A model definition: records the net from the shared images to per-model logits [num_classes]
// (a classifier) or [L, num_classes] (per-point labels of [L, C] samples: segmentation).
using ModelDefinition = Value (*)(Net& net, Value images, int64_t num_classes);

// What the labels are: one class per sample (softmax cross-entropy over the samples), or one
// part per point of [L, C] samples (cross-entropy over all n*L points: labels [n, L]; correct()
// counts points).
enum class ModelTask { kClassify, kSegment };

class Model {
 public:
  // Records `definition` for spec.B models, carves the arenas and initializes every replica.
  // Throws hfta::Error naming the op whose input does not fit.
  Model(std::string name, ModelSpec spec, ModelDefinition definition,
        ModelTask task = ModelTask::kClassify);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Runs all B models on one shared minibatch, images [n, ...sample_shape] and labels [n] ([n, L]
  // for kSegment) with n <= batch_size, and computes each model's mean cross-entropy loss
  // (losses()) and correct rows (correct()). The batch must stay alive until backward(). Training
  // forwards followed by backward() need the fused plan (other plans overwrite one chunk's
  // activations with the next's): train_step() runs both under any plan.
  void forward(const TensorView& images, const IndexView& labels, bool training);
  // Zeroes and then writes every parameter gradient of every model for the last forward (each
  // model gets exactly the gradient it would get alone).
  void backward();
  // Called with each block of models [first, first + count) as soon as its gradients are written,
  // on the thread that wrote them: the optimizer updates the block while it is in cache
  // (Optimizer::step_models). Blocks are disjoint; workers call it at the same time.
  using AfterBackward = std::function<void(int64_t first, int64_t count)>;
  // A training forward and backward of every model on one minibatch, in the plan's order: after
  // it, losses(), correct() and every gradient are those of forward(.., true) then backward().
  // `after_backward`, when given, sees every model once per step (all B at once under fused).
  void train_step(const TensorView& images, const IndexView& labels,
                  const AfterBackward& after_backward = {});

  // One minibatch of a run of steps.
  struct StepBatch {
    TensorView images;
    IndexView labels;
  };
  // Called as AfterBackward, with the index of the step in the run.
  using AfterStepBackward = std::function<void(int64_t step, int64_t first, int64_t count)>;
  // Training steps on steps.size() minibatches in order: each group of the plan takes all of
  // them before the next group starts (a plan's /K: the loop hands over K at a time), each step
  // forward, backward and `after_backward` (which must update the group's models: the next step
  // reads them). Every model computes exactly what steps.size() train_step() calls would; after
  // it, losses(), correct() and the gradients are the last step's, step_losses(k) step k's.
  void train_steps(std::span<const StepBatch> steps, const AfterStepBackward& after_backward);
  // Each model's loss on step k of the last train_steps() (B values).
  std::span<const float> step_losses(int64_t k) const;

  // Per-model mean loss and count of correctly classified rows, for the last forward().
  const std::vector<float>& losses() const { return losses_; }
  const std::vector<int64_t>& correct() const { return correct_; }

  const std::string& name() const { return name_; }
  int64_t B() const { return spec_.B; }
  const ModelSpec& spec() const { return spec_; }
  const Shape& sample_shape() const { return spec_.sample_shape; }
  int64_t num_classes() const { return spec_.num_classes; }
  ModelTask task() const { return task_; }
  // Labels per sample: 1, or L for kSegment.
  int64_t labels_per_sample() const {
    return task_ == ModelTask::kSegment ? spec_.sample_shape[0] : 1;
  }
  // kSegment: the logits of the last evaluation forward (training = false), [B, n, L, P] for its
  // n rows (model b's rows contiguous), whatever the plan. Empty before one.
  TensorView point_logits() const;
  // The net holding every model's parameters, gradients and buffers (under a plan other than
  // fused it holds only those; smaller nets bound to it run the steps).
  Net& net() { return net_; }
  const Net& net() const { return net_; }
  const ExecutionPlan& plan() const { return spec_.plan; }
  const PlanLayout& layout() const { return layout_; }
  const std::vector<Param>& params() const { return net_.params(); }
  const std::vector<ModelBuffer>& buffers() const { return net_.buffers(); }
  const Arena& param_arena() const { return net_.param_arena(); }
  const Arena& grad_arena() const { return net_.grad_arena(); }
  int64_t params_per_model() const { return net_.params_per_model(); }
  // Analytic forward + backward FLOPs per sample for one model (sum of the ops' counts).
  double train_flops_per_sample() const;
  // Bytes of parameters, gradients, buffers and activations, all B models.
  size_t arena_bytes() const;
  std::string describe() const;

  // Per-op timing, off by default (HFTA_PROFILE=1 in the environment turns it on).
  bool profiling() const { return net_.profiling(); }
  std::string profile_report() const;
  void reset_profile();

  // Slot b becomes a fresh model `model_id` (models/slots.h): its parameters and buffers exactly
  // those of a new array's model with that id, its gradients zero, its dropout draws those of a
  // fresh model with that id from the next training forward on. Throws hfta::Error for b out of
  // range. The other slots are untouched.
  void reinit_slot(int64_t b, int64_t model_id);
  ModelDefinition definition() const { return definition_; }

  // Replica b's parameters ([params_per_model] floats, recording order), out and back in.
  std::vector<float> extract(int64_t b) const;
  void insert(int64_t b, const std::vector<float>& values);

 private:
  // A net that runs one group of models of the plan, and its recorded values.
  struct Runner {
    std::unique_ptr<Net> net;
    Value images, labels, logits, loss;
  };
  // Records the classifier into `net`.
  Runner record(std::unique_ptr<Net> net) const;
  void set_inputs(Runner& r, const TensorView& images, const IndexView& labels) const;
  // Copies runner r's losses and correct counts into models [first, first + count).
  void collect(const Runner& r, int64_t first, bool training);
  // Runs forward (and with_backward, backward) of every group of the plan on each of `steps` in
  // turn, a group taking all of them before the next.
  void run_groups(std::span<const StepBatch> steps, bool training, bool with_backward,
                  const AfterStepBackward& after_backward = {});

  std::string name_;
  ModelDefinition definition_;
  ModelTask task_;
  ModelSpec spec_;
  Net net_;
  Runner fused_;  // the fused plan runs on net_ itself
  PlanLayout layout_;
  std::vector<Runner> runners_;           // other plans: one per distinct (worker, group size)
  std::vector<int> runner_worker_;        // the worker each runner belongs to
  std::vector<size_t> runner_of_group_;   // layout_.groups[g] runs on runners_[runner_of_group_[g]]
  std::vector<size_t> runner_of_worker_;  // +balanced: worker w runs every part on this runner
  std::vector<float> losses_;
  std::vector<float> step_losses_;  // [steps of the last train_steps(), B]
  std::vector<int64_t> correct_;
  std::vector<float> point_logits_;  // kSegment: point_logits()
  int64_t point_logit_rows_ = 0;
  // A device model's copy of the minibatch (batch_size samples and their labels), and the pinned
  // staging each is uploaded through (asynchronously, once per step for all B models).
  Arena input_arena_;
  TensorView device_images_;
  IndexView device_labels_;
  mutable StagedUpload image_upload_, label_upload_;  // set_inputs() uploads through them
};

// What make_model knows about an architecture.
struct ModelInfo {
  std::string name;
  Shape default_sample_shape;
  int64_t default_num_classes = 10;
  ModelDefinition definition = nullptr;
  ModelTask task = ModelTask::kClassify;
  // Every op of the model has a CUDA kernel, so it can run with --device cuda (the others raise
  // at their first op without one; docs/cuda.md).
  bool runs_on_cuda = false;
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
Value define_mobilenetv3_small(Net& n, Value images, int64_t num_classes);
Value define_mobilenetv3_large(Net& n, Value images, int64_t num_classes);
// PointNet on [L, 3] clouds; _ft adds the feature transform and its regularizer loss.
Value define_pointnet_cls(Net& n, Value points, int64_t num_classes);
Value define_pointnet_cls_ft(Net& n, Value points, int64_t num_classes);
// fxia22's PointNetDenseCls: per-point logits [L, num_parts] (ModelTask::kSegment).
Value define_pointnet_seg(Net& n, Value points, int64_t num_parts, bool feature_transform);
Value define_pointnet_seg(Net& n, Value points, int64_t num_parts);
Value define_pointnet_seg_ft(Net& n, Value points, int64_t num_parts);
// The name of `name`'s feature-transform variant (name + "_ft" when registered; a name that
// already is one is kept). Throws hfta::Error for a model without one (--feature-transform).
std::string feature_transform_variant(const std::string& name);

}  // namespace hfta
