// Fused Adadelta over [B, ...] parameters, per-model hyperparameters, as torch.optim.Adadelta
// (Zeiler 2012). Model b, gradient g, square average v and accumulated update u (both start at 0):
//   g += wd * p
//   v = rho * v + (1 - rho) * g * g
//   delta = sqrt(u + eps) / sqrt(v + eps) * g
//   u = rho * u + (1 - rho) * delta * delta
//   p -= lr * delta
// The update does not depend on the step count; the counts are kept for checkpoints and schedules.
#pragma once

#include <cstdint>
#include <vector>

#include "optim/optimizer.h"
#include "optim/step_constants.h"

namespace hfta {

struct AdadeltaHyper {
  // Each list has one value (shared by all models) or B values (one per model). PyTorch's defaults.
  std::vector<float> lr{1.0f}, rho{0.9f}, eps{1e-6f}, weight_decay{0.0f};

  // Every list with B values; throws hfta::Error naming the list whose length is neither 1 nor B.
  AdadeltaHyper expanded(int64_t B) const;
  // Throws hfta::Error naming the model and value out of range: lr >= 0, 0 <= rho < 1, eps > 0,
  // weight_decay >= 0, all finite.
  void check() const;
};

// Model b's constants for one step at learning rate lr (AdadeltaStepConstants is in
// optim/step_constants.h, shared with the CUDA step).
AdadeltaStepConstants adadelta_step_constants(const AdadeltaHyper& hyper, int64_t b, float lr);

class FusedAdadelta : public Optimizer {
 public:
  // `hyper` lists may have 1 or B values.
  FusedAdadelta(ParamTable table, const AdadeltaHyper& hyper);

  // Expanded to B values; hyper().lr holds the base rates (the current ones are lr()).
  const AdadeltaHyper& hyper() const { return hyper_; }
  float* square_avg() { return state_buffer(0); }
  float* acc_delta() { return state_buffer(1); }
  std::string_view name() const override { return "Adadelta"; }

 private:
  void begin_model_step(int64_t b) override;
  void update_chunk(const Chunk& c, float* params, const float* grads) override;
  void device_update(cuda::DeviceOptimizerStep& device, float* params, const float* grads) override;
  float set_slot_hyper(int64_t b, const SlotHyper& h) override;
  std::unique_ptr<Optimizer> with_models(ParamTable table,
                                         std::span<const int64_t> keep) const override;

  AdadeltaHyper hyper_;
  std::vector<AdadeltaStepConstants> constants_;  // [B], for the current step
};

namespace ref {
// One model alone: the specification, in double, state kept in double.
// The weight decay is per call: a tensor exempt from decay is stepped with weight_decay = 0.
struct AdadeltaState {
  std::vector<double> square_avg, acc_delta;
  int64_t step = 0;
};
void adadelta_step(AdadeltaState& s, float* params, const float* grads, int64_t n, double lr,
                   double rho, double eps, double weight_decay);
}  // namespace ref

}  // namespace hfta
