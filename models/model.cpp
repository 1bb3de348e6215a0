#include "models/model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

#include "core/error.h"
#include "core/rng.h"
#include "fused_ops/cross_entropy.h"

namespace hfta {

Model::Model(std::string name, ModelSpec spec, Shape sample_shape, int64_t num_classes,
             std::vector<std::unique_ptr<Layer>> layers)
    : name_(std::move(name)),
      spec_(std::move(spec)),
      sample_shape_(sample_shape),
      num_classes_(num_classes),
      layers_(std::move(layers)) {
  HFTA_CHECK(spec_.B >= 1, "{}: the array needs at least one model, got B = {}", name_, spec_.B);
  HFTA_CHECK(spec_.batch_size >= 1, "{}: batch size must be positive, got {}", name_,
             spec_.batch_size);
  HFTA_CHECK(!layers_.empty(), "{} has no layers", name_);
  if (spec_.model_ids.empty())
    for (int64_t b = 0; b < spec_.B; ++b) spec_.model_ids.push_back(b);
  HFTA_CHECK(static_cast<int64_t>(spec_.model_ids.size()) == spec_.B,
             "{}: {} model ids for an array of {} models", name_, spec_.model_ids.size(), spec_.B);

  features_.push_back(sample_shape_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    try {
      features_.push_back(layers_[i]->connect(features_.back(), i == 0));
    } catch (const Error& e) {
      fail("{} layer {}: {}", name_, i, e.what());
    }
  }
  HFTA_CHECK(features_.back() == Shape{num_classes_},
             "{}: the last layer gives {} features per sample, expected [{}] logits", name_,
             features_.back().str(), num_classes_);

  // Pass 1 counts the bytes, pass 2 carves the same layout from real arenas.
  Arena count_params, count_grads, count_acts;
  layout(count_params, count_grads, count_acts);
  param_arena_ = Arena(count_params.used(), name_ + " parameters");
  grad_arena_ = Arena(count_grads.used(), name_ + " gradients");
  act_arena_ = Arena(count_acts.used(), name_ + " activations");
  layout(param_arena_, grad_arena_, act_arena_);
  initialize_parameters();
  const char* profile = std::getenv("HFTA_PROFILE");
  profile_ = profile != nullptr && std::string(profile) != "0";
  forward_ms_.assign(layers_.size() + 1, 0.0);
  backward_ms_.assign(layers_.size() + 1, 0.0);
}

namespace {
// Runs f, adding its wall time to `total_ms` when profiling.
template <typename F>
void timed(bool profile, double& total_ms, F&& f) {
  if (!profile) return f();
  const auto start = std::chrono::steady_clock::now();
  f();
  total_ms +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

void Model::reset_profile() {
  std::fill(forward_ms_.begin(), forward_ms_.end(), 0.0);
  std::fill(backward_ms_.begin(), backward_ms_.end(), 0.0);
  profiled_steps_ = 0;
}

std::string Model::profile_report() const {
  std::string out = fmt::format("{} x{}: ms per step over {} steps (forward, backward)", name_,
                                spec_.B, profiled_steps_);
  const double steps = static_cast<double>(std::max<int64_t>(1, profiled_steps_));
  for (size_t i = 0; i <= layers_.size(); ++i)
    out += fmt::format("\n  {:<44} {:8.3f} {:8.3f}",
                       i < layers_.size() ? layers_[i]->describe() : "cross-entropy",
                       forward_ms_[i] / steps, backward_ms_[i] / steps);
  return out;
}

void Model::layout(Arena& params, Arena& grads, Arena& acts) {
  const int64_t B = spec_.B, cap = spec_.batch_size;
  params_.clear();
  outputs_.clear();
  LayerContext ctx(B, cap, params, grads, acts, params_);
  int64_t largest = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->layout(ctx);
    Shape out = batch_shape(B, cap, features_[i + 1]);
    outputs_.push_back(acts.carve(out));
    largest = std::max(largest, out.numel());
  }
  grad_a_ = acts.carve(Shape{largest});
  grad_b_ = acts.carve(Shape{largest});
  probs_ = acts.carve(Shape{B, cap, num_classes_});
  losses_.assign(static_cast<size_t>(B), 0.0f);
  dlosses_ = acts.carve(Shape{B});
}

void Model::initialize_parameters() {
  // Model b's stream walks the parameters in layer order, its slice of each in memory order.
  for (int64_t b = 0; b < spec_.B; ++b) {
    RngStream rng = RngStream::for_model(spec_.seed, spec_.model_ids[b], kRngInit);
    for (const Param& p : params_) {
      TensorView slice = p.value.replica(b);
      const float bound = 1.0f / std::sqrt(static_cast<float>(p.fan_in));
      for (int64_t i = 0; i < slice.numel(); ++i) slice[i] = rng.uniform(-bound, bound);
    }
  }
  for (int64_t b = 0; b < spec_.B; ++b) dlosses_[b] = 1.0f;
}

TensorView Model::input_view(const TensorView& images) const {
  HFTA_CHECK(images.shape.rank() == sample_shape_.rank() + 1,
             "{}: the minibatch has shape {}, expected [n, {}]", name_, images.shape.str(),
             fmt::join(sample_shape_.begin(), sample_shape_.end(), ", "));
  for (int i = 0; i < sample_shape_.rank(); ++i)
    HFTA_CHECK(images.shape[i + 1] == sample_shape_[i],
               "{}: the minibatch has shape {}, expected samples of shape {}", name_,
               images.shape.str(), sample_shape_.str());
  return images;
}

void Model::forward(const TensorView& images, const IndexView& labels, bool training) {
  input_view(images);
  const int64_t n = images.shape[0], B = spec_.B;
  HFTA_CHECK(n >= 1 && n <= spec_.batch_size,
             "{}: a minibatch of {} rows, but the model was built for 1 to {} rows", name_, n,
             spec_.batch_size);
  check_shape(labels, Shape{n}, "labels");
  images_ = images;
  labels_ = labels;
  n_ = n;
  // Every activation is the first rows of its buffer, laid out for n rows.
  TensorView x = images;
  for (size_t i = 0; i < layers_.size(); ++i) {
    TensorView y(outputs_[i].data, batch_shape(B, n, features_[i + 1]));
    timed(profile_, forward_ms_[i], [&] { layers_[i]->forward(x, y, n, training); });
    x = y;
  }
  CrossEntropyParams ce{B, n, num_classes_};
  timed(profile_, forward_ms_.back(), [&] {
    cross_entropy_forward(ce, {.logits = x,
                               .labels = labels,
                               .losses = TensorView(losses_.data(), Shape{B}),
                               .saved = {.probs = TensorView(probs_.data, ce.logits_shape())}});
  });
}

void Model::backward() {
  HFTA_CHECK(n_ > 0, "{}: backward() needs a forward() first", name_);
  const int64_t B = spec_.B, n = n_;
  ++profiled_steps_;
  CrossEntropyParams ce{B, n, num_classes_};
  TensorView dlogits(probs_.data, ce.logits_shape());
  timed(profile_, backward_ms_.back(), [&] {
    grad_arena_.zero();
    cross_entropy_backward(
        ce,
        {.saved = {.probs = dlogits}, .labels = labels_, .dlosses = dlosses_, .dlogits = dlogits});
  });
  TensorView dy = dlogits;
  TensorView* spare = &grad_a_;
  for (size_t i = layers_.size(); i-- > 0;) {
    TensorView x =
        i == 0 ? images_ : TensorView(outputs_[i - 1].data, batch_shape(B, n, features_[i]));
    TensorView y(outputs_[i].data, batch_shape(B, n, features_[i + 1]));
    TensorView dx;
    if (i > 0) dx = TensorView(spare->data, x.shape);
    timed(profile_, backward_ms_[i], [&] { layers_[i]->backward(x, y, dy, dx, n); });
    dy = dx;
    spare = spare == &grad_a_ ? &grad_b_ : &grad_a_;
  }
}

std::vector<int64_t> Model::correct() const {
  HFTA_CHECK(n_ > 0, "{}: correct() needs a forward() first", name_);
  std::vector<int64_t> counts(static_cast<size_t>(spec_.B), 0);
  CrossEntropyParams ce{spec_.B, n_, num_classes_};
  // The logits of the last forward are the last layer's output.
  count_correct(ce, {.logits = TensorView(outputs_.back().data, ce.logits_shape()),
                     .labels = labels_,
                     .correct = counts});
  return counts;
}

int64_t Model::params_per_model() const {
  int64_t total = 0;
  for (const Param& p : params_) total += p.value.numel() / spec_.B;
  return total;
}

double Model::train_flops_per_sample() const {
  double flops = 0.0;
  for (size_t i = 0; i < layers_.size(); ++i)
    flops += layers_[i]->forward_flops() + layers_[i]->backward_flops(/*with_dx=*/i > 0);
  return flops;
}

size_t Model::arena_bytes() const {
  return param_arena_.capacity() + grad_arena_.capacity() + act_arena_.capacity();
}

std::string Model::describe() const {
  std::string out =
      fmt::format("{} x{}: {} parameters per model", name_, spec_.B, params_per_model());
  for (size_t i = 0; i < layers_.size(); ++i)
    out += fmt::format("\n  {} -> {}", layers_[i]->describe(), features_[i + 1].str());
  return out;
}

std::vector<float> Model::extract(int64_t b) const {
  HFTA_CHECK(b >= 0 && b < spec_.B, "{}: no model {} in an array of {}", name_, b, spec_.B);
  std::vector<float> values;
  values.reserve(static_cast<size_t>(params_per_model()));
  for (const Param& p : params_) {
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
  for (const Param& p : params_) {
    TensorView slice = p.value.replica(b);
    std::memcpy(slice.data, src, sizeof(float) * static_cast<size_t>(slice.numel()));
    src += slice.numel();
  }
}

namespace {

// MLP for 28x28 images: 784-256-256-10 with ReLU.
std::unique_ptr<Model> make_mlp(const ModelSpec& spec) {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(linear(256));
  layers.push_back(relu());
  layers.push_back(linear(256));
  layers.push_back(relu());
  layers.push_back(linear(10));
  return std::make_unique<Model>("mlp", spec, Shape{1, 28, 28}, 10, std::move(layers));
}

// LeNet-style CNN for 28x28 images: conv5x5 1->32 pad 2, maxpool 2, conv5x5 32->64 pad 2,
// maxpool 2, fc 3136->1024, fc 1024->10, ReLU after each conv and the first fc.
// Each conv's ReLU runs after its pool: max(0, x) is monotone, so maxpool(relu(x)) ==
// relu(maxpool(x)) exactly, with the same gradients (the pool routes dy to the same argmax, and
// ReLU zeroes it exactly when that max is <= 0), and the ReLU touches a quarter of the values
// (LeNet B=1 step: the two ReLUs 1.9 -> 0.5 ms).
std::unique_ptr<Model> make_lenet(const ModelSpec& spec) {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(conv2d(32, 5, 1, 2));
  layers.push_back(max_pool2d(2));
  layers.push_back(relu());
  layers.push_back(conv2d(64, 5, 1, 2));
  layers.push_back(max_pool2d(2));
  layers.push_back(relu());
  layers.push_back(flatten());
  layers.push_back(linear(1024));
  layers.push_back(relu());
  layers.push_back(linear(10));
  return std::make_unique<Model>("lenet", spec, Shape{1, 28, 28}, 10, std::move(layers));
}

using Factory = std::unique_ptr<Model> (*)(const ModelSpec&);
const std::map<std::string, Factory>& factories() {
  static const std::map<std::string, Factory> table = {{"mlp", make_mlp}, {"lenet", make_lenet}};
  return table;
}

}  // namespace

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& [name, f] : factories()) names.push_back(name);
  return names;
}

std::unique_ptr<Model> make_model(const std::string& name, const ModelSpec& spec) {
  auto it = factories().find(name);
  HFTA_CHECK(it != factories().end(), "unknown model '{}': choose one of {}", name,
             fmt::join(model_names(), ", "));
  return it->second(spec);
}

}  // namespace hfta
