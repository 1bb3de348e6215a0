#include "models/model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <cstring>
#include <exception>
#include <span>

#include "core/error.h"
#include "core/parallel.h"
#include "fused_ops/cross_entropy.h"

namespace hfta {

namespace {
PlanLayout plan_layout(const ModelSpec& s) {
  return lay_out(s.plan, s.B, s.threads > 0 ? s.threads : num_threads());
}

NetSpec net_spec(const ModelSpec& s, bool state_only) {
  return {.B = s.B,
          .capacity = s.batch_size,
          .seed = s.seed,
          .model_ids = s.model_ids,
          .dropout = s.dropout,
          .state_only = state_only};
}
}  // namespace

Model::Model(std::string name, ModelSpec spec, ModelDefinition definition)
    : name_(std::move(name)),
      definition_(definition),
      spec_(std::move(spec)),
      net_(net_spec(spec_, !plan_layout(spec_).is_fused())),
      layout_(plan_layout(spec_)) {
  HFTA_CHECK(spec_.B >= 1, "{}: the array needs at least one model, got B = {}", name_, spec_.B);
  HFTA_CHECK(spec_.num_classes >= 2, "{}: a classifier needs at least 2 classes, got {}", name_,
             spec_.num_classes);
  HFTA_CHECK(spec_.sample_shape.rank() >= 1 && spec_.sample_shape.numel() >= 1,
             "{}: empty sample shape {}", name_, spec_.sample_shape.str());
  spec_.model_ids = net_.spec().model_ids;
  fused_ = record(nullptr);
  losses_.assign(static_cast<size_t>(spec_.B), 0.0f);
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
}

Model::Runner Model::record(std::unique_ptr<Net> own) const {
  Runner r;
  Net& net = own ? *own : const_cast<Net&>(net_);
  try {
    r.images = net.input(spec_.sample_shape);
    r.labels = net.index_input(Shape{});
    r.logits = definition_(net, r.images, spec_.num_classes);
    HFTA_CHECK(net.features(r.logits) == Shape{spec_.num_classes},
               "the model gives {} features per sample, expected [{}] logits",
               net.features(r.logits).str(), spec_.num_classes);
    r.loss = net.cross_entropy(r.logits, r.labels);
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
    net.set_input(r.images, images);
    net.set_input(r.labels, labels);
  } catch (const Error& e) {
    fail("{}: {}", name_, e.what());
  }
}

void Model::collect(const Runner& r, int64_t first) {
  const Net& net = r.net ? *r.net : net_;
  const TensorView loss = net.value(r.loss);
  std::copy(loss.data, loss.data + net.B(), losses_.begin() + first);
  CrossEntropyParams ce{net.B(), net.rows(), spec_.num_classes};
  count_correct(ce, {.logits = net.value(r.logits),
                     .labels = net.index_value(r.labels),
                     .correct = std::span<int64_t>(correct_).subspan(
                         static_cast<size_t>(first), static_cast<size_t>(net.B()))});
}

void Model::run_groups(const TensorView& images, const IndexView& labels, bool training,
                       bool with_backward) {
  if (with_backward) net_.zero_grad();
  const int64_t forwards = net_.training_forwards();
  // One group: bind its runner to the group's models, run, collect.
  auto run_group = [&](size_t g) {
    const PlanGroup& group = layout_.groups[g];
    Runner& r = runners_[runner_of_group_[g]];
    r.net->bind_state(net_, group.first);
    r.net->set_training_forwards(forwards);
    set_inputs(r, images, labels);
    r.net->forward(training);
    collect(r, group.first);
    if (with_backward) r.net->backward();
  };
  if (layout_.workers == 1) {
    for (size_t g = 0; g < layout_.groups.size(); ++g) run_group(g);
  } else {
    // Each worker runs its groups on one thread, with every op inside single-threaded: no
    // barrier between the workers until the step ends.
    std::vector<std::exception_ptr> errors(static_cast<size_t>(layout_.workers));
#pragma omp parallel num_threads(layout_.workers)
    {
      omp_set_num_threads(1);
      const int w = omp_get_thread_num();
      try {
        for (size_t g = 0; g < layout_.groups.size(); ++g)
          if (layout_.groups[g].worker == w) run_group(g);
      } catch (...) {
        errors[static_cast<size_t>(w)] = std::current_exception();
      }
    }
    for (auto& error : errors)
      if (error) std::rethrow_exception(error);
  }
  if (training) net_.set_training_forwards(forwards + 1);
}

void Model::forward(const TensorView& images, const IndexView& labels, bool training) {
  if (!layout_.is_fused()) {
    HFTA_CHECK(!training, "{}: under plan {} a training forward runs in train_step()", name_,
               spec_.plan.str());
    return run_groups(images, labels, false, false);
  }
  set_inputs(fused_, images, labels);
  net_.forward(training);
  collect(fused_, 0);
}

void Model::backward() {
  HFTA_CHECK(layout_.is_fused(), "{}: under plan {} backward runs in train_step()", name_,
             spec_.plan.str());
  net_.zero_grad();
  net_.backward();
}

void Model::train_step(const TensorView& images, const IndexView& labels) {
  if (!layout_.is_fused()) return run_groups(images, labels, true, true);
  forward(images, labels, true);
  backward();
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
  std::vector<float> values;
  values.reserve(static_cast<size_t>(params_per_model()));
  for (const Param& p : params()) {
    TensorView slice = p.value.replica(b);
    values.insert(values.end(), slice.data, slice.data + slice.numel());
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
    TensorView slice = p.value.replica(b);
    std::memcpy(slice.data, src, sizeof(float) * static_cast<size_t>(slice.numel()));
    src += slice.numel();
  }
}

namespace {
const std::vector<ModelInfo>& registry() {
  static const std::vector<ModelInfo> table = {
      {"lenet", Shape{1, 28, 28}, 10, define_lenet},
      {"mlp", Shape{1, 28, 28}, 10, define_mlp},
      {"mobilenetv2", Shape{3, 32, 32}, 10, define_mobilenetv2},
      {"pointnet_cls", Shape{1024, 3}, 10, define_pointnet_cls},
      {"pointnet_cls_ft", Shape{1024, 3}, 10, define_pointnet_cls_ft},
      {"resnet18", Shape{3, 32, 32}, 10, define_resnet18},
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

std::unique_ptr<Model> make_model(const std::string& name, const ModelSpec& spec) {
  const ModelInfo& info = model_info(name);
  ModelSpec s = spec;
  if (s.sample_shape.rank() == 0) s.sample_shape = info.default_sample_shape;
  if (s.num_classes == 0) s.num_classes = info.default_num_classes;
  return std::make_unique<Model>(info.name, s, info.definition);
}

}  // namespace hfta
