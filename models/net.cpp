#include "models/net.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/device_memory.h"
#include "core/error.h"
#include "fused_ops/add.h"
#include "models/net_value_info.h"

namespace hfta {

Net::Net(NetSpec spec) : spec_(std::move(spec)) {
  HFTA_CHECK(spec_.B >= 1, "the array needs at least one model, got B = {}", spec_.B);
  HFTA_CHECK(spec_.capacity >= 1, "batch size must be positive, got {}", spec_.capacity);
  if (spec_.model_ids.empty())
    for (int64_t b = 0; b < spec_.B; ++b) spec_.model_ids.push_back(b);
  HFTA_CHECK(static_cast<int64_t>(spec_.model_ids.size()) == spec_.B,
             "{} model ids for an array of {} models", spec_.model_ids.size(), spec_.B);
  forward_origins_.assign(static_cast<size_t>(spec_.B), 0);
  const char* profile = std::getenv("HFTA_PROFILE");
  profile_ = profile != nullptr && std::string(profile) != "0";
  // For comparisons and per-op profiles: the activations as ops of their own.
  const char* fuse = std::getenv("HFTA_FUSE_ACTIVATIONS");
  if (fuse != nullptr && std::string(fuse) == "0") spec_.fuse_activations = false;
}

Net::~Net() = default;

Net::ValueInfo& Net::info(Value v) { return values_[static_cast<size_t>(v.id)]; }
const Net::ValueInfo& Net::info(Value v) const { return values_[static_cast<size_t>(v.id)]; }

void Net::check_value(Value v, const char* what) const {
  HFTA_CHECK(v.valid() && v.id < static_cast<int32_t>(values_.size()),
             "{}: value {} was not recorded in this net", what, v.id);
}

Value Net::input(const Shape& sample) {
  HFTA_CHECK(!finalized_, "input() after finalize()");
  ValueInfo vi;
  vi.features = sample;
  vi.layout = sample.rank() == 1 ? Layout::kRows : Layout::kChannels;
  vi.shared = true;
  values_.push_back(vi);
  return {static_cast<int32_t>(values_.size() - 1)};
}

Value Net::model_input(const Shape& sample, bool needs_grad) {
  HFTA_CHECK(!finalized_, "model_input() after finalize()");
  HFTA_CHECK(sample.rank() >= 1, "a per-model input needs features, got a scalar sample");
  ValueInfo vi;
  vi.features = sample;
  vi.layout = sample.rank() == 1 ? Layout::kRows : Layout::kChannels;
  vi.per_model_input = true;
  vi.input_needs_grad = needs_grad;
  values_.push_back(vi);
  return {static_cast<int32_t>(values_.size() - 1)};
}

Value Net::index_input(const Shape& sample) {
  Value v = input(sample);
  info(v).integer = true;
  return v;
}

Net::Scope Net::scope(const std::string& name) {
  scope_.push_back(name);
  return Scope(*this);
}

Net::Scope::~Scope() {
  if (net_ != nullptr) net_->scope_.pop_back();
}

std::string Net::scoped(const std::string& leaf) const {
  std::string out;
  for (const std::string& s : scope_) out += s + ".";
  return out + leaf;
}

const Shape& Net::features(Value v) const {
  check_value(v, "features");
  return info(v).features;
}
Layout Net::layout(Value v) const {
  check_value(v, "layout");
  return info(v).layout;
}
bool Net::shared(Value v) const {
  check_value(v, "shared");
  return info(v).shared;
}

Shape Net::batch_shape(Value v, int64_t n) const {
  const ValueInfo& vi = info(v);
  const Shape& f = vi.features;
  Shape s;
  if (vi.layout == Layout::kPerModel) {
    s.push_back(B());
  } else if (vi.shared) {
    s.push_back(n);
  } else if (vi.layout == Layout::kChannels) {
    s.push_back(n);
    s.push_back(B() * f[0]);
    for (int i = 1; i < f.rank(); ++i) s.push_back(f[i]);
    return s;
  } else {
    s.push_back(B());
    s.push_back(n);
  }
  for (int64_t d : f) s.push_back(d);
  return s;
}

Value Net::add_node(std::unique_ptr<Node> node, const std::vector<Value>& inputs, Shape features,
                    Layout layout) {
  HFTA_CHECK(!finalized_, "cannot add {} after finalize()", node->describe());
  const int index = static_cast<int>(nodes_.size());
  for (Value in : inputs) {
    check_value(in, "add_node");
    info(in).last_consumer = index;
    ++info(in).consumers;
  }
  HFTA_CHECK(layout != Layout::kChannels || features.rank() >= 1,
             "{}: channel-layout features need a channel axis, got {}", node->describe(),
             features.str());
  ValueInfo vi;
  vi.features = features;
  vi.layout = layout;
  vi.producer = index;
  values_.push_back(vi);
  node->inputs = inputs;
  node->output = {static_cast<int32_t>(values_.size() - 1)};
  nodes_.push_back(std::move(node));
  node_params_.push_back(static_cast<int32_t>(params_.size()));
  return nodes_.back()->output;
}

int Net::add_param(const std::string& leaf, const Shape& per_model, Init init, int64_t fan_in,
                   int64_t fan_out, ParamKind kind, bool torch_transposed) {
  const std::string name = scoped(leaf);
  for (const Param& p : params_)
    HFTA_CHECK(p.name != name, "two parameters are named {}: give the modules distinct names",
               name);
  Param p;
  p.name = name;
  p.init = init;
  p.fan_in = fan_in;
  p.fan_out = fan_out;
  p.kind = kind;
  p.torch_transposed = torch_transposed;
  params_.push_back(p);
  param_shapes_.push_back(per_model);
  return static_cast<int>(params_.size() - 1);
}

int Net::add_buffer(const std::string& leaf, const Shape& per_model, float initial, bool integer) {
  buffers_.push_back({scoped(leaf), TensorView(), initial, integer});
  buffer_shapes_.push_back(per_model);
  return static_cast<int>(buffers_.size() - 1);
}

int Net::add_saved(const Shape& whole) {
  saved_shapes_.push_back(whole);
  return static_cast<int>(saved_shapes_.size() - 1);
}

void Net::add_loss(Value per_model_loss) {
  check_value(per_model_loss, "add_loss");
  HFTA_CHECK(
      info(per_model_loss).layout == Layout::kPerModel && info(per_model_loss).features.rank() == 0,
      "a loss must be one value per model");
  losses_.push_back(per_model_loss);
}

void Net::add_output_grad(Value v) {
  check_value(v, "add_output_grad");
  HFTA_CHECK(!info(v).shared && info(v).producer >= 0,
             "add_output_grad: value {} is not produced by an op of this net", v.id);
  grad_outputs_.push_back(v);
}

void Net::set_init(const std::string& name, Init init) {
  HFTA_CHECK(!finalized_, "set_init({}) after finalize()", name);
  for (Param& p : params_)
    if (p.name == name) {
      p.init = init;
      return;
    }
  fail("set_init: no parameter is named {}", name);
}

void Net::check_input_device(Device device, const char* what) const {
  HFTA_CHECK(device == spec_.device,
             "the {} is in {} memory, but the net runs on the {}: copy it there first", what,
             device == Device::kCuda ? "CUDA device" : "host",
             spec_.device == Device::kCuda ? "CUDA device" : "CPU");
}

void Net::set_input(Value v, const TensorView& batch) {
  check_value(v, "set_input");
  check_input_device(batch.device, "minibatch");
  ValueInfo& vi = info(v);
  if (vi.per_model_input) {
    const int64_t n = batch.shape.rank() >= 2 ? batch.shape[vi.layout == Layout::kRows ? 1 : 0] : 0;
    HFTA_CHECK(n >= 1 && n <= capacity(),
               "a per-model input of shape {}: expected {} with 1 to {} rows", batch.shape.str(),
               batch_shape(v, capacity()).str(), capacity());
    check_shape(batch, batch_shape(v, n), "per-model input");
    vi.data = batch.data;
    vi.input_rows = n;
    n_ = n;
    return;
  }
  HFTA_CHECK(vi.shared && !vi.integer, "set_input: value {} is not a float input", v.id);
  HFTA_CHECK(batch.shape.rank() == vi.features.rank() + 1,
             "the minibatch has shape {}, expected [n, {}]", batch.shape.str(),
             fmt::join(vi.features.begin(), vi.features.end(), ", "));
  for (int i = 0; i < vi.features.rank(); ++i)
    HFTA_CHECK(batch.shape[i + 1] == vi.features[i],
               "the minibatch has shape {}, expected samples of shape {}", batch.shape.str(),
               vi.features.str());
  const int64_t n = batch.shape[0];
  HFTA_CHECK(n >= 1 && n <= capacity(),
             "a minibatch of {} rows, but the model was built for 1 to {} rows", n, capacity());
  vi.data = batch.data;
  vi.input_rows = n;
  n_ = n;
}

void Net::set_input(Value v, const IndexView& batch) {
  check_value(v, "set_input");
  check_input_device(batch.device, "index minibatch");
  ValueInfo& vi = info(v);
  HFTA_CHECK(vi.shared && vi.integer, "set_input: value {} is not an index input", v.id);
  Shape expected{batch.shape.rank() > 0 ? batch.shape[0] : 0};
  for (int64_t d : vi.features) expected.push_back(d);
  check_shape(batch, expected, "labels");
  vi.index_data = batch.data;
  vi.input_rows = batch.shape[0];
  // A net whose only inputs are indices (a language model's tokens) takes its rows from them.
  HFTA_CHECK(vi.input_rows >= 1 && vi.input_rows <= capacity(),
             "a batch of {} rows, but the model was built for 1 to {} rows", vi.input_rows,
             capacity());
  n_ = vi.input_rows;
}

TensorView Net::value(Value v) const {
  const ValueInfo& vi = info(v);
  return TensorView(vi.data, batch_shape(v, n_), spec_.device);
}

IndexView Net::index_value(Value v) const {
  const ValueInfo& vi = info(v);
  return IndexView(vi.index_data, batch_shape(v, n_), spec_.device);
}

TensorView Net::grad(Value v) const {
  const ValueInfo& vi = info(v);
  if (vi.grad_data == nullptr) return {};
  return TensorView(vi.grad_data, batch_shape(v, n_), spec_.device);
}

IndexView Net::saved_index(int i) const {
  const TensorView& t = saved_[static_cast<size_t>(i)];
  return IndexView(reinterpret_cast<int32_t*>(t.data), t.shape, t.device);
}

InputGrad Net::input_grad(const Node& node, int i) {
  ValueInfo& vi = info(node.inputs[static_cast<size_t>(i)]);
  if (vi.grad_data == nullptr) return {};
  TensorView target = grad(node.inputs[static_cast<size_t>(i)]);
  if (!vi.grad_written) {
    vi.grad_written = true;
    return {target, false};
  }
  if (node.accumulates_dx()) return {target, true};
  HFTA_CHECK(pending_scratch_ < 0, "{}: two inputs need accumulation through one scratch buffer",
             node.describe());
  pending_scratch_ = node.inputs[static_cast<size_t>(i)].id;
  return {scratch_.leading(target.shape), false};
}

void Net::forward(bool training) {
  HFTA_CHECK(finalized_, "forward() before finalize()");
  HFTA_CHECK(!spec_.state_only, "this net holds only state: run its steps on nets bound to it");
  HFTA_CHECK(!spec_.external_state || params_.empty() || params_[0].value.data != nullptr,
             "forward() before bind_state()");
  for (const ValueInfo& vi : values_)
    if (vi.shared || vi.per_model_input)
      HFTA_CHECK(vi.input_rows == n_ && (vi.data != nullptr || vi.index_data != nullptr),
                 "every input needs a batch of {} rows before forward()", n_);
  if (training) {
    for (int64_t b = 0; b < spec_.B; ++b)
      dropout_streams_[static_cast<size_t>(b)] = RngStream::for_model(
          spec_.seed ^ static_cast<uint64_t>(training_forwards_ - forward_origins_[b]),
          spec_.model_ids[b], kRngDropout);
    ++training_forwards_;
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& node = *nodes_[i];
    auto run = [&] {
      try {
        node.forward(*this, n_, training);
      } catch (const Error& e) {
        fail("{}: {}", node.describe(), e.what());
      }
    };
    if (!profile_) {
      run();
      continue;
    }
    // A device's kernels run asynchronously: each node's time is measured from an idle stream
    // to the node's last kernel's end.
    if (spec_.device != Device::kCpu) synchronize(spec_.device);
    const auto start = std::chrono::steady_clock::now();
    run();
    if (spec_.device != Device::kCpu) synchronize(spec_.device);
    forward_ms_[i] +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  forward_done_ = true;
}

void Net::zero_grad() {
  if (!spec_.external_state) return grad_arena_.zero();
  for (const Param& p : params_) zero_param_grad(p);
}

void Net::zero_grad_and_backward() {
  // A device zeroes the arena in one call; per-node zeroing would add a launch per parameter.
  if (spec_.device != Device::kCpu) {
    zero_grad();
    return backward();
  }
  grads_unzeroed_.assign(params_.size(), 1);
  try {
    backward();
  } catch (...) {
    grads_unzeroed_.clear();  // a later backward() must not take up this one's zeroing
    throw;
  }
  // Parameters no loss reached (their nodes skipped) still start the next step from zero.
  for (size_t k = 0; k < params_.size(); ++k)
    if (grads_unzeroed_[k]) zero_param_grad(params_[k]);
  grads_unzeroed_.clear();
}

void Net::zero_param_grad(const Param& p) { zero_view(p.grad); }

// Before node i's backward in zero_grad_and_backward(): the node writes its parameter gradients
// when all of them are still unzeroed and it can; otherwise the unzeroed ones are zeroed now.
void Net::prepare_param_grads(size_t i) {
  param_grads_fresh_ = false;
  if (grads_unzeroed_.empty()) return;
  const auto first = static_cast<size_t>(node_params_[i]);
  const auto end = static_cast<size_t>(node_params_[i + 1]);
  if (first == end) return;
  bool all_unzeroed = true;
  for (size_t k = first; k < end; ++k) all_unzeroed = all_unzeroed && grads_unzeroed_[k];
  param_grads_fresh_ = all_unzeroed && nodes_[i]->writes_param_grads();
  for (size_t k = first; k < end; ++k) {
    if (grads_unzeroed_[k] && !param_grads_fresh_) zero_param_grad(params_[k]);
    grads_unzeroed_[k] = 0;
  }
}

void Net::backward() {
  HFTA_CHECK(forward_done_, "backward() needs a forward() first");
  ++profiled_steps_;
  for (ValueInfo& vi : values_) vi.grad_written = false;
  for (Value l : losses_) {
    ValueInfo& vi = info(l);
    fill_view(TensorView(vi.grad_data, Shape{spec_.B}, spec_.device), 1.0f);
    vi.grad_written = true;
  }
  for (Value o : grad_outputs_) info(o).grad_written = true;
  for (size_t i = nodes_.size(); i-- > 0;) {
    Node& node = *nodes_[i];
    if (!info(node.output).grad_written) continue;  // no loss depends on it
    if (profile_ && spec_.device != Device::kCpu) synchronize(spec_.device);
    const auto start = std::chrono::steady_clock::now();
    pending_scratch_ = -1;
    prepare_param_grads(i);
    try {
      node.backward(*this, n_);
    } catch (const Error& e) {
      param_grads_fresh_ = false;
      fail("{} (backward): {}", node.describe(), e.what());
    }
    param_grads_fresh_ = false;
    if (pending_scratch_ >= 0) {  // the scratch gradient added in: the add op's backward
      const TensorView target = grad(Value{pending_scratch_});
      add_backward({.dy = scratch_.leading(target.shape), .dx = target, .accumulate_dx = true});
      pending_scratch_ = -1;
    }
    if (profile_ && spec_.device != Device::kCpu) synchronize(spec_.device);
    if (profile_)
      backward_ms_[i] +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
  }
}

int64_t Net::params_per_model() const {
  int64_t total = 0;
  for (const Param& p : params_) total += p.value.numel() / spec_.B;
  return total;
}

int64_t Net::buffers_per_model() const {
  int64_t total = 0;
  for (const ModelBuffer& b : buffers_) total += b.value.numel() / spec_.B;
  return total;
}

double Net::train_flops_per_sample() const {
  double flops = 0.0;
  for (const auto& node : nodes_) {
    bool with_dx = false;
    for (Value in : node->inputs) with_dx = with_dx || info(in).grad_data != nullptr;
    flops += node->forward_flops() + node->backward_flops(with_dx);
  }
  return flops;
}

size_t Net::arena_bytes() const {
  return param_arena_.capacity() + grad_arena_.capacity() + buffer_arena_.capacity() +
         act_arena_.capacity() + act_grad_arena_.capacity();
}

std::string Net::describe() const {
  std::string out =
      fmt::format("x{}: {} parameters per model, {:.1f} MiB of arenas per model", spec_.B,
                  params_per_model(), static_cast<double>(arena_bytes()) / spec_.B / (1 << 20));
  for (const auto& node : nodes_)
    out += fmt::format("\n  {} -> {}", node->describe(), info(node->output).features.str());
  return out;
}

void Net::reset_profile() {
  std::fill(forward_ms_.begin(), forward_ms_.end(), 0.0);
  std::fill(backward_ms_.begin(), backward_ms_.end(), 0.0);
  profiled_steps_ = 0;
}

std::vector<Net::NodeTime> Net::profile() const {
  const double steps = static_cast<double>(std::max<int64_t>(1, profiled_steps_));
  std::vector<NodeTime> out;
  for (size_t i = 0; i < nodes_.size(); ++i)
    out.push_back({nodes_[i]->describe(), forward_ms_[i] / steps, backward_ms_[i] / steps});
  return out;
}

std::string Net::profile_report() const {
  std::string out =
      fmt::format("x{}: ms per step over {} steps (forward, backward)", spec_.B, profiled_steps_);
  const double steps = static_cast<double>(std::max<int64_t>(1, profiled_steps_));
  for (size_t i = 0; i < nodes_.size(); ++i)
    out += fmt::format("\n  {:<56} {:8.3f} {:8.3f}", nodes_[i]->describe(), forward_ms_[i] / steps,
                       backward_ms_[i] / steps);
  return out;
}

}  // namespace hfta
