#include "models/gan.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "core/rng.h"

namespace hfta {

namespace {

constexpr int64_t kSampleRows = 64;  // the example's fixed noise: an 8x8 grid

std::unique_ptr<FusedAdam> adam_over(const Net& net, const AdamHyper& hyper) {
  std::vector<TensorView> views;
  for (const Param& p : net.params()) views.push_back(p.value);
  return std::make_unique<FusedAdam>(ParamTable::from_arena(net.param_arena(), views), hyper);
}

std::vector<float> to_vector(const TensorView& t) {
  return std::vector<float>(t.data, t.data + t.numel());
}

}  // namespace

GanArray::GanArray(GanSpec spec) : spec_(std::move(spec)) {
  spec_.arch.check();
  HFTA_CHECK(spec_.B >= 1, "the array needs at least one model, got B = {}", spec_.B);
  HFTA_CHECK(spec_.batch >= 2,
             "DCGAN needs a batch of at least 2 rows (BatchNorm statistics), got {}", spec_.batch);
  if (spec_.model_ids.empty())
    for (int64_t b = 0; b < spec_.B; ++b) spec_.model_ids.push_back(b);
  const DcganArch& a = spec_.arch;
  const Shape noise{a.nz, 1, 1}, image{a.nc, a.image, a.image};
  auto net_spec = [&](DcganNet which, int64_t capacity, bool external) {
    return NetSpec{.B = spec_.B,
                   .capacity = capacity,
                   .seed = dcgan_seed(spec_.seed, which),
                   .model_ids = spec_.model_ids,
                   .external_state = external};
  };

  g_ = std::make_unique<Net>(net_spec(DcganNet::kGenerator, spec_.batch, false));
  z_ = g_->model_input(noise);
  fake_ = dcgan_generator(*g_, z_, a);
  g_->add_output_grad(fake_);
  g_->finalize();

  g_sample_ = std::make_unique<Net>(net_spec(DcganNet::kGenerator, kSampleRows, true));
  sample_z_ = g_sample_->model_input(noise);
  sample_out_ = dcgan_generator(*g_sample_, sample_z_, a);
  g_sample_->add_output_grad(sample_out_);  // never run backward; finalize() needs a sink
  g_sample_->finalize();
  g_sample_->bind_state(*g_, 0);

  d_real_ = std::make_unique<Net>(net_spec(DcganNet::kDiscriminator, spec_.batch, false));
  real_in_ = d_real_->input(image);
  loss_real_ =
      d_real_->bce_with_logits(dcgan_discriminator(*d_real_, real_in_, a), 1.0f, &ms_real_);
  d_real_->finalize();

  d_fake_ = std::make_unique<Net>(net_spec(DcganNet::kDiscriminator, spec_.batch, true));
  fake_in_ = d_fake_->model_input(image);
  loss_fake_ =
      d_fake_->bce_with_logits(dcgan_discriminator(*d_fake_, fake_in_, a), 0.0f, &ms_fake_);
  d_fake_->finalize();
  d_fake_->bind_state(*d_real_, 0);

  d_gen_ = std::make_unique<Net>(net_spec(DcganNet::kDiscriminator, spec_.batch, true));
  gen_in_ = d_gen_->model_input(image, /*needs_grad=*/true);
  loss_gen_ = d_gen_->bce_with_logits(dcgan_discriminator(*d_gen_, gen_in_, a), 1.0f, &ms_gen_);
  d_gen_->finalize();
  d_gen_->bind_state(*d_real_, 0);

  opt_g_ = adam_over(*g_, spec_.g_adam);
  opt_d_ = adam_over(*d_real_, spec_.d_adam);

  noise_.resize(static_cast<size_t>(spec_.batch * spec_.B * a.nz));
  fixed_noise_.resize(static_cast<size_t>(kSampleRows * spec_.B * a.nz));
  draw_noise(TensorView(fixed_noise_.data(), Shape{kSampleRows, spec_.B * a.nz, 1, 1}), spec_.seed,
             kRngGanFixedNoise);
}

GanArray::~GanArray() = default;

void GanArray::draw_noise(TensorView z, uint64_t seed, uint64_t purpose) const {
  const int64_t rows = z.shape[0], nz = spec_.arch.nz;
  for (int64_t b = 0; b < spec_.B; ++b) {
    // Model b's noise is its own stream, row by row: the same numbers as model b alone.
    RngStream rng = RngStream::for_model(seed, spec_.model_ids[static_cast<size_t>(b)], purpose);
    for (int64_t r = 0; r < rows; ++r) {
      float* row = z.data + (r * spec_.B + b) * nz;
      for (int64_t k = 0; k < nz; ++k) row[k] = rng.normal();
    }
  }
}

void GanArray::reset_profile() {
  for (Net* n : {g_.get(), d_real_.get(), d_fake_.get(), d_gen_.get()}) n->reset_profile();
}

std::string GanArray::profile_report() const {
  return fmt::format(
      "dcgan generator {}\ndcgan discriminator on the real batch {}\ndcgan discriminator on the "
      "fakes, D's step {}\ndcgan discriminator on the fakes, G's step {}",
      g_->profile_report(), d_real_->profile_report(), d_fake_->profile_report(),
      d_gen_->profile_report());
}

GanStepStats GanArray::step(const TensorView& real, const TensorView* noise) {
  const int64_t n = real.shape.rank() > 0 ? real.shape[0] : 0;
  HFTA_CHECK(n >= 2 && n <= spec_.batch, "a GAN step needs 2 to {} real rows, got {}", spec_.batch,
             n);
  GanStepStats stats;

  // (1) D: maximize log D(x) + log(1 - D(G(z))).
  d_real_->zero_grad();
  d_real_->set_input(real_in_, real);
  d_real_->forward(true);
  d_real_->backward();
  stats.d_x = to_vector(d_real_->saved(ms_real_));

  TensorView z(noise_.data(), Shape{n, spec_.B * spec_.arch.nz, 1, 1});
  if (noise != nullptr) {
    check_shape(*noise, z.shape, "noise");
    std::copy(noise->data, noise->data + noise->numel(), z.data);
  } else {
    draw_noise(z, spec_.seed ^ static_cast<uint64_t>(steps_), kRngGanNoise);
  }
  g_->set_input(z_, z);
  g_->forward(true);
  const TensorView fake = g_->value(fake_);
  d_fake_->set_input(fake_in_, fake);
  d_fake_->forward(true);
  d_fake_->backward();  // accumulates into d_real's gradients: errD_real + errD_fake
  stats.d_g_z1 = to_vector(d_fake_->saved(ms_fake_));
  const TensorView lr = d_real_->value(loss_real_), lf = d_fake_->value(loss_fake_);
  for (int64_t b = 0; b < spec_.B; ++b) stats.loss_d.push_back(lr[b] + lf[b]);
  opt_d_->step(d_real_->param_arena(), d_real_->grad_arena());

  // (2) G: maximize log D(G(z)) through the updated D. D's gradients from this pass are unused
  // (zeroed at the next D step), as in the example.
  g_->zero_grad();
  d_gen_->set_input(gen_in_, fake);
  d_gen_->forward(true);
  d_gen_->backward();
  stats.d_g_z2 = to_vector(d_gen_->saved(ms_gen_));
  stats.loss_g = to_vector(d_gen_->value(loss_gen_));
  const TensorView dfake = d_gen_->grad(gen_in_), gfake = g_->grad(fake_);
  std::copy(dfake.data, dfake.data + dfake.numel(), gfake.data);
  g_->backward();
  opt_g_->step(g_->param_arena(), g_->grad_arena());
  ++steps_;
  return stats;
}

TensorView GanArray::samples() {
  g_sample_->set_input(sample_z_, TensorView(fixed_noise_.data(),
                                             Shape{kSampleRows, spec_.B * spec_.arch.nz, 1, 1}));
  g_sample_->forward(true);
  return g_sample_->value(sample_out_);
}

}  // namespace hfta
