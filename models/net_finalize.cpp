// Net::finalize (models/net.h): the activation-gradient plan and the arenas laid out once the
// graph is recorded; binding a net to another's state; initializing each model's parameters.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/parallel.h"
#include "models/net.h"
#include "models/net_value_info.h"

namespace hfta {

namespace {
Shape with_models(int64_t B, const Shape& per_model) {
  Shape s{B};
  for (int64_t d : per_model) s.push_back(d);
  return s;
}
}  // namespace

// Activation gradients live only between their first write in backward (the backward of the
// value's last consumer) and the backward of its producer. Values whose lifetimes do not overlap
// share a slot; slots are sized by their largest occupant and laid out after planning.
size_t Net::plan_gradient_memory() {
  const int last = static_cast<int>(nodes_.size()) - 1;
  struct Interval {
    int value;
    int birth, death;  // backward time: node i runs at time last - i; losses are born at -1
    size_t bytes;
  };
  std::vector<Interval> intervals;
  for (size_t id = 0; id < values_.size(); ++id) {
    const ValueInfo& vi = values_[id];
    if (vi.shared) continue;
    // A per-model input's gradient lives until the caller reads it after backward().
    const bool fed = vi.per_model_input && vi.input_needs_grad;
    if (vi.producer < 0 && !fed) continue;
    auto among = [&](const std::vector<Value>& vs) {
      return std::any_of(vs.begin(), vs.end(),
                         [&](Value l) { return l.id == static_cast<int32_t>(id); });
    };
    const bool is_loss = among(losses_) || among(grad_outputs_);
    if (!is_loss && vi.last_consumer < 0) continue;  // nothing reads it: no gradient
    const size_t size = Arena::align_up(
        static_cast<size_t>(batch_shape({static_cast<int32_t>(id)}, capacity()).numel()) *
        sizeof(float));
    intervals.push_back({static_cast<int>(id), is_loss ? -1 : last - vi.last_consumer,
                         fed ? last + 1 : last - vi.producer, size});
  }
  std::sort(intervals.begin(), intervals.end(),
            [](const Interval& a, const Interval& b) { return a.birth < b.birth; });
  struct Slot {
    size_t bytes = 0;
    int free_after = -2;  // backward time after which the slot is free
    std::vector<int> values;
  };
  std::vector<Slot> slots;
  for (const Interval& iv : intervals) {
    Slot* best = nullptr;
    for (Slot& s : slots) {
      if (s.free_after >= iv.birth) continue;
      // Prefer the smallest slot that fits, else the largest one (it grows least).
      if (best == nullptr) {
        best = &s;
      } else if (s.bytes >= iv.bytes) {
        if (best->bytes < iv.bytes || s.bytes < best->bytes) best = &s;
      } else if (best->bytes < iv.bytes && s.bytes > best->bytes) {
        best = &s;
      }
    }
    if (best == nullptr) best = &slots.emplace_back();
    best->bytes = std::max(best->bytes, iv.bytes);
    best->free_after = iv.death;
    best->values.push_back(iv.value);
  }
  size_t offset = 0;
  for (const Slot& s : slots) {
    for (int id : s.values)
      values_[static_cast<size_t>(id)].grad_offset = static_cast<int64_t>(offset);
    offset += s.bytes;
  }
  return offset;
}

// An op that may overwrite its input (ReLU after a BatchNorm, a convolution or an add) writes its
// output into its input's buffer when nothing else needs the input's values: the op is its only
// consumer, its producer's backward does not read it, and it is not a loss the caller reads. The
// activations then take one buffer where they took two, and the op writes where its input was
// just written (docs/design.md, "In-place activations").
void Net::plan_in_place() {
  auto is_loss = [&](size_t id) {
    auto among = [&](const std::vector<Value>& vs) {
      return std::any_of(vs.begin(), vs.end(),
                         [&](Value v) { return v.id == static_cast<int32_t>(id); });
    };
    return among(losses_) || among(grad_outputs_);
  };
  for (const auto& node : nodes_) {
    if (!node->may_overwrite_input()) continue;
    const size_t in = static_cast<size_t>(node->inputs[0].id);
    const ValueInfo& x = values_[in];
    if (x.shared || x.integer || x.per_model_input || x.producer < 0 || x.consumers != 1 ||
        is_loss(in) || nodes_[static_cast<size_t>(x.producer)]->backward_reads_output())
      continue;
    ValueInfo& y = values_[static_cast<size_t>(node->output.id)];
    y.storage = x.storage >= 0 ? x.storage : static_cast<int32_t>(in);
  }
}

// An activation run in place over a BatchNorm's output (2d or 1d), its only reader, is taken over
// by the BatchNorm (fused_ops/batchnorm2d.h, batchnorm1d.h): the BatchNorm writes the activation's
// output (into the one buffer the two share) and takes its output gradient, the value between them
// has no gradient of its own, and the activation node does nothing. That saves the activation's
// passes over memory (docs/design.md, "Activations fused into BatchNorm"). CPU nets only: the CUDA
// kernels take no activation.
void Net::fuse_norm_activations() {
  if (!spec_.fuse_activations || spec_.device != Device::kCpu) return;
  for (auto& node : nodes_) {
    const std::optional<ActivationParams> activation = node->fusable_activation();
    if (!activation) continue;
    const auto in = static_cast<size_t>(node->inputs[0].id);
    ValueInfo& x = values_[in];
    ValueInfo& y = values_[static_cast<size_t>(node->output.id)];
    const int32_t x_storage = x.storage >= 0 ? x.storage : static_cast<int32_t>(in);
    if (x.producer < 0 || x.consumers != 1 || y.storage != x_storage) continue;
    Node& producer = *nodes_[static_cast<size_t>(x.producer)];
    if (!producer.absorb_activation(*activation)) continue;
    producer.output = node->output;
    y.producer = x.producer;
    x.consumers = 0;
    x.last_consumer = -1;
    node->absorbed_by_producer();
  }
}

void Net::finalize() {
  HFTA_CHECK(!finalized_, "finalize() called twice");
  HFTA_CHECK(!nodes_.empty(), "the net has no ops");
  HFTA_CHECK(!losses_.empty() || !grad_outputs_.empty(), "the net has no loss");
  const int64_t B = spec_.B, cap = spec_.capacity;
  plan_in_place();
  fuse_norm_activations();

  // Parameters and gradients: same order, same offsets.
  size_t param_bytes = 0, buffer_bytes = 0, act_bytes = 0;
  for (const Shape& s : param_shapes_)
    param_bytes += Arena::align_up(static_cast<size_t>(with_models(B, s).numel()) * sizeof(float));
  for (const Shape& s : buffer_shapes_)
    buffer_bytes += Arena::align_up(static_cast<size_t>(with_models(B, s).numel()) * sizeof(float));
  size_t largest = 0;
  for (size_t id = 0; id < values_.size(); ++id) {
    const ValueInfo& vi = values_[id];
    if (vi.shared) continue;
    const size_t bytes = Arena::align_up(
        static_cast<size_t>(batch_shape({static_cast<int32_t>(id)}, cap).numel()) * sizeof(float));
    if (!vi.per_model_input && vi.storage < 0) act_bytes += bytes;
    largest = std::max(largest, bytes);
  }
  for (const Shape& s : saved_shapes_)
    act_bytes += Arena::align_up(static_cast<size_t>(s.numel()) * sizeof(float));
  act_bytes += largest;  // scratch
  const size_t grad_bytes = plan_gradient_memory();

  HFTA_CHECK(!(spec_.state_only && spec_.external_state),
             "a net cannot both hold only state and have none");
  if (spec_.external_state) param_bytes = buffer_bytes = 0;
  if (spec_.state_only) act_bytes = 0;
  const size_t act_grad_bytes = spec_.state_only ? 0 : grad_bytes;
  // All five at once, before any is zeroed: one message with the whole need and its parts. (A
  // device's memory is checked by its allocation, which says what the device has free.)
  if (spec_.device == Device::kCpu)
    check_memory_available(
        2 * param_bytes + buffer_bytes + act_bytes + act_grad_bytes,
        fmt::format("the arenas of {} model{} (activations {} MiB, activation gradients {} MiB, "
                    "parameters and their gradients {} MiB)",
                    B, B == 1 ? "" : "s", act_bytes >> 20, act_grad_bytes >> 20,
                    (2 * param_bytes + buffer_bytes) >> 20),
        "train fewer models at once (--B), use a smaller --batch-size, or a plan that holds fewer "
        "models' activations at a time (--plan chunk:C or threads:1)");
  const Device device = spec_.device;
  param_arena_ = Arena(std::max<size_t>(param_bytes, 64), "parameters", device);
  grad_arena_ = Arena(std::max<size_t>(param_bytes, 64), "gradients", device);
  buffer_arena_ = Arena(std::max<size_t>(buffer_bytes, 64), "buffers", device);
  act_arena_ = Arena(std::max<size_t>(act_bytes, 64), "activations", device);
  act_grad_arena_ = Arena(std::max<size_t>(act_grad_bytes, 64), "activation gradients", device);
  if (!spec_.external_state) {
    for (size_t i = 0; i < params_.size(); ++i) {
      const Shape s = with_models(B, param_shapes_[i]);
      params_[i].value = param_arena_.carve(s);
      params_[i].grad = grad_arena_.carve(s);
    }
    for (size_t i = 0; i < buffers_.size(); ++i)
      buffers_[i].value = buffer_arena_.carve(with_models(B, buffer_shapes_[i]));
  }
  if (spec_.state_only) {
    forward_ms_.assign(nodes_.size(), 0.0);
    backward_ms_.assign(nodes_.size(), 0.0);
    finalized_ = true;
    initialize();
    return;
  }
  for (size_t id = 0; id < values_.size(); ++id) {
    ValueInfo& vi = values_[id];
    if (vi.shared) continue;
    if (vi.storage >= 0)  // in place: its storage comes first in recording order
      vi.data = values_[static_cast<size_t>(vi.storage)].data;
    else if (!vi.per_model_input)
      vi.data = act_arena_.carve(batch_shape({static_cast<int32_t>(id)}, cap)).data;
    if (vi.grad_offset >= 0)
      vi.grad_data = reinterpret_cast<float*>(act_grad_arena_.data() + vi.grad_offset);
  }
  for (const Shape& s : saved_shapes_) saved_.push_back(act_arena_.carve(s));
  scratch_ = act_arena_.carve(Shape{static_cast<int64_t>(largest / sizeof(float))});
  for (int64_t b = 0; b < B; ++b)
    dropout_streams_.push_back(RngStream::for_model(spec_.seed, spec_.model_ids[b], kRngDropout));
  forward_ms_.assign(nodes_.size(), 0.0);
  backward_ms_.assign(nodes_.size(), 0.0);
  finalized_ = true;
  if (!spec_.external_state) initialize();
}

void Net::bind_state(const Net& owner, int64_t first) {
  HFTA_CHECK(finalized_ && spec_.external_state,
             "bind_state() needs a finalized external_state net");
  HFTA_CHECK(owner.finalized_ && !owner.spec_.external_state,
             "bind_state(): the owner holds no state");
  HFTA_CHECK(first >= 0 && first + spec_.B <= owner.spec_.B,
             "bind_state(): models [{}, {}) are not in an array of {}", first, first + spec_.B,
             owner.spec_.B);
  HFTA_CHECK(owner.params_.size() == params_.size() && owner.buffers_.size() == buffers_.size(),
             "bind_state(): the owner was recorded from other model code");
  HFTA_CHECK(owner.spec_.device == spec_.device, "bind_state(): the owner is on another device");
  auto slice = [&](const TensorView& whole, const Shape& per_model) {
    return TensorView(whole.data + first * per_model.numel(), with_models(spec_.B, per_model),
                      whole.device);
  };
  for (size_t i = 0; i < params_.size(); ++i) {
    HFTA_CHECK(
        owner.params_[i].name == params_[i].name && owner.param_shapes_[i] == param_shapes_[i],
        "bind_state(): parameter {} is {} {} in the owner", params_[i].name, owner.params_[i].name,
        owner.param_shapes_[i].str());
    params_[i].value = slice(owner.params_[i].value, param_shapes_[i]);
    params_[i].grad = slice(owner.params_[i].grad, param_shapes_[i]);
  }
  for (size_t i = 0; i < buffers_.size(); ++i)
    buffers_[i].value = slice(owner.buffers_[i].value, buffer_shapes_[i]);
  for (int64_t b = 0; b < spec_.B; ++b) {
    spec_.model_ids[static_cast<size_t>(b)] = owner.spec_.model_ids[static_cast<size_t>(first + b)];
    forward_origins_[static_cast<size_t>(b)] =
        owner.forward_origins_[static_cast<size_t>(first + b)];
  }
}

namespace {
// `v` (carved from `arena`) at the same offset of `copy`.
TensorView at_same_offset(const TensorView& v, const Arena& arena, const Arena& copy) {
  const std::ptrdiff_t offset = reinterpret_cast<const std::byte*>(v.data) - arena.data();
  return TensorView(reinterpret_cast<float*>(copy.data() + offset), v.shape, copy.device());
}
}  // namespace

Net::HostState Net::host_state(bool read) const {
  HostState s;
  const bool on_host = spec_.device == Device::kCpu;
  if (!on_host) {
    s.params = Arena(param_arena_.capacity(), "parameters (host copy)");
    s.buffers = Arena(buffer_arena_.capacity(), "buffers (host copy)");
    if (read) {
      s.params.copy_from(param_arena_);
      s.buffers.copy_from(buffer_arena_);
    }
  }
  for (const Param& p : params_)
    s.param_values.push_back(on_host ? p.value : at_same_offset(p.value, param_arena_, s.params));
  for (const ModelBuffer& b : buffers_)
    s.buffer_values.push_back(on_host ? b.value
                                      : at_same_offset(b.value, buffer_arena_, s.buffers));
  return s;
}

void Net::write_host_state(const HostState& state) {
  if (spec_.device == Device::kCpu) return;  // written in place
  param_arena_.copy_from(state.params);
  buffer_arena_.copy_from(state.buffers);
}

// Models side by side, one per thread: each draws from its own stream into its own slices, so the
// values do not depend on the threads (a ResNet-18's 11M normal draws took a second per model).
// A device net draws on the host too, into host copies of its arenas: the same values on every
// device.
void Net::initialize() {
  const HostState state = host_state(/*read=*/false);
  parallel_for(spec_.B, [&](int64_t b) { initialize_model(b, state); });
  write_host_state(state);
}

void Net::initialize_model(int64_t b, const HostState& state) {
  // Model b's stream walks the parameters in recording order, its slice of each in memory order.
  {
    RngStream rng = RngStream::for_model(spec_.seed, spec_.model_ids[b], kRngInit);
    for (size_t i = 0; i < params_.size(); ++i) {
      const Param& p = params_[i];
      TensorView slice = state.param_values[i].replica(b);
      switch (p.init.rule) {
        case InitRule::kUniformFanIn: {
          const float bound = 1.0f / std::sqrt(static_cast<float>(p.fan_in));
          for (int64_t i = 0; i < slice.numel(); ++i) slice[i] = rng.uniform(-bound, bound);
          break;
        }
        case InitRule::kKaimingNormalFanOut: {
          const float stddev = std::sqrt(2.0f / static_cast<float>(p.fan_out));
          for (int64_t i = 0; i < slice.numel(); ++i) slice[i] = stddev * rng.normal();
          break;
        }
        case InitRule::kNormal:
          for (int64_t i = 0; i < slice.numel(); ++i)
            slice[i] = p.init.mean + p.init.value * rng.normal();
          break;
        case InitRule::kConstant:
          std::fill(slice.data, slice.data + slice.numel(), p.init.value);
          break;
        case InitRule::kUniform:
          for (int64_t i = 0; i < slice.numel(); ++i)
            slice[i] = rng.uniform(-p.init.value, p.init.value);
          break;
        case InitRule::kXavierUniform: {
          const float bound = std::sqrt(6.0f / static_cast<float>(p.fan_in + p.fan_out));
          for (int64_t i = 0; i < slice.numel(); ++i) slice[i] = rng.uniform(-bound, bound);
          break;
        }
      }
    }
  }
  for (size_t i = 0; i < buffers_.size(); ++i) {
    TensorView slice = state.buffer_values[i].replica(b);
    std::fill(slice.data, slice.data + slice.numel(), buffers_[i].initial);
  }
}

}  // namespace hfta
