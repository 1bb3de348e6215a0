#include "optim/sgd.h"

#include <algorithm>
#include <cmath>

namespace hfta {

SgdHyper SgdHyper::expanded(int64_t B) const {
  SgdHyper h;
  h.lr = expand_per_model(lr, B, "lr");
  h.momentum = expand_per_model(momentum, B, "momentum");
  h.dampening = expand_per_model(dampening, B, "dampening");
  h.weight_decay = expand_per_model(weight_decay, B, "weight_decay");
  h.nesterov = expand_per_model(nesterov, B, "nesterov");
  return h;
}

void SgdHyper::check() const {
  auto nonnegative = [](float x) { return x >= 0.0f && std::isfinite(x); };
  check_per_model(lr, "lr", nonnegative, "a finite lr >= 0");
  check_per_model(momentum, "momentum", nonnegative, "a finite momentum >= 0");
  check_per_model(
      dampening, "dampening", [](float x) { return x >= 0.0f && x <= 1.0f; },
      "0 <= dampening <= 1");
  check_per_model(weight_decay, "weight_decay", nonnegative, "a finite weight_decay >= 0");
  for (size_t b = 0; b < nesterov.size(); ++b)
    HFTA_CHECK(!nesterov[b] || (momentum[b] > 0.0f && dampening[b] == 0.0f),
               "model {}: Nesterov momentum needs momentum > 0 and dampening = 0, got momentum = "
               "{} and dampening = {}: set a momentum, zero the dampening, or turn Nesterov off",
               b, momentum[b], dampening[b]);
}

static SgdHyper checked(const SgdHyper& hyper, int64_t B) {
  SgdHyper h = hyper.expanded(B);
  h.check();
  return h;
}

FusedSgd::FusedSgd(ParamTable table, const SgdHyper& hyper)
    : Optimizer(std::move(table)), hyper_(checked(hyper, table_.B)) {
  lr_ = hyper_.lr;
  const auto& m = hyper_.momentum;
  if (std::any_of(m.begin(), m.end(), [](float x) { return x > 0.0f; })) add_state_buffers(1);
  constants_.resize(table_.B);
}

SgdStepConstants sgd_step_constants(const SgdHyper& hyper, int64_t b, float lr, int64_t t) {
  const bool first = t == 1, nesterov = hyper.nesterov[b] != 0;
  const float momentum = hyper.momentum[b];
  return {lr,
          hyper.weight_decay[b],
          first ? 0.0f : momentum,
          first ? 1.0f : static_cast<float>(1.0 - double(hyper.dampening[b])),
          nesterov ? 1.0f : 0.0f,
          nesterov ? momentum : 1.0f,
          momentum > 0.0f};
}

void FusedSgd::begin_model_step(int64_t b) {
  constants_[b] = sgd_step_constants(hyper_, b, lr_[b], steps_[b]);
}

static void sgd_update(float* __restrict p, const float* __restrict g, int64_t n,
                       const SgdStepConstants& k) {
  const float lr = k.lr, wd = k.weight_decay;
  for (int64_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + wd * p[i]);
}

// The coefficients are 0 or 1 where PyTorch has no term, so those terms are exact.
static void sgd_momentum_update(float* __restrict p, const float* __restrict g,
                                float* __restrict buf, int64_t n, const SgdStepConstants& k) {
  const float lr = k.lr, wd = k.weight_decay, keep = k.keep, take = k.take;
  const float dir_d = k.dir_d, dir_buf = k.dir_buf;
  for (int64_t i = 0; i < n; ++i) {
    const float d = g[i] + wd * p[i];
    const float bi = keep * buf[i] + take * d;
    buf[i] = bi;
    p[i] -= lr * (dir_d * d + dir_buf * bi);
  }
}

// One of two loops per chunk, chosen by the model; no branch per element. An exempt chunk has
// weight decay 0.
void FusedSgd::update_chunk(const Chunk& c, float* params, const float* grads) {
  SgdStepConstants k = constants_[c.b];
  if (!c.decay) k.weight_decay = 0.0f;
  if (k.momentum)
    sgd_momentum_update(params + c.begin, grads + c.begin, momentum_buffer() + c.begin, c.size, k);
  else
    sgd_update(params + c.begin, grads + c.begin, c.size, k);
}

float FusedSgd::set_slot_hyper(int64_t b, const SlotHyper& h) {
  h.check_only(name(), {"lr", "momentum", "dampening", "weight_decay", "nesterov"});
  SgdHyper next = hyper_;
  set_slot_value(next.lr, b, h.lr);
  set_slot_value(next.momentum, b, h.momentum);
  set_slot_value(next.dampening, b, h.dampening);
  set_slot_value(next.weight_decay, b, h.weight_decay);
  set_slot_value(next.nesterov, b, h.nesterov);
  next.check();
  hyper_ = std::move(next);
  // An array built without momentum has no buffer: the first slot with momentum adds it.
  if (hyper_.momentum[b] > 0.0f && num_state_buffers() == 0) add_state_buffers(1);
  return hyper_.lr[b];
}

std::unique_ptr<Optimizer> FusedSgd::with_models(ParamTable table,
                                                 std::span<const int64_t> keep) const {
  auto out = std::make_unique<FusedSgd>(std::move(table),
                                        SgdHyper{.lr = pick(hyper_.lr, keep),
                                                 .momentum = pick(hyper_.momentum, keep),
                                                 .dampening = pick(hyper_.dampening, keep),
                                                 .weight_decay = pick(hyper_.weight_decay, keep),
                                                 .nesterov = pick(hyper_.nesterov, keep)});
  // The kept models may have no momentum while the buffer exists: keep it (compact copies it).
  if (out->num_state_buffers() < num_state_buffers()) out->add_state_buffers(1);
  return out;
}

namespace ref {

void sgd_step(SgdState& s, float* params, const float* grads, int64_t n, double lr, double momentum,
              double dampening, double weight_decay, bool nesterov) {
  if (s.buf.empty()) s.buf.assign(n, 0.0);
  s.step += 1;
  for (int64_t i = 0; i < n; ++i) {
    double d = grads[i] + weight_decay * double(params[i]);
    if (momentum != 0.0) {
      if (s.step == 1)
        s.buf[i] = d;
      else
        s.buf[i] = momentum * s.buf[i] + (1.0 - dampening) * d;
      d = nesterov ? d + momentum * s.buf[i] : s.buf[i];
    }
    params[i] = static_cast<float>(params[i] - lr * d);
  }
}

}  // namespace ref
}  // namespace hfta
