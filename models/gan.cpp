#include "models/gan.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "core/parallel.h"
#include "core/rng.h"

namespace hfta {

namespace {

constexpr int64_t kSampleRows = 64;  // the example's fixed noise: an 8x8 grid

std::unique_ptr<FusedAdam> adam_over(const Net& net, const AdamHyper& hyper) {
  std::vector<TensorView> views;
  for (const Param& p : net.params()) views.push_back(p.value);
  return std::make_unique<FusedAdam>(ParamTable::from_arena(net.param_arena(), views), hyper);
}

}  // namespace

// One group's nets: G and D on the real batch (the state's own nets under the fused plan, else
// nets bound to the group's slices of it), and D twice more on the fakes (always bound).
struct GanArray::Pass {
  std::unique_ptr<Net> own_g, own_d_real, d_fake, d_gen;
  Net* g = nullptr;
  Net* d_real = nullptr;
  Value z, fake, real_in, fake_in, gen_in, loss_real, loss_fake, loss_gen;
  int ms_real = -1, ms_fake = -1, ms_gen = -1;
  std::vector<float> noise;  // [batch, count*nz]
};

namespace {

NetSpec gan_net_spec(const GanSpec& s, DcganNet which, int64_t first, int64_t count,
                     int64_t capacity, bool external, bool state_only = false) {
  return NetSpec{.B = count,
                 .capacity = capacity,
                 .seed = dcgan_seed(s.seed, which),
                 .model_ids = std::vector<int64_t>(s.model_ids.begin() + first,
                                                   s.model_ids.begin() + first + count),
                 .state_only = state_only,
                 .external_state = external,
                 .device = s.device};
}

// G recorded on `n`: per-model noise in, images out (their gradient written by the caller).
std::pair<Value, Value> record_generator(Net& n, const DcganArch& a) {
  const Value z = n.model_input(Shape{a.nz, 1, 1});
  const Value fake = dcgan_generator(n, z, a);
  n.add_output_grad(fake);
  n.finalize();
  return {z, fake};
}

// D recorded on `d`: the shared real rows or per-model images in, BCE-with-logits against
// `target` out (with its saved mean D output).
struct RecordedD {
  Value in, loss;
  int ms = -1;
};
RecordedD record_discriminator(Net& d, const DcganArch& a, bool per_model, bool needs_grad,
                               float target) {
  const Shape image{a.nc, a.image, a.image};
  RecordedD r;
  r.in = per_model ? d.model_input(image, needs_grad) : d.input(image);
  r.loss = d.bce_with_logits(dcgan_discriminator(d, r.in, a), target, &r.ms);
  d.finalize();
  return r;
}

}  // namespace

GanArray::GanArray(GanSpec spec) : spec_(std::move(spec)) {
  spec_.arch.check();
  HFTA_CHECK(spec_.B >= 1, "the array needs at least one model, got B = {}", spec_.B);
  HFTA_CHECK(spec_.batch >= 2,
             "DCGAN needs a batch of at least 2 rows (BatchNorm statistics), got {}", spec_.batch);
  if (spec_.model_ids.empty())
    for (int64_t b = 0; b < spec_.B; ++b) spec_.model_ids.push_back(b);
  HFTA_CHECK(static_cast<int64_t>(spec_.model_ids.size()) == spec_.B,
             "{} model ids for an array of {} models", spec_.model_ids.size(), spec_.B);
  require_one_step_per_visit(spec_.plan, "DCGAN");
  layout_ = lay_out(spec_.plan, spec_.B, spec_.threads > 0 ? spec_.threads : num_threads());
  const bool fused = layout_.is_fused();
  if (fused) spec_.plan = ExecutionPlan::fused();
  // The other plans split the models over CPU threads; a device runs them in one call per op.
  HFTA_CHECK(spec_.device == Device::kCpu || fused,
             "a DCGAN array on --device {} runs plan fused (one call per op for all models), got "
             "plan {}",
             device_flag_name(spec_.device), spec_.plan.str());
  const DcganArch& a = spec_.arch;

  // The state: under the fused plan these nets also run the step (pass 0).
  g_ = std::make_unique<Net>(
      gan_net_spec(spec_, DcganNet::kGenerator, 0, spec_.B, spec_.batch, false, !fused));
  const auto [g_z, g_fake] = record_generator(*g_, a);
  d_real_ = std::make_unique<Net>(
      gan_net_spec(spec_, DcganNet::kDiscriminator, 0, spec_.B, spec_.batch, false, !fused));
  const RecordedD d = record_discriminator(*d_real_, a, false, false, 1.0f);

  g_sample_ = std::make_unique<Net>(
      gan_net_spec(spec_, DcganNet::kGenerator, 0, spec_.B, kSampleRows, true));
  std::tie(sample_z_, sample_out_) = record_generator(*g_sample_, a);  // never runs backward
  g_sample_->bind_state(*g_, 0);

  if (fused) {
    auto p = make_pass(0, spec_.B);
    p->z = g_z, p->fake = g_fake, p->real_in = d.in, p->loss_real = d.loss, p->ms_real = d.ms;
    passes_.push_back(std::move(p));
    pass_of_group_.push_back(0);
  } else {
    std::vector<std::pair<int64_t, int>> made;  // (count, worker) of each pass
    for (const PlanGroup& group : layout_.groups) {
      // As Model's runners: one pass per group size and worker, rebound to each of its groups.
      auto it = std::find(made.begin(), made.end(), std::make_pair(group.count, group.worker));
      if (it == made.end()) {
        made.emplace_back(group.count, group.worker);
        passes_.push_back(make_pass(group.first, group.count));
        it = made.end() - 1;
      }
      pass_of_group_.push_back(static_cast<size_t>(it - made.begin()));
    }
  }

  opt_g_ = adam_over(*g_, spec_.g_adam);
  opt_d_ = adam_over(*d_real_, spec_.d_adam);

  fixed_noise_.resize(static_cast<size_t>(kSampleRows * spec_.B * a.nz));
  const TensorView fixed(fixed_noise_.data(), Shape{kSampleRows, spec_.B * a.nz, 1, 1});
  draw_noise(fixed, spec_.seed, kRngGanFixedNoise);
  if (spec_.device != Device::kCpu) {
    // Where the host's batches and noise go: one upload a step for every model.
    const Shape real{spec_.batch * a.nc * a.image * a.image}, noise{spec_.batch * spec_.B * a.nz};
    Arena counting(spec_.device);
    for (const Shape& s : {real, noise, fixed.shape}) counting.carve(s);
    device_inputs_ = Arena(counting.used(), "the DCGAN's inputs", spec_.device);
    device_real_ = device_inputs_.carve(real);
    device_noise_ = device_inputs_.carve(noise);
    device_fixed_noise_ = device_inputs_.carve(fixed.shape);
    copy_view(fixed, device_fixed_noise_, "the fixed noise's copy to the device");
    real_upload_ = StagedUpload(spec_.device, static_cast<size_t>(real.numel()) * sizeof(float),
                                "the real batch's upload to the device");
    noise_upload_ = StagedUpload(spec_.device, static_cast<size_t>(noise.numel()) * sizeof(float),
                                 "the noise's upload to the device");
  }
}

std::unique_ptr<GanArray::Pass> GanArray::make_pass(int64_t first, int64_t count) {
  const DcganArch& a = spec_.arch;
  auto p = std::make_unique<Pass>();
  if (layout_.is_fused()) {
    p->g = g_.get(), p->d_real = d_real_.get();
  } else {
    p->own_g = std::make_unique<Net>(
        gan_net_spec(spec_, DcganNet::kGenerator, first, count, spec_.batch, true));
    std::tie(p->z, p->fake) = record_generator(*p->own_g, a);
    p->own_d_real = std::make_unique<Net>(
        gan_net_spec(spec_, DcganNet::kDiscriminator, first, count, spec_.batch, true));
    const RecordedD d = record_discriminator(*p->own_d_real, a, false, false, 1.0f);
    p->real_in = d.in, p->loss_real = d.loss, p->ms_real = d.ms;
    p->g = p->own_g.get(), p->d_real = p->own_d_real.get();
  }
  auto bound_d = [&](Value& in, bool needs_grad, float target, Value& loss, int& ms) {
    auto d = std::make_unique<Net>(
        gan_net_spec(spec_, DcganNet::kDiscriminator, first, count, spec_.batch, true));
    const RecordedD r = record_discriminator(*d, a, true, needs_grad, target);
    in = r.in, loss = r.loss, ms = r.ms;
    d->bind_state(*d_real_, first);
    return d;
  };
  p->d_fake = bound_d(p->fake_in, false, 0.0f, p->loss_fake, p->ms_fake);  // fake.detach()
  p->d_gen = bound_d(p->gen_in, true, 1.0f, p->loss_gen, p->ms_gen);  // its input gradient -> G
  p->noise.resize(static_cast<size_t>(spec_.batch * count * a.nz));
  return p;
}

GanArray::~GanArray() = default;

void GanArray::draw_noise(TensorView z, uint64_t seed, uint64_t purpose, int64_t first) const {
  const int64_t rows = z.shape[0], nz = spec_.arch.nz, n = z.shape[1] / nz;
  for (int64_t b = 0; b < n; ++b) {
    // Model b's noise is its own stream, row by row: the same numbers as model b alone.
    RngStream rng =
        RngStream::for_model(seed, spec_.model_ids[static_cast<size_t>(first + b)], purpose);
    for (int64_t r = 0; r < rows; ++r) {
      float* row = z.data + (r * n + b) * nz;
      for (int64_t k = 0; k < nz; ++k) row[k] = rng.normal();
    }
  }
}

size_t GanArray::arena_bytes() const {
  size_t bytes = g_->arena_bytes() + d_real_->arena_bytes() + g_sample_->arena_bytes();
  for (const auto& p : passes_) {
    for (const Net* n : {p->own_g.get(), p->own_d_real.get(), p->d_fake.get(), p->d_gen.get()})
      if (n != nullptr) bytes += n->arena_bytes();
  }
  return bytes;
}

double GanArray::train_flops_per_row() const {
  // The passes' nets run the step (a state-only net records no activations to count).
  const Pass& p = *passes_.front();
  return 3.0 * p.d_real->train_flops_per_sample() + p.g->train_flops_per_sample();
}

bool GanArray::profiling() const { return passes_.front()->g->profiling(); }

void GanArray::reset_profile() {
  for (auto& p : passes_)
    for (Net* n : {p->g, p->d_real, p->d_fake.get(), p->d_gen.get()}) n->reset_profile();
}

std::string GanArray::profile_report() const {
  return fmt::format(
      "dcgan generator {}\ndcgan discriminator on the real batch {}\ndcgan discriminator on the "
      "fakes, D's step {}\ndcgan discriminator on the fakes, G's step {}",
      passes_.front()->g->profile_report(), passes_.front()->d_real->profile_report(),
      passes_.front()->d_fake->profile_report(), passes_.front()->d_gen->profile_report());
}

GanStepStats GanArray::step(const TensorView& real, const TensorView* noise) {
  const int64_t n = real.shape.rank() > 0 ? real.shape[0] : 0;
  HFTA_CHECK(n >= 2 && n <= spec_.batch, "a GAN step needs 2 to {} real rows, got {}", spec_.batch,
             n);
  if (noise != nullptr) check_shape(*noise, Shape{n, spec_.B * spec_.arch.nz, 1, 1}, "noise");
  GanStepStats stats;
  for (auto* v : {&stats.loss_d, &stats.loss_g, &stats.d_x, &stats.d_g_z1, &stats.d_g_z2})
    v->assign(static_cast<size_t>(spec_.B), 0.0f);
  const bool fused = layout_.is_fused();
  TensorView real_in = real;
  if (spec_.device != Device::kCpu) {
    HFTA_CHECK(real.device == Device::kCpu, "a GAN step reads its real batch from host memory");
    real_in = device_real_.leading(real.shape);
    real_upload_.upload(real, real_in);
  }
  run_plan_groups(layout_, [&](size_t g) {
    const PlanGroup& group = layout_.groups[g];
    Pass& p = *passes_[pass_of_group_[g]];
    if (!fused) {
      p.g->bind_state(*g_, group.first);
      for (Net* d : {p.d_real, p.d_fake.get(), p.d_gen.get()}) d->bind_state(*d_real_, group.first);
    }
    run_pass(p, group, real_in, noise, stats);
  });
  if (!fused) {
    opt_d_->finish_model_steps();
    opt_g_->finish_model_steps();
  }
  ++steps_;
  return stats;
}

// PyTorch's example's step for the group's models. Under the fused plan the updates are whole
// optimizer steps; otherwise each group updates its own models (Optimizer::step_models).
void GanArray::run_pass(Pass& p, const PlanGroup& group, const TensorView& real,
                        const TensorView* noise, GanStepStats& stats) {
  const int64_t n = real.shape[0], nz = spec_.arch.nz, first = group.first, count = group.count;
  const bool fused = layout_.is_fused();
  auto update = [&](FusedAdam& opt, Net& state) {
    if (fused) {
      opt.step(state.param_arena(), state.grad_arena());
      return;
    }
    opt.step_models(reinterpret_cast<float*>(state.param_arena().data()),
                    reinterpret_cast<const float*>(state.grad_arena().data()), first, count);
  };
  // The group's B values of a per-model output (on the nets' device) into `out` on the host.
  auto put = [&](std::vector<float>& out, const TensorView& values) {
    copy_memory(out.data() + first, Device::kCpu, values.data, values.device,
                static_cast<size_t>(count) * sizeof(float));
  };

  // (1) D: maximize log D(x) + log(1 - D(G(z))).
  p.d_real->zero_grad();  // a bound net's gradients are its group's slices of the state's
  p.d_real->set_input(p.real_in, real);
  p.d_real->forward(true);
  p.d_real->backward();
  put(stats.d_x, p.d_real->saved(p.ms_real));

  TensorView z(p.noise.data(), Shape{n, count * nz, 1, 1});
  if (noise != nullptr) {
    for (int64_t r = 0; r < n; ++r)
      std::copy_n(noise->data + (r * spec_.B + first) * nz, count * nz, z.data + r * count * nz);
  } else {
    draw_noise(z, spec_.seed ^ static_cast<uint64_t>(steps_), kRngGanNoise, first);
  }
  if (spec_.device == Device::kCpu) {
    p.g->set_input(p.z, z);
  } else {
    const TensorView z_on_device = device_noise_.leading(z.shape);
    noise_upload_.upload(z, z_on_device);
    p.g->set_input(p.z, z_on_device);
  }
  p.g->forward(true);
  const TensorView fake = p.g->value(p.fake);
  p.d_fake->set_input(p.fake_in, fake);
  p.d_fake->forward(true);
  p.d_fake->backward();  // accumulates into D's gradients: errD_real + errD_fake
  put(stats.d_g_z1, p.d_fake->saved(p.ms_fake));
  std::vector<float> loss_real(static_cast<size_t>(spec_.B)), loss_fake(loss_real.size());
  put(loss_real, p.d_real->value(p.loss_real));
  put(loss_fake, p.d_fake->value(p.loss_fake));
  for (int64_t b = first; b < first + count; ++b)
    stats.loss_d[static_cast<size_t>(b)] =
        loss_real[static_cast<size_t>(b)] + loss_fake[static_cast<size_t>(b)];
  update(*opt_d_, *d_real_);

  // (2) G: maximize log D(G(z)) through the updated D. D's gradients from this pass are unused
  // (zeroed at the next D step), as in the example.
  p.g->zero_grad();
  p.d_gen->set_input(p.gen_in, fake);
  p.d_gen->forward(true);
  p.d_gen->backward();
  put(stats.d_g_z2, p.d_gen->saved(p.ms_gen));
  put(stats.loss_g, p.d_gen->value(p.loss_gen));
  copy_view(p.d_gen->grad(p.gen_in), p.g->grad(p.fake), "D's input gradient into G's output's");
  p.g->backward();
  update(*opt_g_, *g_);
}

TensorView GanArray::samples() {
  const TensorView fixed(fixed_noise_.data(), Shape{kSampleRows, spec_.B * spec_.arch.nz, 1, 1});
  g_sample_->set_input(sample_z_, spec_.device == Device::kCpu ? fixed : device_fixed_noise_);
  g_sample_->forward(true);
  const TensorView out = g_sample_->value(sample_out_);
  if (out.device == Device::kCpu) return out;
  host_samples_.resize(static_cast<size_t>(out.numel()));
  const TensorView host(host_samples_.data(), out.shape);
  copy_view(out, host, "the samples' copy to the host");
  return host;
}

}  // namespace hfta
