// Learning-rate schedules: per-model lr from per-model base lr and step t, in PyTorch's closed
// forms (t is the number of updates a model has had, as the optimizer's steps() counts them):
//   constant   base
//   step       base * gamma^floor(t / step_size)                              (StepLR)
//   cosine     eta_min + (base - eta_min) * (1 + cos(pi * t / t_max)) / 2     (CosineAnnealingLR)
// A linear warmup multiplies any of them by the factor of LinearLR(start_factor, total_iters=W):
//   start_factor + (1 - start_factor) * min(t, W) / W
// Typical use, before every step:
//   schedule.compute(adam.hyper().lr, adam.steps(), lr);  adam.set_lr(lr);  adam.step(p, g);
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace hfta {

enum class LrScheduleKind { kConstant, kStep, kCosine };

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  int64_t step_size = 1;  // kStep
  float gamma = 0.1f;     // kStep
  int64_t t_max = 1;      // kCosine
  float eta_min = 0.0f;   // kCosine
  int64_t warmup_steps = 0;
  float warmup_start_factor = 0.0f;

  static LrSchedule constant() { return {}; }
  static LrSchedule step_decay(int64_t step_size, float gamma);
  static LrSchedule cosine(int64_t t_max, float eta_min = 0.0f);
  LrSchedule with_warmup(int64_t steps, float start_factor = 0.0f) const;

  // Throws hfta::Error naming the setting out of range: step_size >= 1, gamma > 0, t_max >= 1,
  // eta_min >= 0, warmup_steps >= 0, 0 <= warmup_start_factor <= 1.
  void check() const;
  double lr_at(double base_lr, int64_t t) const;
  // out[b] = lr_at(base_lr[b], t[b]); all three have B entries (t may have one, shared).
  void compute(std::span<const float> base_lr, std::span<const int64_t> t,
               std::span<float> out) const;
};

// One schedule per model, for arrays whose models search schedule parameters too (fusible: each
// model's lr is its own schedule at its own t) and whose slots are refilled (models/slots.h).
// Optimizer::reset_slot zeroes the slot's step count, so its schedule restarts at t = 0;
// reset_slot here gives it another schedule.
struct PerModelLrSchedule {
  std::vector<LrSchedule> schedules;  // [B]

  PerModelLrSchedule() = default;
  // `shared` for each of B models (checked).
  PerModelLrSchedule(const LrSchedule& shared, int64_t B);
  // Slot b's schedule from now on (checked; throws hfta::Error for b out of range).
  void reset_slot(int64_t b, const LrSchedule& schedule);
  // The schedules of models keep[0], keep[1], ... (models/slots.h's compact).
  PerModelLrSchedule compact(std::span<const int64_t> keep) const;
  // out[b] = schedules[b].lr_at(base_lr[b], t[b]); all with B entries.
  void compute(std::span<const float> base_lr, std::span<const int64_t> t,
               std::span<float> out) const;
};

}  // namespace hfta
