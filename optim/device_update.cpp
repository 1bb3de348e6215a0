// The fused optimizers' step on a CUDA device (Optimizer::step for a kCuda parameter table): the
// host keeps the step counts and computes each model's constants with the CPU optimizers' own
// begin_model_step, the device flags NaN/Inf models and updates every chunk in one launch
// (optim/cuda/fused_step.h). In a build without the CUDA backend a device table raises.
#include <algorithm>

#include "optim/adadelta.h"
#include "optim/adam.h"
#include "optim/optimizer.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"

#if HFTA_WITH_CUDA
#include "optim/cuda/fused_step.h"
#endif

namespace hfta {

#if HFTA_WITH_CUDA

Optimizer::DeviceStepPtr Optimizer::make_device_step(const ParamTable& table) {
  return DeviceStepPtr(new cuda::DeviceOptimizerStep(table));
}

void Optimizer::DeviceStepDeleter::operator()(cuda::DeviceOptimizerStep* p) const { delete p; }

const StepReport& Optimizer::step_on_device(float* params, const float* grads) {
  const std::vector<uint8_t> flags = device_step_->find_nonfinite_models(grads);
  std::copy(flags.begin(), flags.end(), report_.skipped.begin());
  report_.num_skipped = std::count(report_.skipped.begin(), report_.skipped.end(), 1);
  count_steps();
  if (report_.num_skipped == B()) return report_;
  for (int64_t b = 0; b < B(); ++b)
    if (!report_.skipped[b]) begin_model_step(b);
  device_update(*device_step_, params, grads);
  return report_;
}

void Optimizer::clip_grad_norm_on_device(std::span<const float> max_norm, float* grads) {
  HFTA_CHECK(device_step_, "{}: clip_grad_norm_on_device needs a device parameter table", name());
  device_step_->clip_grad_norm(max_norm, grads);
}

void FusedAdam::device_update(cuda::DeviceOptimizerStep& device, float* params,
                              const float* grads) {
  device.adam_step(constants_, params, grads, exp_avg(), exp_avg_sq());
}

void FusedSgd::device_update(cuda::DeviceOptimizerStep& device, float* params, const float* grads) {
  device.sgd_step(constants_, params, grads, momentum_buffer());
}

void FusedRmsprop::device_update(cuda::DeviceOptimizerStep& device, float* params,
                                 const float* grads) {
  device.rmsprop_step(constants_, params, grads, square_avg(), grad_avg(), momentum_buffer());
}

void FusedAdadelta::device_update(cuda::DeviceOptimizerStep& device, float* params,
                                  const float* grads) {
  device.adadelta_step(constants_, params, grads, square_avg(), acc_delta());
}

#else

Optimizer::DeviceStepPtr Optimizer::make_device_step(const ParamTable&) {
  fail(
      "the parameters are in CUDA device memory, but this build has no CUDA backend: configure "
      "with -DHFTA_CUDA=ON, or keep the model on the CPU");
}

// Never called with an object: make_device_step raises before one exists.
void Optimizer::DeviceStepDeleter::operator()(cuda::DeviceOptimizerStep*) const {}

const StepReport& Optimizer::step_on_device(float*, const float*) { return report_; }

void Optimizer::clip_grad_norm_on_device(std::span<const float>, float*) {
  fail("{}: clip_grad_norm_on_device needs a device parameter table", name());
}

void FusedAdam::device_update(cuda::DeviceOptimizerStep&, float*, const float*) {}
void FusedSgd::device_update(cuda::DeviceOptimizerStep&, float*, const float*) {}
void FusedRmsprop::device_update(cuda::DeviceOptimizerStep&, float*, const float*) {}
void FusedAdadelta::device_update(cuda::DeviceOptimizerStep&, float*, const float*) {}

#endif

void Optimizer::device_update(cuda::DeviceOptimizerStep&, float*, const float*) {
  fail("{} has no step on a CUDA device yet: keep the model on the CPU", name());
}

}  // namespace hfta
