#include "workflows/gan_checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"

namespace hfta {

namespace {

// The float offset of a parameter inside its net's arena (Adam's state mirrors the arena).
int64_t arena_offset(const Net& net, const Param& p) {
  return p.value.data - reinterpret_cast<const float*>(net.param_arena().data());
}

// Visits every tensor of the checkpoint in order: f(name, shape, live data).
template <typename F>
void for_each_tensor(const Net& g, const Net& d, const FusedAdam& og, const FusedAdam& od, F f) {
  auto params = [&](const Net& net, const char* prefix) {
    for (size_t i = 0; i < net.params().size(); ++i)
      f(fmt::format("{}.{}.{}", prefix, i, net.params()[i].name), net.params()[i].value.shape,
        net.params()[i].value.data);
    for (const ModelBuffer& b : net.buffers())
      f(fmt::format("{}.{}", prefix, b.name), b.value.shape, b.value.data);
  };
  params(g, "g");
  params(d, "d");
  auto states = [&](const Net& net, const FusedAdam& opt, const char* prefix) {
    for (int s = 0; s < opt.num_state_buffers(); ++s)
      for (size_t i = 0; i < net.params().size(); ++i) {
        const Param& p = net.params()[i];
        f(fmt::format("{}.{}.{}#state{}", prefix, i, p.name, s), p.value.shape,
          const_cast<float*>(opt.state_buffer(s)) + arena_offset(net, p));
      }
  };
  states(g, og, "g");
  states(d, od, "d");
}

constexpr const char* kDSteps = "d#steps";

DcganArch arch_of(const Checkpoint& c) {
  HFTA_CHECK(c.model == "dcgan" && c.sample_shape.size() == 3,
             "the checkpoint holds {} models, not dcgan", c.model);
  return {.nc = c.sample_shape[0], .image = c.sample_shape[1]};
}

}  // namespace

void fill_gan_checkpoint(Checkpoint& c, const GanArray& gan, const HyperValues& hyper,
                         const ArrayProgress& p, int64_t batch_size, bool values) {
  const GanSpec& spec = gan.spec();
  c.model = "dcgan";
  c.sample_shape = {spec.arch.nc, spec.arch.image, spec.arch.image};
  c.num_classes = 0;
  c.dropout = -1.0;
  c.no_decay_norm_bias = false;
  c.B = spec.B;
  c.seed = spec.seed;
  c.batch_size = batch_size;
  c.model_ids = spec.model_ids;
  c.optimizer = "adam";
  c.hyper = hyper_record(hyper);
  c.epoch = p.epochs_done;
  c.batch_in_epoch = p.batch_in_epoch;
  c.step = p.step;
  c.epoch_loss_sum = p.epoch_loss;
  c.last_train_loss = p.last_train_loss;
  const auto g_steps = gan.g_optimizer().steps();
  c.optimizer_steps.assign(g_steps.begin(), g_steps.end());
  c.skipped_steps.assign(static_cast<size_t>(spec.B), 0);

  size_t next = 0;
  auto put = [&](const std::string& name, const Shape& shape, const float* first) {
    if (next == c.tensors.size()) c.tensors.emplace_back();
    CheckpointTensor& t = c.tensors[next++];
    if (t.name != name) t.name = name;
    t.shape = shape;
    t.values.resize(static_cast<size_t>(shape.numel()));  // same size: no reallocation
    if (values) std::copy(first, first + shape.numel(), t.values.data());
  };
  for_each_tensor(gan.generator(), gan.discriminator(), gan.g_optimizer(), gan.d_optimizer(),
                  [&](const std::string& name, const Shape& shape, const float* data) {
                    put(name, shape, data);
                  });
  std::vector<float> d_steps;
  for (int64_t s : gan.d_optimizer().steps()) d_steps.push_back(static_cast<float>(s));
  put(kDSteps, Shape{spec.B, 1}, d_steps.data());
  c.tensors.resize(next);
}

ArrayProgress restore_gan_checkpoint(const Checkpoint& c, GanArray& gan) {
  HFTA_CHECK(c.model == "dcgan" && c.B == gan.B(),
             "the checkpoint holds {} {} models, the run builds {} dcgan models", c.B, c.model,
             gan.B());
  size_t next = 0;
  for_each_tensor(gan.generator(), gan.discriminator(), gan.g_optimizer(), gan.d_optimizer(),
                  [&](const std::string& name, const Shape& shape, const float* data) {
                    HFTA_CHECK(next < c.tensors.size(), "the checkpoint has {} tensors, too few",
                               c.tensors.size());
                    const CheckpointTensor& t = c.tensors[next++];
                    HFTA_CHECK(t.name == name && t.shape == shape,
                               "checkpoint tensor {} {} does not match the run's {} {}", t.name,
                               t.shape.str(), name, shape.str());
                    std::copy(t.values.begin(), t.values.end(), const_cast<float*>(data));
                  });
  HFTA_CHECK(next < c.tensors.size() && c.tensors[next].name == kDSteps,
             "the checkpoint lacks {}, the discriminator's step counts", kDSteps);
  std::vector<int64_t> d_steps;
  for (float s : c.tensors[next].values) d_steps.push_back(static_cast<int64_t>(s));
  gan.g_optimizer().set_steps(c.optimizer_steps);
  gan.d_optimizer().set_steps(d_steps);
  gan.set_steps(c.step);
  return {.step = c.step,
          .epochs_done = c.epoch,
          .batch_in_epoch = c.batch_in_epoch,
          .epoch_loss = c.epoch_loss_sum,
          .last_train_loss = c.last_train_loss,
          .skipped = c.skipped_steps};
}

void check_gan_resumable(const Checkpoint& c, const GanSpec& spec, const HyperValues& hyper,
                         int64_t epochs, const std::string& path) {
  auto differs = [&](const std::string& what, const std::string& was, const std::string& is) {
    fail(
        "cannot resume from {}: it was trained with {} {}, this command gives {}; resume with "
        "the same flags or choose another --out",
        path, what, was, is);
  };
  if (c.model != "dcgan") differs("--model", c.model, "dcgan");
  const std::vector<int64_t> sample = {spec.arch.nc, spec.arch.image, spec.arch.image};
  if (c.sample_shape != sample)
    differs("--dataset / --image-size", fmt::format("images [{}]", fmt::join(c.sample_shape, ", ")),
            fmt::format("[{}]", fmt::join(sample, ", ")));
  if (c.seed != spec.seed) differs("--seed", std::to_string(c.seed), std::to_string(spec.seed));
  if (c.batch_size != spec.batch)
    differs("--batch-size", std::to_string(c.batch_size), std::to_string(spec.batch));
  if (c.model_ids != spec.model_ids)
    differs("models", fmt::format("{}", fmt::join(c.model_ids, ",")),
            fmt::format("{}", fmt::join(spec.model_ids, ",")));
  for (const auto& [name, values] : hyper) {
    const std::vector<double> is(values.begin(), values.end());
    auto was = c.hyper.find(name);
    if (was == c.hyper.end() || was->second != is) {
      std::string flag = "--" + name;
      std::replace(flag.begin(), flag.end(), '_', '-');
      const std::vector<float> was_floats =
          was == c.hyper.end() ? std::vector<float>{}
                               : std::vector<float>(was->second.begin(), was->second.end());
      differs(flag,
              was == c.hyper.end() ? "nothing" : fmt::format("{}", fmt::join(was_floats, ",")),
              fmt::format("{}", fmt::join(values, ",")));
    }
  }
  if (c.epoch > epochs) differs("--epochs", std::to_string(c.epoch), std::to_string(epochs));
}

std::unique_ptr<Net> dcgan_net_from_checkpoint(const Checkpoint& c, DcganNet which) {
  const DcganArch arch = arch_of(c);
  HFTA_CHECK(c.B == 1, "dcgan_net_from_checkpoint needs one model, got {}", c.B);
  auto net = std::make_unique<Net>(NetSpec{.B = 1, .capacity = 2, .seed = c.seed});
  if (which == DcganNet::kGenerator) {
    net->add_output_grad(dcgan_generator(*net, net->model_input({arch.nz, 1, 1}), arch));
  } else {
    net->bce_with_logits(
        dcgan_discriminator(*net, net->input({arch.nc, arch.image, arch.image}), arch), 1.0f);
  }
  net->finalize();
  const std::string prefix = which == DcganNet::kGenerator ? "g." : "d.";
  auto find = [&](const std::string& name, const Shape& shape) -> const CheckpointTensor& {
    auto it = std::find_if(c.tensors.begin(), c.tensors.end(),
                           [&](const CheckpointTensor& t) { return t.name == name; });
    HFTA_CHECK(it != c.tensors.end(), "the checkpoint has no tensor {}", name);
    HFTA_CHECK(it->shape == shape, "checkpoint tensor {} is {}, the network's is {}", name,
               it->shape.str(), shape.str());
    return *it;
  };
  for (size_t i = 0; i < net->params().size(); ++i) {
    const Param& p = net->params()[i];
    const CheckpointTensor& t = find(fmt::format("{}{}.{}", prefix, i, p.name), p.value.shape);
    std::copy(t.values.begin(), t.values.end(), p.value.data);
  }
  for (const ModelBuffer& b : net->buffers()) {
    const CheckpointTensor& t = find(prefix + b.name, b.value.shape);
    std::copy(t.values.begin(), t.values.end(), b.value.data);
  }
  return net;
}

}  // namespace hfta
