#include "tasks/gan/gan_checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/rng.h"
#include "datasets/loader.h"
#include "run/resume_check.h"

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
  // `first` in `device` memory (the nets' device, or the host); borrowed where `borrow`
  // (Checkpoint::borrow_tensors; not the step counts, made here).
  auto put = [&](const std::string& name, const Shape& shape, const float* first, Device device,
                 bool borrow) {
    if (next == c.tensors.size()) c.tensors.emplace_back();
    fill_tensor(c.tensors[next++], name, shape, first, device, values, borrow);
  };
  for_each_tensor(gan.generator(), gan.discriminator(), gan.g_optimizer(), gan.d_optimizer(),
                  [&](const std::string& name, const Shape& shape, const float* data) {
                    put(name, shape, data, spec.device, c.borrow_tensors);
                  });
  std::vector<float> d_steps;
  for (int64_t s : gan.d_optimizer().steps()) d_steps.push_back(static_cast<float>(s));
  put(kDSteps, Shape{spec.B, 1}, d_steps.data(), Device::kCpu, false);
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
                    copy_memory(const_cast<float*>(data), gan.spec().device, t.values.data(),
                                Device::kCpu, t.values.size() * sizeof(float));
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
  const std::vector<int64_t> sample = {spec.arch.nc, spec.arch.image, spec.arch.image};
  const std::string was = fmt::format("images [{}]", fmt::join(c.sample_shape, ", "));
  check_resumable(
      c, path,
      {.model = "dcgan",
       .seed = spec.seed,
       .batch_size = spec.batch,
       .model_ids = spec.model_ids,
       .epochs = epochs,
       .settings = {{"--dataset / --image-size", was,
                     c.sample_shape == sample ? was
                                              : fmt::format("[{}]", fmt::join(sample, ", "))}},
       .hyper = {hyper.begin(), hyper.end()}});
}

namespace {

// One network of model 0 of a B = 1 checkpoint for `rows` rows: its recorded output (G's images,
// D's logits) and its input.
struct CheckpointNet {
  std::unique_ptr<Net> net;
  Value in, out;
};

CheckpointNet checkpoint_net(const Checkpoint& c, DcganNet which, int64_t rows) {
  const DcganArch arch = arch_of(c);
  HFTA_CHECK(c.B == 1, "a DCGAN network of a checkpoint needs one model, got {}", c.B);
  CheckpointNet r;
  r.net = std::make_unique<Net>(NetSpec{.B = 1, .capacity = rows, .seed = c.seed});
  Net& net = *r.net;
  if (which == DcganNet::kGenerator) {
    r.in = net.model_input({arch.nz, 1, 1});
    r.out = dcgan_generator(net, r.in, arch);
    net.add_output_grad(r.out);
  } else {
    r.in = net.input({arch.nc, arch.image, arch.image});
    r.out = dcgan_discriminator(net, r.in, arch);
    net.bce_with_logits(r.out, 1.0f);
  }
  net.finalize();
  const std::string prefix = which == DcganNet::kGenerator ? "g." : "d.";
  auto find = [&](const std::string& name, const Shape& shape) -> const CheckpointTensor& {
    auto it = std::find_if(c.tensors.begin(), c.tensors.end(),
                           [&](const CheckpointTensor& t) { return t.name == name; });
    HFTA_CHECK(it != c.tensors.end(), "the checkpoint has no tensor {}", name);
    HFTA_CHECK(it->shape == shape, "checkpoint tensor {} is {}, the network's is {}", name,
               it->shape.str(), shape.str());
    return *it;
  };
  for (size_t i = 0; i < net.params().size(); ++i) {
    const Param& p = net.params()[i];
    const CheckpointTensor& t = find(fmt::format("{}{}.{}", prefix, i, p.name), p.value.shape);
    std::copy(t.values.begin(), t.values.end(), p.value.data);
  }
  for (const ModelBuffer& b : net.buffers()) {
    const CheckpointTensor& t = find(prefix + b.name, b.value.shape);
    std::copy(t.values.begin(), t.values.end(), b.value.data);
  }
  return r;
}

// log(1 + e^x) without overflow.
double softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

std::unique_ptr<Net> dcgan_net_from_checkpoint(const Checkpoint& c, DcganNet which) {
  return checkpoint_net(c, which, 2).net;
}

GanEvaluation evaluate_gan_checkpoint(const Checkpoint& c, const Dataset& test, int64_t batch) {
  const DcganArch arch = arch_of(c);
  HFTA_CHECK(test.sample_shape == Shape({arch.nc, arch.image, arch.image}),
             "the test images are {}, the DCGAN's are [{}, {}, {}]", test.sample_shape.str(),
             arch.nc, arch.image, arch.image);
  const int64_t rows = std::max<int64_t>(2, std::min(batch, test.size));
  GanEvaluation e{.images = test.size};
  std::vector<float> noise(static_cast<size_t>(rows * arch.nz));
  for (int64_t b = 0; b < c.B; ++b) {
    const Checkpoint one = extract_model(c, b);
    CheckpointNet g = checkpoint_net(one, DcganNet::kGenerator, rows);
    CheckpointNet d = checkpoint_net(one, DcganNet::kDiscriminator, rows);
    RngStream rng =
        RngStream::for_model(c.seed, c.model_ids[static_cast<size_t>(b)], kRngGanEvalNoise);
    double loss_d = 0, loss_g = 0, d_x = 0, d_g_z = 0;
    // D's logits for `n` rows of `images`, in evaluation mode (BatchNorm's running statistics).
    auto logits = [&](const TensorView& images) {
      d.net->set_input(d.in, images);
      d.net->forward(false);
      return d.net->value(d.out);
    };
    Loader loader(test, {.batch_size = rows, .shuffle = false, .drop_last = false});
    Batch real = loader.make_batch();
    while (loader.next(real)) {
      const int64_t n = real.rows;
      const TensorView lr = logits(real.images());
      for (int64_t r = 0; r < n; ++r) {
        loss_d += softplus(-lr[r]);  // BCE(D(x), 1)
        d_x += sigmoid(lr[r]);
      }
      for (float& z : noise) z = rng.normal();
      g.net->set_input(g.in, TensorView(noise.data(), Shape{n, arch.nz, 1, 1}));
      g.net->forward(false);
      const TensorView lf = logits(g.net->value(g.out));
      for (int64_t r = 0; r < n; ++r) {
        loss_d += softplus(lf[r]);   // BCE(D(G(z)), 0)
        loss_g += softplus(-lf[r]);  // BCE(D(G(z)), 1)
        d_g_z += sigmoid(lf[r]);
      }
    }
    const double n = static_cast<double>(std::max<int64_t>(1, test.size));
    e.loss_d.push_back(loss_d / n);
    e.loss_g.push_back(loss_g / n);
    e.d_x.push_back(d_x / n);
    e.d_g_z.push_back(d_g_z / n);
  }
  return e;
}

}  // namespace hfta
