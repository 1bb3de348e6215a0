#include "models/model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <exception>
#include <span>

#include "core/device_memory.h"
#include "core/error.h"
#include "core/parallel.h"
#include "datasets/shapes.h"
#include "fused_ops/cross_entropy.h"

namespace hfta {

namespace {
PlanLayout plan_layout(const ModelSpec& s) {
  return lay_out(s.plan, s.B, s.threads > 0 ? s.threads : num_threads());
}

NetSpec net_spec(const ModelSpec& s, bool state_only) {
  HFTA_CHECK(s.device == Device::kCpu || !state_only,
             "on a CUDA device the models run under plan fused (one call per op for all of them), "
             "got plan {}: use --plan fused",
             s.plan.str());
  return {.B = s.B,
          .capacity = s.batch_size,
          .seed = s.seed,
          .model_ids = s.model_ids,
          .dropout = s.dropout,
          .state_only = state_only,
          .device = s.device};
}
}  // namespace

Model::Model(std::string name, ModelSpec spec, ModelDefinition definition, ModelTask task)
    : name_(std::move(name)),
      definition_(definition),
      task_(task),
      spec_(std::move(spec)),
      net_(net_spec(spec_, !plan_layout(spec_).is_fused())),
      layout_(plan_layout(spec_)) {
  HFTA_CHECK(spec_.B >= 1, "{}: the array needs at least one model, got B = {}", name_, spec_.B);
  HFTA_CHECK(spec_.num_classes >= 2, "{}: a classifier needs at least 2 classes, got {}", name_,
             spec_.num_classes);
  HFTA_CHECK(spec_.sample_shape.rank() >= 1 && spec_.sample_shape.numel() >= 1,
             "{}: empty sample shape {}", name_, spec_.sample_shape.str());
  HFTA_CHECK(task_ == ModelTask::kClassify || spec_.sample_shape.rank() == 2,
             "{}: per-point labels need [L, C] samples, got {}", name_, spec_.sample_shape.str());
  spec_.model_ids = net_.spec().model_ids;
  fused_ = record(nullptr);
  if (spec_.device != Device::kCpu) {
    // Where host minibatches are copied to: the net reads its inputs on its own device.
    const Shape images{spec_.batch_size * spec_.sample_shape.numel()};
    const Shape labels{spec_.batch_size * labels_per_sample()};
    input_arena_ = Arena(Arena::align_up(static_cast<size_t>(images.numel()) * sizeof(float)) +
                             static_cast<size_t>(labels.numel()) * sizeof(int32_t),
                         "minibatch", spec_.device);
    device_images_ = input_arena_.carve(images);
    device_labels_ = input_arena_.carve<int32_t>(labels);
    image_upload_ = StagedUpload(spec_.device, static_cast<size_t>(images.numel()) * sizeof(float),
                                 "the minibatch's upload to the device");
    label_upload_ =
        StagedUpload(spec_.device, static_cast<size_t>(labels.numel()) * sizeof(int32_t),
                     "the labels' upload to the device");
  }
  losses_.assign(static_cast<size_t>(spec_.B), 0.0f);
  step_losses_.reserve(static_cast<size_t>(spec_.B * layout_.steps_per_visit));
  correct_.assign(static_cast<size_t>(spec_.B), 0);
  // A plan that amounts to fused (one group) is fused: say so (plan(), logs, the sweep's CSV).
  if (layout_.is_fused()) {
    spec_.plan = ExecutionPlan::fused();
    return;
  }
  for (const PlanGroup& g : layout_.groups) {
    // Each worker rebinds one runner per group size to each of its groups in turn; workers
    // running at once never share a runner (activations).
    size_t r = 0;
    while (r < runners_.size() &&
           !(runners_[r].net->B() == g.count && runner_worker_[r] == g.worker))
      ++r;
    if (r == runners_.size()) {
      NetSpec ns = net_spec(spec_, false);
      ns.B = g.count;
      ns.model_ids.assign(spec_.model_ids.begin() + g.first,
                          spec_.model_ids.begin() + g.first + g.count);
      ns.external_state = true;
      runners_.push_back(record(std::make_unique<Net>(std::move(ns))));
      runner_worker_.push_back(g.worker);
    }
    runner_of_group_.push_back(r);
  }
  // +balanced: one model at a time on every worker, each worker its own runner.
  if (layout_.balanced) {
    runner_of_worker_.assign(static_cast<size_t>(layout_.workers), runners_.size());
    for (size_t r = 0; r < runners_.size(); ++r)
      if (runners_[r].net->B() == 1) runner_of_worker_[static_cast<size_t>(runner_worker_[r])] = r;
    for (const size_t r : runner_of_worker_)
      HFTA_CHECK(r < runners_.size(), "plan {}: a worker has no runner", spec_.plan.str());
  }
}

Model::Runner Model::record(std::unique_ptr<Net> own) const {
  Runner r;
  Net& net = own ? *own : const_cast<Net&>(net_);
  try {
    r.images = net.input(spec_.sample_shape);
    const bool seg = task_ == ModelTask::kSegment;
    const int64_t L = spec_.sample_shape[0];
    r.labels = net.index_input(seg ? Shape{L} : Shape{});
    r.logits = definition_(net, r.images, spec_.num_classes);
    const Shape expected = seg ? Shape{L, spec_.num_classes} : Shape{spec_.num_classes};
    HFTA_CHECK(net.features(r.logits) == expected,
               "the model gives {} features per sample, expected {} logits",
               net.features(r.logits).str(), expected.str());
    r.loss =
        seg ? net.point_cross_entropy(r.logits, r.labels) : net.cross_entropy(r.logits, r.labels);
  } catch (const Error& e) {
    fail("{} on samples of shape {}: {}", name_, spec_.sample_shape.str(), e.what());
  }
  net.finalize();
  r.net = std::move(own);
  return r;
}

void Model::set_inputs(Runner& r, const TensorView& images, const IndexView& labels) const {
  Net& net = r.net ? *r.net : const_cast<Net&>(net_);
  try {
    if (images.device != net.device() && !device_images_.empty()) {
      // A host minibatch for a device net: copied once for all B models.
      HFTA_CHECK(
          images.numel() <= device_images_.numel() && labels.numel() <= device_labels_.numel(),
          "a minibatch of shape {} with labels {}, but the model was built for batches of "
          "at most {} samples of shape {}",
          images.shape.str(), labels.shape.str(), spec_.batch_size, spec_.sample_shape.str());
      const TensorView on_device = device_images_.leading(images.shape);
      const IndexView labels_on_device = device_labels_.leading(labels.shape);
      image_upload_.upload(images, on_device);
      label_upload_.upload(labels, labels_on_device);
      net.set_input(r.images, on_device);
      net.set_input(r.labels, labels_on_device);
      return;
    }
    net.set_input(r.images, images);
    net.set_input(r.labels, labels);
  } catch (const Error& e) {
    fail("{}: {}", name_, e.what());
  }
}

void Model::collect(const Runner& r, int64_t first, bool training) {
  const Net& net = r.net ? *r.net : net_;
  const TensorView loss = net.value(r.loss);
  copy_memory(losses_.data() + first, Device::kCpu, loss.data, loss.device,
              static_cast<size_t>(net.B()) * sizeof(float));
  // Per-point logits [B, n, L, P] count as B x (n*L) rows of P.
  const int64_t rows = net.rows() * labels_per_sample(), P = spec_.num_classes;
  const TensorView logits = net.value(r.logits);
  if (task_ == ModelTask::kSegment && !training) {
    // Evaluation only (the allocation happens once): IoU needs every model's logits, and a plan
    // other than fused overwrites one group's with the next's.
    point_logits_.resize(static_cast<size_t>(spec_.B * spec_.batch_size * labels_per_sample() * P));
    point_logit_rows_ = net.rows();
    copy_memory(point_logits_.data() + first * rows * P, Device::kCpu, logits.data, logits.device,
                static_cast<size_t>(logits.numel()) * sizeof(float));
  }
  CrossEntropyParams ce{net.B(), rows, P};
  count_correct(ce, {.logits = logits.reshaped(Shape{net.B(), rows, P}),
                     .labels = net.index_value(r.labels).reshaped(Shape{rows}),
                     .correct = std::span<int64_t>(correct_).subspan(
                         static_cast<size_t>(first), static_cast<size_t>(net.B()))});
}

void Model::run_groups(std::span<const StepBatch> steps, bool training, bool with_backward,
                       const AfterStepBackward& after_backward) {
  const int64_t forwards = net_.training_forwards();
  const int64_t n = static_cast<int64_t>(steps.size());
  // Steps [first, end) of group g on runner r: bind the runner to the group's models, then every
  // step: run, collect.
  auto run_steps = [&](size_t g, Runner& r, int64_t first, int64_t end) {
    const PlanGroup& group = layout_.groups[g];
    r.net->bind_state(net_, group.first);
    for (int64_t k = first; k < end; ++k) {
      // Dropout draws by (model, training forward): step k is the array's forward + k.
      r.net->set_training_forwards(forwards + k);
      set_inputs(r, steps[static_cast<size_t>(k)].images, steps[static_cast<size_t>(k)].labels);
      r.net->forward(training);
      collect(r, group.first, training);
      if (!with_backward) continue;
      std::copy_n(losses_.begin() + group.first, group.count,
                  step_losses_.begin() + k * spec_.B + group.first);
      // the bound net's gradients are this group's slices of net_'s
      r.net->zero_grad_and_backward();
      if (after_backward) after_backward(k, group.first, group.count);
    }
  };
  if (layout_.balanced) {
    // Any worker runs any model's part, on that worker's runner.
    run_balanced_parts(layout_, n, [&](size_t g, int worker, int64_t first, int64_t end) {
      run_steps(g, runners_[runner_of_worker_[static_cast<size_t>(worker)]], first, end);
    });
  } else {
    run_plan_groups(layout_, [&](size_t g) { run_steps(g, runners_[runner_of_group_[g]], 0, n); });
  }
  if (training) net_.set_training_forwards(forwards + n);
}

void Model::forward(const TensorView& images, const IndexView& labels, bool training) {
  if (!layout_.is_fused()) {
    HFTA_CHECK(!training, "{}: under plan {} a training forward runs in train_step()", name_,
               spec_.plan.str());
    const StepBatch step{images, labels};
    return run_groups({&step, 1}, false, false);
  }
  set_inputs(fused_, images, labels);
  net_.forward(training);
  collect(fused_, 0, training);
}

void Model::backward() {
  HFTA_CHECK(layout_.is_fused(), "{}: under plan {} backward runs in train_step()", name_,
             spec_.plan.str());
  net_.zero_grad_and_backward();
}

void Model::train_step(const TensorView& images, const IndexView& labels,
                       const AfterBackward& after_backward) {
  const StepBatch step{images, labels};
  train_steps({&step, 1}, [&](int64_t, int64_t first, int64_t count) {
    if (after_backward) after_backward(first, count);
  });
}

void Model::train_steps(std::span<const StepBatch> steps, const AfterStepBackward& after_backward) {
  const int64_t n = static_cast<int64_t>(steps.size());
  HFTA_CHECK(n >= 1, "{}: train_steps needs at least one minibatch", name_);
  step_losses_.resize(static_cast<size_t>(n * spec_.B));  // allocates only for a longer run
  if (!layout_.is_fused()) return run_groups(steps, true, true, after_backward);
  for (int64_t k = 0; k < n; ++k) {
    forward(steps[static_cast<size_t>(k)].images, steps[static_cast<size_t>(k)].labels, true);
    std::copy(losses_.begin(), losses_.end(), step_losses_.begin() + k * spec_.B);
    backward();
    if (after_backward) after_backward(k, 0, spec_.B);
  }
}

std::span<const float> Model::step_losses(int64_t k) const {
  HFTA_CHECK(k >= 0 && (k + 1) * spec_.B <= static_cast<int64_t>(step_losses_.size()),
             "{}: no step {} in the last train_steps()", name_, k);
  return std::span<const float>(step_losses_)
      .subspan(static_cast<size_t>(k * spec_.B), static_cast<size_t>(spec_.B));
}

TensorView Model::point_logits() const {
  if (point_logit_rows_ == 0) return {};
  return TensorView(const_cast<float*>(point_logits_.data()),
                    Shape{spec_.B, point_logit_rows_, labels_per_sample(), spec_.num_classes});
}

double Model::train_flops_per_sample() const {
  return runners_.empty() ? net_.train_flops_per_sample()
                          : runners_.front().net->train_flops_per_sample();
}

size_t Model::arena_bytes() const {
  size_t bytes = net_.arena_bytes();
  for (const Runner& r : runners_) bytes += r.net->arena_bytes();
  return bytes;
}

void Model::reset_profile() {
  net_.reset_profile();
  for (Runner& r : runners_) r.net->reset_profile();
}

std::string Model::describe() const {
  std::string out = name_ + " " + net_.describe();
  if (!runners_.empty()) {
    size_t activations = 0;
    for (const Runner& r : runners_) activations += r.net->arena_bytes();
    out += fmt::format("\n  plan {}: {} groups on {} worker(s), {:.1f} MiB of activations",
                       spec_.plan.str(), layout_.groups.size(), layout_.workers,
                       static_cast<double>(activations) / (1 << 20));
  }
  return out;
}

std::string Model::profile_report() const {
  return name_ + " " +
         (runners_.empty() ? net_.profile_report() : runners_.front().net->profile_report());
}

std::vector<float> Model::extract(int64_t b) const {
  HFTA_CHECK(b >= 0 && b < spec_.B, "{}: no model {} in an array of {}", name_, b, spec_.B);
  std::vector<float> values(static_cast<size_t>(params_per_model()));
  float* to = values.data();
  for (const Param& p : params()) {
    const TensorView slice = p.value.replica(b);
    copy_memory(to, Device::kCpu, slice.data, slice.device,
                static_cast<size_t>(slice.numel()) * sizeof(float));
    to += slice.numel();
  }
  return values;
}

void Model::insert(int64_t b, const std::vector<float>& values) {
  HFTA_CHECK(b >= 0 && b < spec_.B, "{}: no model {} in an array of {}", name_, b, spec_.B);
  HFTA_CHECK(static_cast<int64_t>(values.size()) == params_per_model(),
             "{}: {} values for a model of {} parameters", name_, values.size(),
             params_per_model());
  const float* src = values.data();
  for (const Param& p : params()) {
    const TensorView slice = p.value.replica(b);
    copy_memory(slice.data, slice.device, src, Device::kCpu,
                static_cast<size_t>(slice.numel()) * sizeof(float));
    src += slice.numel();
  }
}

namespace {
const std::vector<ModelInfo>& registry() {
  static const std::vector<ModelInfo> table = {
      {"lenet", Shape{1, 28, 28}, 10, define_lenet, ModelTask::kClassify, true},
      {"mlp", Shape{1, 28, 28}, 10, define_mlp, ModelTask::kClassify, true},
      {"mobilenetv2", Shape{3, 32, 32}, 10, define_mobilenetv2, ModelTask::kClassify, true},
      {"mobilenetv3_large", Shape{3, 32, 32}, 10, define_mobilenetv3_large, ModelTask::kClassify,
       true},
      {"mobilenetv3_small", Shape{3, 32, 32}, 10, define_mobilenetv3_small, ModelTask::kClassify,
       true},
      {"pointnet_cls", Shape{1024, 3}, 10, define_pointnet_cls, ModelTask::kClassify, true},
      {"pointnet_cls_ft", Shape{1024, 3}, 10, define_pointnet_cls_ft, ModelTask::kClassify, true},
      {"pointnet_seg", Shape{2500, 3}, kShapesParts, define_pointnet_seg, ModelTask::kSegment,
       true},
      {"pointnet_seg_ft", Shape{2500, 3}, kShapesParts, define_pointnet_seg_ft, ModelTask::kSegment,
       true},
      {"resnet18", Shape{3, 32, 32}, 10, define_resnet18, ModelTask::kClassify, true},
  };
  return table;
}
}  // namespace

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const ModelInfo& m : registry()) names.push_back(m.name);
  return names;
}

const ModelInfo& model_info(const std::string& name) {
  for (const ModelInfo& m : registry())
    if (m.name == name) return m;
  fail("unknown model '{}': choose one of {}", name, fmt::join(model_names(), ", "));
}

std::string feature_transform_variant(const std::string& name) {
  const std::string base = model_info(name).name;
  if (base.ends_with("_ft")) return base;
  for (const ModelInfo& m : registry())
    if (m.name == base + "_ft") return m.name;
  fail(
      "--feature-transform: {} has no feature transform (PointNet's pointnet_cls and "
      "pointnet_seg have)",
      base);
}

std::unique_ptr<Model> make_model(const std::string& name, const ModelSpec& spec) {
  const ModelInfo& info = model_info(name);
  ModelSpec s = spec;
  if (s.sample_shape.rank() == 0) s.sample_shape = info.default_sample_shape;
  if (s.num_classes == 0) s.num_classes = info.default_num_classes;
  return std::make_unique<Model>(info.name, s, info.definition, info.task);
}

}  // namespace hfta
