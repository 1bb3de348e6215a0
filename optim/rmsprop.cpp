#include "optim/rmsprop.h"

#include <algorithm>
#include <cmath>

namespace hfta {

RmspropHyper RmspropHyper::expanded(int64_t B) const {
  RmspropHyper h;
  h.lr = expand_per_model(lr, B, "lr");
  h.alpha = expand_per_model(alpha, B, "alpha");
  h.eps = expand_per_model(eps, B, "eps");
  h.weight_decay = expand_per_model(weight_decay, B, "weight_decay");
  h.momentum = expand_per_model(momentum, B, "momentum");
  h.centered = expand_per_model(centered, B, "centered");
  return h;
}

void RmspropHyper::check() const {
  auto nonnegative = [](float x) { return x >= 0.0f && std::isfinite(x); };
  check_per_model(lr, "lr", nonnegative, "a finite lr >= 0");
  check_per_model(
      alpha, "alpha", [](float x) { return x >= 0.0f && x < 1.0f; }, "0 <= alpha < 1");
  check_per_model(
      eps, "eps", [](float x) { return x > 0.0f && std::isfinite(x); }, "a finite eps > 0");
  check_per_model(weight_decay, "weight_decay", nonnegative, "a finite weight_decay >= 0");
  check_per_model(momentum, "momentum", nonnegative, "a finite momentum >= 0");
}

static RmspropHyper checked(const RmspropHyper& hyper, int64_t B) {
  RmspropHyper h = hyper.expanded(B);
  h.check();
  return h;
}

FusedRmsprop::FusedRmsprop(ParamTable table, const RmspropHyper& hyper)
    : Optimizer(std::move(table)), hyper_(checked(hyper, table_.B)) {
  lr_ = hyper_.lr;
  add_state_buffers(1);
  const auto& m = hyper_.momentum;
  if (std::any_of(m.begin(), m.end(), [](float x) { return x > 0.0f; })) {
    momentum_index_ = num_state_buffers();
    add_state_buffers(1);
  }
  const auto& c = hyper_.centered;
  if (std::any_of(c.begin(), c.end(), [](uint8_t x) { return x != 0; })) {
    grad_avg_index_ = num_state_buffers();
    add_state_buffers(1);
  }
  constants_.resize(table_.B);
}

RmspropStepConstants rmsprop_step_constants(const RmspropHyper& hyper, int64_t b, float lr) {
  const float alpha = hyper.alpha[b], momentum = hyper.momentum[b];
  return {lr,
          hyper.weight_decay[b],
          alpha,
          static_cast<float>(1.0 - double(alpha)),
          hyper.eps[b],
          momentum,
          hyper.centered[b] != 0,
          momentum > 0.0f};
}

void FusedRmsprop::begin_model_step(int64_t b) {
  constants_[b] = rmsprop_step_constants(hyper_, b, lr_[b]);
}

// One loop per (centered, momentum) pair, chosen per chunk: no branch per element.
template <bool kCentered, bool kMomentum>
static void rmsprop_update(float* __restrict p, const float* __restrict g, float* __restrict v,
                           float* __restrict gavg, float* __restrict buf, int64_t n,
                           const RmspropStepConstants& k) {
  const float lr = k.lr, wd = k.weight_decay, alpha = k.alpha, oma = k.one_minus_alpha;
  const float eps = k.eps, momentum = k.momentum;
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + wd * p[i];
    const float vi = alpha * v[i] + oma * gi * gi;
    v[i] = vi;
    float denom;
    if constexpr (kCentered) {
      const float ai = alpha * gavg[i] + oma * gi;
      gavg[i] = ai;
      denom = std::sqrt(std::max(vi - ai * ai, 0.0f)) + eps;
    } else {
      denom = std::sqrt(vi) + eps;
    }
    if constexpr (kMomentum) {
      const float bi = momentum * buf[i] + gi / denom;
      buf[i] = bi;
      p[i] -= lr * bi;
    } else {
      p[i] -= lr * (gi / denom);
    }
  }
}

