// The tensors of a live array in a checkpoint's layout (io/checkpoint.h): captured into one,
// restored from one, or hashed in place.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "core/device_memory.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "models/model.h"
#include "optim/optimizer.h"

namespace hfta {

namespace {

// The float offset of a parameter inside its arena (state buffers mirror the arena).
int64_t arena_offset(const Net& net, const Param& p) {
  return p.value.data - reinterpret_cast<const float*>(net.param_arena().data());
}

std::string state_name(const std::string& param, int i) {
  return fmt::format("{}#state{}", param, i);
}

// Parameter names are per layer ("weight", "bias"); the checkpoint numbers them in order.
std::vector<std::string> param_names(const Net& net) {
  std::vector<std::string> names;
  for (size_t i = 0; i < net.params().size(); ++i)
    names.push_back(fmt::format("{}.{}", i, net.params()[i].name));
  return names;
}

// Calls visit(name, shape, first) for every tensor a checkpoint of `model` holds, in its order:
// parameters, buffers, then each of the optimizer's state buffers per parameter. `first` is in
// the net's device memory.
template <typename Visit>
void for_each_state_tensor(const Net& model, const Optimizer* optimizer, Visit&& visit) {
  const auto names = param_names(model);
  for (size_t i = 0; i < model.params().size(); ++i)
    visit(names[i], model.params()[i].value.shape, model.params()[i].value.data);
  for (const ModelBuffer& b : model.buffers()) visit(b.name, b.value.shape, b.value.data);
  if (optimizer != nullptr) {
    for (int s = 0; s < optimizer->num_state_buffers(); ++s) {
      const float* base = optimizer->state_buffer(s);
      for (size_t i = 0; i < model.params().size(); ++i) {
        const Param& p = model.params()[i];
        visit(state_name(names[i], s), p.value.shape, base + arena_offset(model, p));
      }
    }
  }
}

}  // namespace

void fill_tensor(CheckpointTensor& t, const std::string& name, const Shape& shape,
                 const float* first, Device device, bool values, bool borrow) {
  if (t.name != name) t.name = name;
  t.shape = shape;
  if (borrow) {
    t.source = first;
    t.source_device = device;
    return;
  }
  t.source = nullptr;
  // Same size as last time: no reallocation, only the copy.
  t.values.resize(static_cast<size_t>(shape.numel()));
  // From a device: a copy back that waits for the step before it.
  if (values)
    copy_memory(t.values.data(), Device::kCpu, first, device, t.values.size() * sizeof(float));
}

void capture_tensors(const Net& model, const Optimizer* optimizer,
                     std::vector<CheckpointTensor>& out, bool values, bool borrow) {
  size_t next = 0;
  for_each_state_tensor(
      model, optimizer, [&](const std::string& name, const Shape& shape, const float* first) {
        if (next == out.size()) out.emplace_back();
        fill_tensor(out[next++], name, shape, first, model.device(), values, borrow);
      });
  out.resize(next);
}

void capture_tensors(const Model& model, const Optimizer* optimizer,
                     std::vector<CheckpointTensor>& out, bool values, bool borrow) {
  capture_tensors(model.net(), optimizer, out, values, borrow);
}

std::vector<CheckpointTensor> capture_tensors(const Model& model, const Optimizer* optimizer) {
  std::vector<CheckpointTensor> out;
  capture_tensors(model, optimizer, out);
  return out;
}

void restore_tensors(const Checkpoint& c, Model& model, Optimizer* optimizer) {
  HFTA_CHECK(c.model == model.name() && c.B == model.B(),
             "the checkpoint holds {} {} models, the run builds {} {} models", c.B, c.model,
             model.B(), model.name());
  restore_tensors(c, model.net(), optimizer);
}

void restore_tensors(const Checkpoint& c, Net& model, Optimizer* optimizer) {
  // Names and shapes to check against: borrowed, so nothing is allocated.
  std::vector<CheckpointTensor> live;
  capture_tensors(model, optimizer, live, /*values=*/false, /*borrow=*/true);
  const size_t P = model.params().size(), Q = model.buffers().size();
  const size_t wanted = optimizer ? live.size() : P + Q;
  HFTA_CHECK(c.tensors.size() >= wanted, "the checkpoint has {} tensors, the run needs {}{}",
             c.tensors.size(), wanted, optimizer ? " (is it from another optimizer?)" : "");
  for (size_t i = 0; i < wanted; ++i)
    HFTA_CHECK(c.tensors[i].name == live[i].name && c.tensors[i].shape == live[i].shape,
               "checkpoint tensor {} {} does not match the model's {} {}", c.tensors[i].name,
               c.tensors[i].shape.str(), live[i].name, live[i].shape.str());
  auto restore = [&](const std::vector<float>& values, float* to) {
    copy_memory(to, model.device(), values.data(), Device::kCpu, values.size() * sizeof(float));
  };
  for (size_t i = 0; i < P; ++i) restore(c.tensors[i].values, model.params()[i].value.data);
  for (size_t i = 0; i < Q; ++i) restore(c.tensors[P + i].values, model.buffers()[i].value.data);
  // Dropout masks depend on the count of training forwards: one per optimizer step.
  model.set_training_forwards(c.step);
  // A refilled slot counts its dropout draws from its origin; older files hold none (all zeros).
  model.set_forward_origins(c.forward_origins.empty()
                                ? std::vector<int64_t>(static_cast<size_t>(c.B), 0)
                                : c.forward_origins);
  if (optimizer == nullptr) return;
  for (int s = 0; s < optimizer->num_state_buffers(); ++s)
    for (size_t i = 0; i < P; ++i) {
      restore(c.tensors[P + Q + P * static_cast<size_t>(s) + i].values,
              optimizer->state_buffer(s) + arena_offset(model, model.params()[i]));
    }
  optimizer->set_steps(c.optimizer_steps);
}

}  // namespace hfta
