#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"
#include "optim/slots.h"

namespace hfta {

LrSchedule LrSchedule::step_decay(int64_t step_size, float gamma) {
  LrSchedule s;
  s.kind = LrScheduleKind::kStep;
  s.step_size = step_size;
  s.gamma = gamma;
  s.check();
  return s;
}

LrSchedule LrSchedule::cosine(int64_t t_max, float eta_min) {
  LrSchedule s;
  s.kind = LrScheduleKind::kCosine;
  s.t_max = t_max;
  s.eta_min = eta_min;
  s.check();
  return s;
}

LrSchedule LrSchedule::with_warmup(int64_t steps, float start_factor) const {
  LrSchedule s = *this;
  s.warmup_steps = steps;
  s.warmup_start_factor = start_factor;
  s.check();
  return s;
}

void LrSchedule::check() const {
  HFTA_CHECK(step_size >= 1, "step decay step_size = {} is out of range: expected >= 1", step_size);
  HFTA_CHECK(gamma > 0.0f && std::isfinite(gamma),
             "step decay gamma = {} is out of range: expected a finite gamma > 0", gamma);
  HFTA_CHECK(t_max >= 1, "cosine t_max = {} is out of range: expected >= 1", t_max);
  HFTA_CHECK(eta_min >= 0.0f && std::isfinite(eta_min),
             "cosine eta_min = {} is out of range: expected a finite eta_min >= 0", eta_min);
  HFTA_CHECK(warmup_steps >= 0, "warmup_steps = {} is out of range: expected >= 0", warmup_steps);
  HFTA_CHECK(warmup_start_factor >= 0.0f && warmup_start_factor <= 1.0f,
             "warmup start factor = {} is out of range: expected 0 <= factor <= 1",
             warmup_start_factor);
}

double LrSchedule::lr_at(double base_lr, int64_t t) const {
  double lr = base_lr;
  switch (kind) {
    case LrScheduleKind::kConstant:
      break;
    case LrScheduleKind::kStep:
      lr = base_lr * std::pow(double(gamma), double(t / step_size));
      break;
    case LrScheduleKind::kCosine:
      lr = eta_min + (base_lr - eta_min) *
                         (1.0 + std::cos(std::numbers::pi * double(t) / double(t_max))) / 2.0;
      break;
  }
  if (warmup_steps > 0) {
    const double s = warmup_start_factor;
    lr *= s + (1.0 - s) * double(std::min(t, warmup_steps)) / double(warmup_steps);
  }
  return lr;
}

void LrSchedule::compute(std::span<const float> base_lr, std::span<const int64_t> t,
                         std::span<float> out) const {
  HFTA_CHECK(out.size() == base_lr.size() && (t.size() == 1 || t.size() == base_lr.size()),
             "LR schedule: {} base rates, {} step counts and {} outputs: expected B of each (or "
             "one step count, shared)",
             base_lr.size(), t.size(), out.size());
  for (size_t b = 0; b < out.size(); ++b)
    out[b] = static_cast<float>(lr_at(base_lr[b], t.size() == 1 ? t[0] : t[b]));
}

PerModelLrSchedule::PerModelLrSchedule(const LrSchedule& shared, int64_t B) {
  HFTA_CHECK(B >= 1, "per-model LR schedules for B = {} models: expected at least 1", B);
  shared.check();
  schedules.assign(static_cast<size_t>(B), shared);
}

void PerModelLrSchedule::reset_slot(int64_t b, const LrSchedule& schedule) {
  HFTA_CHECK(b >= 0 && b < static_cast<int64_t>(schedules.size()),
             "cannot give slot {} a schedule: the array has slots 0..{}", b,
             static_cast<int64_t>(schedules.size()) - 1);
  schedule.check();
  schedules[static_cast<size_t>(b)] = schedule;
}

PerModelLrSchedule PerModelLrSchedule::compact(std::span<const int64_t> keep) const {
  check_keep(keep, static_cast<int64_t>(schedules.size()), "LR schedules");
  PerModelLrSchedule out;
  for (int64_t b : keep) out.schedules.push_back(schedules[static_cast<size_t>(b)]);
  return out;
}

void PerModelLrSchedule::compute(std::span<const float> base_lr, std::span<const int64_t> t,
                                 std::span<float> out) const {
  HFTA_CHECK(base_lr.size() == schedules.size() && t.size() == schedules.size() &&
                 out.size() == schedules.size(),
             "per-model LR schedules: {} schedules, {} base rates, {} step counts and {} outputs: "
             "expected B of each",
             schedules.size(), base_lr.size(), t.size(), out.size());
  for (size_t b = 0; b < out.size(); ++b)
    out[b] = static_cast<float>(schedules[b].lr_at(base_lr[b], t[b]));
}

}  // namespace hfta
