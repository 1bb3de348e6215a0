#include "optim/adadelta.h"

#include <cmath>

namespace hfta {

AdadeltaHyper AdadeltaHyper::expanded(int64_t B) const {
  AdadeltaHyper h;
  h.lr = expand_per_model(lr, B, "lr");
  h.rho = expand_per_model(rho, B, "rho");
  h.eps = expand_per_model(eps, B, "eps");
  h.weight_decay = expand_per_model(weight_decay, B, "weight_decay");
  return h;
}

void AdadeltaHyper::check() const {
  check_per_model(
      lr, "lr", [](float x) { return x >= 0.0f && std::isfinite(x); }, "a finite lr >= 0");
  check_per_model(
      rho, "rho", [](float x) { return x >= 0.0f && x < 1.0f; }, "0 <= rho < 1");
  check_per_model(
      eps, "eps", [](float x) { return x > 0.0f && std::isfinite(x); }, "a finite eps > 0");
  check_per_model(
      weight_decay, "weight_decay", [](float x) { return x >= 0.0f && std::isfinite(x); },
      "a finite weight_decay >= 0");
}

static AdadeltaHyper checked(const AdadeltaHyper& hyper, int64_t B) {
  AdadeltaHyper h = hyper.expanded(B);
  h.check();
  return h;
}

FusedAdadelta::FusedAdadelta(ParamTable table, const AdadeltaHyper& hyper)
    : Optimizer(std::move(table)), hyper_(checked(hyper, table_.B)) {
  lr_ = hyper_.lr;
  add_state_buffers(2);
  constants_.resize(table_.B);
}

AdadeltaStepConstants adadelta_step_constants(const AdadeltaHyper& hyper, int64_t b, float lr) {
  return {lr, hyper.weight_decay[b], hyper.rho[b], static_cast<float>(1.0 - double(hyper.rho[b])),
          hyper.eps[b]};
}

void FusedAdadelta::begin_model_step(int64_t b) {
  constants_[b] = adadelta_step_constants(hyper_, b, lr_[b]);
}

// In PyTorch's order of operations: std = sqrt(v + eps); delta = sqrt(u + eps) / std * g.
static void adadelta_update(float* __restrict p, const float* __restrict g, float* __restrict v,
                            float* __restrict u, int64_t n, const AdadeltaStepConstants& k) {
  const float lr = k.lr, wd = k.weight_decay, rho = k.rho, omr = k.one_minus_rho, eps = k.eps;
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + wd * p[i];
    const float vi = rho * v[i] + omr * gi * gi;
    const float delta = std::sqrt(u[i] + eps) / std::sqrt(vi + eps) * gi;
    v[i] = vi;
    u[i] = rho * u[i] + omr * delta * delta;
    p[i] -= lr * delta;
  }
}

// An exempt chunk has weight decay 0.
void FusedAdadelta::update_chunk(const Chunk& c, float* params, const float* grads) {
  AdadeltaStepConstants k = constants_[c.b];
  if (!c.decay) k.weight_decay = 0.0f;
  adadelta_update(params + c.begin, grads + c.begin, square_avg() + c.begin, acc_delta() + c.begin,
                  c.size, k);
}

float FusedAdadelta::set_slot_hyper(int64_t b, const SlotHyper& h) {
  h.check_only(name(), {"lr", "rho", "eps", "weight_decay"});
  AdadeltaHyper next = hyper_;
  set_slot_value(next.lr, b, h.lr);
  set_slot_value(next.rho, b, h.rho);
  set_slot_value(next.eps, b, h.eps);
  set_slot_value(next.weight_decay, b, h.weight_decay);
  next.check();
  hyper_ = std::move(next);
  return hyper_.lr[b];
}

std::unique_ptr<Optimizer> FusedAdadelta::with_models(ParamTable table,
                                                      std::span<const int64_t> keep) const {
  return std::make_unique<FusedAdadelta>(
      std::move(table), AdadeltaHyper{.lr = pick(hyper_.lr, keep),
                                      .rho = pick(hyper_.rho, keep),
                                      .eps = pick(hyper_.eps, keep),
                                      .weight_decay = pick(hyper_.weight_decay, keep)});
}

namespace ref {

void adadelta_step(AdadeltaState& s, float* params, const float* grads, int64_t n, double lr,
                   double rho, double eps, double weight_decay) {
  if (s.square_avg.empty()) s.square_avg.assign(n, 0.0), s.acc_delta.assign(n, 0.0);
  s.step += 1;
  for (int64_t i = 0; i < n; ++i) {
    const double p = params[i], g = grads[i] + weight_decay * p;
    s.square_avg[i] = rho * s.square_avg[i] + (1.0 - rho) * g * g;
    const double delta = std::sqrt(s.acc_delta[i] + eps) / std::sqrt(s.square_avg[i] + eps) * g;
    s.acc_delta[i] = rho * s.acc_delta[i] + (1.0 - rho) * delta * delta;
    params[i] = static_cast<float>(p - lr * delta);
  }
}

}  // namespace ref
}  // namespace hfta
