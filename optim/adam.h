// Fused Adam and AdamW over [B, ...] parameters, per-model hyperparameters and step counts.
//
// Model b, step t (its own count), gradient g, as torch.optim.Adam / torch.optim.AdamW:
//   Adam  (L2):        g += wd * p
//   AdamW (decoupled): p *= 1 - lr * wd
//   m = beta1 * m + (1 - beta1) * g          v = beta2 * v + (1 - beta2) * g * g
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
#pragma once

#include <cstdint>
#include <vector>

#include "optim/optimizer.h"
#include "optim/step_constants.h"

namespace hfta {

struct AdamHyper {
  // Each list has one value (shared by all models) or B values (one per model).
  std::vector<float> lr{1e-3f}, beta1{0.9f}, beta2{0.999f}, eps{1e-8f}, weight_decay{0.0f};

  // Every list with B values; throws hfta::Error naming the list whose length is neither 1 nor B.
  AdamHyper expanded(int64_t B) const;
  // Throws hfta::Error naming the model and value out of range: lr >= 0, 0 <= beta1, beta2 < 1,
  // eps > 0, weight_decay >= 0.
  void check() const;
};

enum class WeightDecay { kL2, kDecoupled };

// Model b's constants for its step t (its step count including this step) at learning rate `lr`,
// computed once per step and read by every chunk of the model. `hyper` is expanded (B values).
// FusedAdam's step and the CUDA backend's device step (optim/cuda/fused_step.h) both use these.
AdamStepConstants adam_step_constants(const AdamHyper& hyper, int64_t b, float lr, int64_t t,
                                      WeightDecay decay);

class FusedAdam : public Optimizer {
 public:
  // `hyper` lists may have 1 or B values. kDecoupled makes this AdamW.
  FusedAdam(ParamTable table, const AdamHyper& hyper, WeightDecay decay = WeightDecay::kL2);

  // Expanded to B values; hyper().lr holds the base rates (the current ones are lr()).
  const AdamHyper& hyper() const { return hyper_; }
  float* exp_avg() { return state_buffer(0); }
  float* exp_avg_sq() { return state_buffer(1); }
  std::string_view name() const override { return decay_ == WeightDecay::kL2 ? "Adam" : "AdamW"; }

 private:
  void begin_model_step(int64_t b) override;
  void update_chunk(const Chunk& c, float* params, const float* grads) override;
  void device_update(cuda::DeviceOptimizerStep& device, float* params, const float* grads) override;
  float set_slot_hyper(int64_t b, const SlotHyper& h) override;
  std::unique_ptr<Optimizer> with_models(ParamTable table,
                                         std::span<const int64_t> keep) const override;

  AdamHyper hyper_;
  WeightDecay decay_;
  std::vector<AdamStepConstants> constants_;  // [B], for the current step
};

// torch.optim.AdamW; PyTorch's default weight_decay there is 0.01.
class FusedAdamW : public FusedAdam {
 public:
  FusedAdamW(ParamTable table, const AdamHyper& hyper)
      : FusedAdam(std::move(table), hyper, WeightDecay::kDecoupled) {}
};

namespace ref {
// One model alone: the specification, in double, state kept in double.
// The weight decay is per call: a tensor exempt from decay is stepped with weight_decay = 0.
struct AdamState {
  std::vector<double> m, v;
  int64_t step = 0;
};
void adam_step(AdamState& s, float* params, const float* grads, int64_t n, double lr, double beta1,
               double beta2, double eps, double weight_decay, WeightDecay decay);
}  // namespace ref

}  // namespace hfta
