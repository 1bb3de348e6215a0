// Fused SGD over [B, ...] parameters, per-model hyperparameters, as torch.optim.SGD:
//   d = g + wd * p
//   with momentum: buf = d on the model's first step,
//                  else buf = momentum * buf + (1 - dampening) * d
//                  d = nesterov ? d + momentum * buf : buf
//   p -= lr * d
#pragma once

#include <cstdint>
#include <vector>

#include "optim/optimizer.h"
#include "optim/step_constants.h"

namespace hfta {

struct SgdHyper {
  // Each list has one value (shared by all models) or B values (one per model).
  std::vector<float> lr{1e-2f}, momentum{0.0f}, dampening{0.0f}, weight_decay{0.0f};
  std::vector<uint8_t> nesterov{0};

  // Every list with B values; throws hfta::Error naming the list whose length is neither 1 nor B.
  SgdHyper expanded(int64_t B) const;
  // Throws hfta::Error naming the model and value out of range: lr >= 0, momentum >= 0,
  // 0 <= dampening <= 1, weight_decay >= 0; Nesterov needs momentum > 0 and dampening = 0.
  void check() const;
};

// Model b's constants for its step t (its step count including this step) at learning rate `lr`
// (optim/step_constants.h). `hyper` is expanded (B values). FusedSgd's step and the CUDA
// backend's device step (optim/cuda/fused_step.h) both use these.
SgdStepConstants sgd_step_constants(const SgdHyper& hyper, int64_t b, float lr, int64_t t);

class FusedSgd : public Optimizer {
 public:
  // `hyper` lists may have 1 or B values. The momentum buffer exists only when some model has
  // momentum > 0.
  FusedSgd(ParamTable table, const SgdHyper& hyper);

  // Expanded to B values; hyper().lr holds the base rates (the current ones are lr()).
  const SgdHyper& hyper() const { return hyper_; }
  float* momentum_buffer() { return num_state_buffers() > 0 ? state_buffer(0) : nullptr; }
  std::string_view name() const override { return "SGD"; }

 private:
  void begin_model_step(int64_t b) override;
  void update_chunk(const Chunk& c, float* params, const float* grads) override;
  void device_update(cuda::DeviceOptimizerStep& device, float* params, const float* grads) override;
  float set_slot_hyper(int64_t b, const SlotHyper& h) override;
  std::unique_ptr<Optimizer> with_models(ParamTable table,
                                         std::span<const int64_t> keep) const override;

  SgdHyper hyper_;
  std::vector<SgdStepConstants> constants_;  // [B], for the current step
};

namespace ref {
// One model alone: the specification, in double, momentum buffer kept in double.
// The weight decay is per call: a tensor exempt from decay is stepped with weight_decay = 0.
struct SgdState {
  std::vector<double> buf;
  int64_t step = 0;
};
void sgd_step(SgdState& s, float* params, const float* grads, int64_t n, double lr, double momentum,
              double dampening, double weight_decay, bool nesterov);
}  // namespace ref

}  // namespace hfta
