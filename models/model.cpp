#include "models/model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

#include "core/error.h"
#include "fused_ops/cross_entropy.h"

namespace hfta {

namespace {
NetSpec net_spec(const ModelSpec& s) {
  return {.B = s.B,
          .capacity = s.batch_size,
          .seed = s.seed,
          .model_ids = s.model_ids,
          .dropout = s.dropout};
}
}  // namespace

Model::Model(std::string name, ModelSpec spec, ModelDefinition definition)
    : name_(std::move(name)), spec_(std::move(spec)), net_(net_spec(spec_)) {
  HFTA_CHECK(spec_.B >= 1, "{}: the array needs at least one model, got B = {}", name_, spec_.B);
  HFTA_CHECK(spec_.num_classes >= 2, "{}: a classifier needs at least 2 classes, got {}", name_,
             spec_.num_classes);
  HFTA_CHECK(spec_.sample_shape.rank() >= 1 && spec_.sample_shape.numel() >= 1,
             "{}: empty sample shape {}", name_, spec_.sample_shape.str());
  spec_.model_ids = net_.spec().model_ids;
  try {
    images_ = net_.input(spec_.sample_shape);
    labels_ = net_.index_input(Shape{});
    logits_ = definition(net_, images_, spec_.num_classes);
    HFTA_CHECK(net_.features(logits_) == Shape{spec_.num_classes},
               "the model gives {} features per sample, expected [{}] logits",
               net_.features(logits_).str(), spec_.num_classes);
    loss_ = net_.cross_entropy(logits_, labels_);
  } catch (const Error& e) {
    fail("{} on samples of shape {}: {}", name_, spec_.sample_shape.str(), e.what());
  }
  net_.finalize();
  losses_.assign(static_cast<size_t>(spec_.B), 0.0f);
}

void Model::forward(const TensorView& images, const IndexView& labels, bool training) {
  try {
    net_.set_input(images_, images);
    net_.set_input(labels_, labels);
  } catch (const Error& e) {
    fail("{}: {}", name_, e.what());
  }
  net_.forward(training);
  const TensorView loss = net_.value(loss_);
  std::copy(loss.data, loss.data + spec_.B, losses_.begin());
}

void Model::backward() {
  net_.zero_grad();
  net_.backward();
}

std::vector<int64_t> Model::correct() const {
  std::vector<int64_t> counts(static_cast<size_t>(spec_.B), 0);
  CrossEntropyParams ce{spec_.B, net_.rows(), spec_.num_classes};
  count_correct(
      ce, {.logits = net_.value(logits_), .labels = net_.index_value(labels_), .correct = counts});
  return counts;
}

std::string Model::describe() const { return name_ + " " + net_.describe(); }

std::string Model::profile_report() const { return name_ + " " + net_.profile_report(); }

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