// An exempt chunk has weight decay 0.
void FusedRmsprop::update_chunk(const Chunk& c, float* params, const float* grads) {
  RmspropStepConstants k = constants_[c.b];
  if (!c.decay) k.weight_decay = 0.0f;
  float* p = params + c.begin;
  const float* g = grads + c.begin;
  float* v = square_avg() + c.begin;
  float* gavg = k.centered ? grad_avg() + c.begin : nullptr;
  float* buf = k.use_momentum ? momentum_buffer() + c.begin : nullptr;
  if (k.centered && k.use_momentum)
    rmsprop_update<true, true>(p, g, v, gavg, buf, c.size, k);
  else if (k.centered)
    rmsprop_update<true, false>(p, g, v, gavg, buf, c.size, k);
  else if (k.use_momentum)
    rmsprop_update<false, true>(p, g, v, gavg, buf, c.size, k);
  else
    rmsprop_update<false, false>(p, g, v, gavg, buf, c.size, k);
}

float FusedRmsprop::set_slot_hyper(int64_t b, const SlotHyper& h) {
  h.check_only(name(), {"lr", "alpha", "eps", "weight_decay", "momentum", "centered"});
  RmspropHyper next = hyper_;
  set_slot_value(next.lr, b, h.lr);
  set_slot_value(next.alpha, b, h.alpha);
  set_slot_value(next.eps, b, h.eps);
  set_slot_value(next.weight_decay, b, h.weight_decay);
  set_slot_value(next.momentum, b, h.momentum);
  set_slot_value(next.centered, b, h.centered);
  next.check();
  hyper_ = std::move(next);
  // An array built without momentum or centering lacks that buffer: the first slot adds it.
  if (hyper_.momentum[b] > 0.0f && momentum_index_ < 0) {
    momentum_index_ = num_state_buffers();
    add_state_buffers(1);
  }
  if (hyper_.centered[b] != 0 && grad_avg_index_ < 0) {
    grad_avg_index_ = num_state_buffers();
    add_state_buffers(1);
  }
  return hyper_.lr[b];
}

std::unique_ptr<Optimizer> FusedRmsprop::with_models(ParamTable table,
                                                     std::span<const int64_t> keep) const {
  auto out = std::make_unique<FusedRmsprop>(
      std::move(table), RmspropHyper{.lr = pick(hyper_.lr, keep),
                                     .alpha = pick(hyper_.alpha, keep),
                                     .eps = pick(hyper_.eps, keep),
                                     .weight_decay = pick(hyper_.weight_decay, keep),
                                     .momentum = pick(hyper_.momentum, keep),
                                     .centered = pick(hyper_.centered, keep)});
  // The same buffers in the same roles as this one (the kept models may need fewer).
  out->state_.clear();
  out->add_state_buffers(num_state_buffers());
  out->momentum_index_ = momentum_index_;
  out->grad_avg_index_ = grad_avg_index_;
  return out;
}

namespace ref {

void rmsprop_step(RmspropState& s, float* params, const float* grads, int64_t n, double lr,
                  double alpha, double eps, double weight_decay, double momentum, bool centered) {
  if (s.square_avg.empty())
    s.square_avg.assign(n, 0.0), s.grad_avg.assign(n, 0.0), s.momentum_buffer.assign(n, 0.0);
  s.step += 1;
  for (int64_t i = 0; i < n; ++i) {
    const double p = params[i], g = grads[i] + weight_decay * p;
    s.square_avg[i] = alpha * s.square_avg[i] + (1.0 - alpha) * g * g;
    double var = s.square_avg[i];
    if (centered) {
      s.grad_avg[i] = alpha * s.grad_avg[i] + (1.0 - alpha) * g;
      var -= s.grad_avg[i] * s.grad_avg[i];
    }
    const double denom = std::sqrt(std::max(var, 0.0)) + eps;
    double d = g / denom;
    if (momentum > 0.0) {
      s.momentum_buffer[i] = momentum * s.momentum_buffer[i] + d;
      d = s.momentum_buffer[i];
    }
    params[i] = static_cast<float>(p - lr * d);
  }
}

}  // namespace ref
}  // namespace hfta
