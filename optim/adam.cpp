#include "optim/adam.h"

#include <cmath>

namespace hfta {

AdamHyper AdamHyper::expanded(int64_t B) const {
  AdamHyper h;
  h.lr = expand_per_model(lr, B, "lr");
  h.beta1 = expand_per_model(beta1, B, "beta1");
  h.beta2 = expand_per_model(beta2, B, "beta2");
  h.eps = expand_per_model(eps, B, "eps");
  h.weight_decay = expand_per_model(weight_decay, B, "weight_decay");
  return h;
}

void AdamHyper::check() const {
  check_per_model(
      lr, "lr", [](float x) { return x >= 0.0f && std::isfinite(x); }, "a finite lr >= 0");
  auto beta_ok = [](float x) { return x >= 0.0f && x < 1.0f; };
  check_per_model(beta1, "beta1", beta_ok, "0 <= beta1 < 1");
  check_per_model(beta2, "beta2", beta_ok, "0 <= beta2 < 1");
  check_per_model(
      eps, "eps", [](float x) { return x > 0.0f && std::isfinite(x); }, "a finite eps > 0");
  check_per_model(
      weight_decay, "weight_decay", [](float x) { return x >= 0.0f && std::isfinite(x); },
      "a finite weight_decay >= 0");
}

static AdamHyper checked(const AdamHyper& hyper, int64_t B) {
  AdamHyper h = hyper.expanded(B);
  h.check();
  return h;
}

FusedAdam::FusedAdam(ParamTable table, const AdamHyper& hyper, WeightDecay decay)
    : Optimizer(std::move(table)), hyper_(checked(hyper, table_.B)), decay_(decay) {
  lr_ = hyper_.lr;
  add_state_buffers(2);
  constants_.resize(table_.B);
}

// Scalars in double as PyTorch computes them in Python, rounded once to float.
AdamStepConstants adam_step_constants(const AdamHyper& hyper, int64_t b, float lr_now, int64_t t,
                                      WeightDecay decay) {
  const double lr = lr_now, wd = hyper.weight_decay[b], steps = static_cast<double>(t);
  const double beta1 = hyper.beta1[b], beta2 = hyper.beta2[b];
  AdamStepConstants k;
  k.l2 = decay == WeightDecay::kL2 ? static_cast<float>(wd) : 0.0f;
  k.shrink = decay == WeightDecay::kDecoupled ? static_cast<float>(1.0 - lr * wd) : 1.0f;
  k.beta1 = hyper.beta1[b];
  k.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  k.beta2 = hyper.beta2[b];
  k.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  k.step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, steps)));
  k.inv_bc2_sqrt = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(beta2, steps)));
  k.eps = hyper.eps[b];
  return k;
}

void FusedAdam::begin_model_step(int64_t b) {
  constants_[b] = adam_step_constants(hyper_, b, lr_[b], steps_[b], decay_);
}

// Adam and AdamW in one branch-free loop: with l2 = 0 the gradient is unchanged, with shrink = 1
// the parameter is; both are exact in fp32.
static void adam_update(float* __restrict p, const float* __restrict g, float* __restrict m,
                        float* __restrict v, int64_t n, const AdamStepConstants& k) {
  const float l2 = k.l2, shrink = k.shrink, beta1 = k.beta1, beta2 = k.beta2;
  const float omb1 = k.one_minus_beta1, omb2 = k.one_minus_beta2;
  const float step_size = k.step_size, inv_bc2_sqrt = k.inv_bc2_sqrt, eps = k.eps;
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + l2 * p[i];
    const float mi = beta1 * m[i] + omb1 * gi;
    const float vi = beta2 * v[i] + omb2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * shrink - step_size * (mi / (std::sqrt(vi) * inv_bc2_sqrt + eps));
  }
}

// An exempt chunk runs the same loop with l2 = 0 and shrink = 1: weight decay 0.
void FusedAdam::update_chunk(const Chunk& c, float* params, const float* grads) {
  AdamStepConstants k = constants_[c.b];
  if (!c.decay) k.l2 = 0.0f, k.shrink = 1.0f;
  adam_update(params + c.begin, grads + c.begin, exp_avg() + c.begin, exp_avg_sq() + c.begin,
              c.size, k);
}

float FusedAdam::set_slot_hyper(int64_t b, const SlotHyper& h) {
  h.check_only(name(), {"lr", "beta1", "beta2", "eps", "weight_decay"});
  AdamHyper next = hyper_;
  set_slot_value(next.lr, b, h.lr);
  set_slot_value(next.beta1, b, h.beta1);
  set_slot_value(next.beta2, b, h.beta2);
  set_slot_value(next.eps, b, h.eps);
  set_slot_value(next.weight_decay, b, h.weight_decay);
  next.check();
  hyper_ = std::move(next);
  return hyper_.lr[b];
}

std::unique_ptr<Optimizer> FusedAdam::with_models(ParamTable table,
                                                  std::span<const int64_t> keep) const {
  const AdamHyper h{.lr = pick(hyper_.lr, keep),
                    .beta1 = pick(hyper_.beta1, keep),
                    .beta2 = pick(hyper_.beta2, keep),
                    .eps = pick(hyper_.eps, keep),
                    .weight_decay = pick(hyper_.weight_decay, keep)};
  if (decay_ == WeightDecay::kDecoupled) return std::make_unique<FusedAdamW>(std::move(table), h);
  return std::make_unique<FusedAdam>(std::move(table), h, decay_);
}

namespace ref {

void adam_step(AdamState& s, float* params, const float* grads, int64_t n, double lr, double beta1,
               double beta2, double eps, double weight_decay, WeightDecay decay) {
  if (s.m.empty()) s.m.assign(n, 0.0), s.v.assign(n, 0.0);
  s.step += 1;
  const double bc1 = 1.0 - std::pow(beta1, double(s.step));
  const double bc2 = 1.0 - std::pow(beta2, double(s.step));
  for (int64_t i = 0; i < n; ++i) {
    double p = params[i], g = grads[i];
    if (decay == WeightDecay::kL2) g += weight_decay * p;
    if (decay == WeightDecay::kDecoupled) p *= 1.0 - lr * weight_decay;
    s.m[i] = beta1 * s.m[i] + (1.0 - beta1) * g;
    s.v[i] = beta2 * s.v[i] + (1.0 - beta2) * g * g;
    const double m_hat = s.m[i] / bc1, v_hat = s.v[i] / bc2;
    params[i] = static_cast<float>(p - lr * m_hat / (std::sqrt(v_hat) + eps));
  }
}

}  // namespace ref
}  // namespace hfta
