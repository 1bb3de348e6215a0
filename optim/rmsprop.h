// Fused RMSprop over [B, ...] parameters, per-model hyperparameters, as torch.optim.RMSprop.
// Model b, gradient g; the square average v, gradient average gavg and momentum buffer buf start
// at 0:
//   g += wd * p
//   v = alpha * v + (1 - alpha) * g * g
//   centered:  gavg = alpha * gavg + (1 - alpha) * g;  denom = sqrt(v - gavg * gavg) + eps
//   else:      denom = sqrt(v) + eps
//   momentum > 0:  buf = momentum * buf + g / denom;  p -= lr * buf
//   else:          p -= lr * g / denom
// One difference from PyTorch: v - gavg^2 (>= 0 in exact arithmetic) is clamped at 0, where fp32
// rounding could make it slightly negative and PyTorch's sqrt would give NaN.
// The update does not depend on the step count; the counts are kept for checkpoints and schedules.
#pragma once

#include <cstdint>
#include <vector>

#include "optim/optimizer.h"
#include "optim/step_constants.h"

namespace hfta {

struct RmspropHyper {
  // Each list has one value (shared by all models) or B values (one per model). PyTorch's defaults.
  std::vector<float> lr{1e-2f}, alpha{0.99f}, eps{1e-8f}, weight_decay{0.0f}, momentum{0.0f};
  std::vector<uint8_t> centered{0};

  // Every list with B values; throws hfta::Error naming the list whose length is neither 1 nor B.
  RmspropHyper expanded(int64_t B) const;
  // Throws hfta::Error naming the model and value out of range: lr >= 0, 0 <= alpha < 1, eps > 0,
  // weight_decay >= 0, momentum >= 0, all finite.
  void check() const;
};

// Model b's constants for one step at learning rate lr (RmspropStepConstants is in
// optim/step_constants.h, shared with the CUDA step).
RmspropStepConstants rmsprop_step_constants(const RmspropHyper& hyper, int64_t b, float lr);

class FusedRmsprop : public Optimizer {
 public:
  // `hyper` lists may have 1 or B values. The state buffers are the square average, then the
  // momentum buffer only when some model has momentum > 0, then the gradient average only when
  // some model is centered.
  FusedRmsprop(ParamTable table, const RmspropHyper& hyper);

  // Expanded to B values; hyper().lr holds the base rates (the current ones are lr()).
  const RmspropHyper& hyper() const { return hyper_; }
  float* square_avg() { return state_buffer(0); }
  float* momentum_buffer() {
    return momentum_index_ >= 0 ? state_buffer(momentum_index_) : nullptr;
  }
  float* grad_avg() { return grad_avg_index_ >= 0 ? state_buffer(grad_avg_index_) : nullptr; }
  std::string_view name() const override { return "RMSprop"; }

 private:
  void begin_model_step(int64_t b) override;
  void update_chunk(const Chunk& c, float* params, const float* grads) override;
  void device_update(cuda::DeviceOptimizerStep& device, float* params, const float* grads) override;
  float set_slot_hyper(int64_t b, const SlotHyper& h) override;
  std::unique_ptr<Optimizer> with_models(ParamTable table,
                                         std::span<const int64_t> keep) const override;

  RmspropHyper hyper_;
  int momentum_index_ = -1, grad_avg_index_ = -1;
  std::vector<RmspropStepConstants> constants_;  // [B], for the current step
};

namespace ref {
// One model alone: the specification, in double, state kept in double.
// The weight decay is per call: a tensor exempt from decay is stepped with weight_decay = 0.
struct RmspropState {
  std::vector<double> square_avg, grad_avg, momentum_buffer;
  int64_t step = 0;
};
void rmsprop_step(RmspropState& s, float* params, const float* grads, int64_t n, double lr,
                  double alpha, double eps, double weight_decay, double momentum, bool centered);
}  // namespace ref

}  // namespace hfta
