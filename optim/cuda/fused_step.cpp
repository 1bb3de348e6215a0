#include "optim/cuda/fused_step.h"

#include <algorithm>
#include <limits>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "optim/clip.h"

namespace hfta::cuda {

namespace {

// Throws unless `ptr` is device (or managed) memory: a host arena passed here would fault on the
// device, far from the call.
void require_device_pointer(const void* ptr, const char* what, const char* op) {
  HFTA_CHECK(ptr != nullptr, "{}: {} is null: pass the device arena's memory", op, what);
  cudaPointerAttributes attributes{};
  HFTA_CUDA_CHECK(cudaPointerGetAttributes(&attributes, ptr));
  HFTA_CHECK(attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged,
             "{}: {} is not device memory: allocate the arena with cuda::DeviceArena, or step "
             "host arenas with the CPU optimizer",
             op, what);
}

template <typename Constants>
void require_one_per_model(std::span<const Constants> constants, int64_t B, const char* op) {
  HFTA_CHECK(static_cast<int64_t>(constants.size()) == B,
             "{}: got step constants for {} models but the parameter table has {}: give one per "
             "model (a skipped model's are not read)",
             op, constants.size(), B);
}

// A state buffer that only some models use (SGD's momentum, RMSprop's gradient average and
// momentum): required to be device memory when some model's constants set `used`, else it may be
// null (and, when given, must still be device memory).
template <typename Constants>
void require_state_if_used(std::span<const Constants> constants, bool Constants::*used,
                           const void* buffer, const char* what_used, const char* what,
                           const char* op) {
  const bool any =
      std::any_of(constants.begin(), constants.end(), [&](const Constants& k) { return k.*used; });
  if (any || buffer != nullptr) require_device_pointer(buffer, any ? what_used : what, op);
}

// Copies a step's B constants into device memory on the stream. cudaMemcpyAsync from pageable
// memory stages the source before it returns, so `constants` may change at once, and the copy is
// ordered on the stream after the previous step's kernel, which may still be reading the old
// ones. A pinned staging buffer would save the staging copy but needs an event per step to know
// when it may be rewritten: not worth it for B * 36 bytes until measured on a GPU.
template <typename Constants>
void upload(std::span<const Constants> constants, Constants* device) {
  HFTA_CUDA_CHECK(cudaMemcpyAsync(device, constants.data(), constants.size_bytes(),
                                  cudaMemcpyHostToDevice, stream()));
}

}  // namespace

std::vector<kernels::OptimChunk> device_chunk_table(const ParamTable& table, int64_t chunk_floats) {
  table.check();
  HFTA_CHECK(chunk_floats >= 1, "device chunk table: chunk_floats = {}, expected at least 1",
             chunk_floats);
  HFTA_CHECK(table.B <= std::numeric_limits<int32_t>::max(),
             "device chunk table: B = {} models is beyond the kernels' 32-bit model index",
             table.B);
  std::vector<kernels::OptimChunk> chunks;
  for (const ParamSegment& s : table.segments)
    for (int64_t b = 0; b < table.B; ++b)
      for (int64_t i = 0; i < s.per_model_numel; i += chunk_floats)
        chunks.push_back({.begin = s.offset + b * s.per_model_numel + i,
                          .size = std::min(chunk_floats, s.per_model_numel - i),
                          .model = static_cast<int32_t>(b),
                          .decay = s.decay ? 1 : 0});
  return chunks;
}

DeviceOptimizerStep::DeviceOptimizerStep(ParamTable table)
    : table_(std::move(table)), chunks_(device_chunk_table(table_)) {
  const size_t B = static_cast<size_t>(table_.B);
  const size_t chunk_bytes = chunks_.size() * sizeof(kernels::OptimChunk);
  memory_ = DeviceArena(
      DeviceArena::align_up(chunk_bytes) + DeviceArena::align_up(B * sizeof(AdamStepConstants)) +
          DeviceArena::align_up(B * sizeof(SgdStepConstants)) +
          DeviceArena::align_up(B * sizeof(RmspropStepConstants)) +
          DeviceArena::align_up(B * sizeof(AdadeltaStepConstants)) + DeviceArena::align_up(B) +
          DeviceArena::align_up(chunks_.size() * sizeof(double)) +
          3 * DeviceArena::align_up(B * sizeof(float)),
      "device optimizer tables");
  const int64_t num_chunks = static_cast<int64_t>(chunks_.size());
  chunks_device_ = memory_.carve<kernels::OptimChunk>(Shape{num_chunks}).data;
  adam_constants_device_ = memory_.carve<AdamStepConstants>(Shape{table_.B}).data;
  sgd_constants_device_ = memory_.carve<SgdStepConstants>(Shape{table_.B}).data;
  rmsprop_constants_device_ = memory_.carve<RmspropStepConstants>(Shape{table_.B}).data;
  adadelta_constants_device_ = memory_.carve<AdadeltaStepConstants>(Shape{table_.B}).data;
  skip_device_ = memory_.carve<uint8_t>(Shape{table_.B}).data;
  clip_partials_device_ = memory_.carve<double>(Shape{num_chunks}).data;
  clip_max_norm_device_ = memory_.carve<float>(Shape{table_.B}).data;
  clip_norms_device_ = memory_.carve<float>(Shape{table_.B}).data;
  clip_coefs_device_ = memory_.carve<float>(Shape{table_.B}).data;
  // On this thread's stream and waited for (a cudaMemcpy from pageable memory may return before
  // the transfer ends, on the legacy stream the step's kernels do not wait for).
  device_copy(chunks_device_, chunks_.data(), chunk_bytes);
}

std::vector<uint8_t> DeviceOptimizerStep::find_nonfinite_models(const float* grads) {
  require_device_pointer(grads, "grads", "device optimizer: find_nonfinite_models");
  check(kernels::flag_nonfinite_models(chunks_device_, static_cast<int64_t>(chunks_.size()),
                                       table_.B, grads, skip_device_, stream()),
        "flag_nonfinite_models kernel launch");
  std::vector<uint8_t> skipped(static_cast<size_t>(table_.B));
  HFTA_CUDA_CHECK(cudaMemcpyAsync(skipped.data(), skip_device_, skipped.size(),
                                  cudaMemcpyDeviceToHost, stream()));
  synchronize();
  return skipped;
}

void DeviceOptimizerStep::adam_step(std::span<const AdamStepConstants> constants, float* params,
                                    const float* grads, float* exp_avg, float* exp_avg_sq) {
  const char* op = "device Adam step";
  require_one_per_model(constants, table_.B, op);
  require_device_pointer(params, "params", op);
  require_device_pointer(grads, "grads", op);
  require_device_pointer(exp_avg, "exp_avg (m)", op);
  require_device_pointer(exp_avg_sq, "exp_avg_sq (v)", op);
  upload(constants, adam_constants_device_);
  check(kernels::adam_step(chunks_device_, static_cast<int64_t>(chunks_.size()),
                           adam_constants_device_, skip_device_, params, grads, exp_avg, exp_avg_sq,
                           stream()),
        "adam_step kernel launch");
}

void DeviceOptimizerStep::sgd_step(std::span<const SgdStepConstants> constants, float* params,
                                   const float* grads, float* momentum_buffer) {
  const char* op = "device SGD step";
  require_one_per_model(constants, table_.B, op);
  require_device_pointer(params, "params", op);
  require_device_pointer(grads, "grads", op);
  require_state_if_used(constants, &SgdStepConstants::momentum, momentum_buffer,
                        "momentum_buffer (a model has momentum)", "momentum_buffer", op);
  upload(constants, sgd_constants_device_);
  check(
      kernels::sgd_step(chunks_device_, static_cast<int64_t>(chunks_.size()), sgd_constants_device_,
                        skip_device_, params, grads, momentum_buffer, stream()),
      "sgd_step kernel launch");
}

void DeviceOptimizerStep::rmsprop_step(std::span<const RmspropStepConstants> constants,
                                       float* params, const float* grads, float* square_avg,
                                       float* grad_avg, float* momentum_buffer) {
  const char* op = "device RMSprop step";
  require_one_per_model(constants, table_.B, op);
  require_device_pointer(params, "params", op);
  require_device_pointer(grads, "grads", op);
  require_device_pointer(square_avg, "square_avg", op);
  require_state_if_used(constants, &RmspropStepConstants::centered, grad_avg,
                        "grad_avg (a model is centered)", "grad_avg", op);
  require_state_if_used(constants, &RmspropStepConstants::use_momentum, momentum_buffer,
                        "momentum_buffer (a model has momentum)", "momentum_buffer", op);
  upload(constants, rmsprop_constants_device_);
  check(kernels::rmsprop_step(chunks_device_, static_cast<int64_t>(chunks_.size()),
                              rmsprop_constants_device_, skip_device_, params, grads, square_avg,
                              grad_avg, momentum_buffer, stream()),
        "rmsprop_step kernel launch");
}

void DeviceOptimizerStep::adadelta_step(std::span<const AdadeltaStepConstants> constants,
                                        float* params, const float* grads, float* square_avg,
                                        float* acc_delta) {
  const char* op = "device Adadelta step";
  require_one_per_model(constants, table_.B, op);
  require_device_pointer(params, "params", op);
  require_device_pointer(grads, "grads", op);
  require_device_pointer(square_avg, "square_avg", op);
  require_device_pointer(acc_delta, "acc_delta", op);
  upload(constants, adadelta_constants_device_);
  check(kernels::adadelta_step(chunks_device_, static_cast<int64_t>(chunks_.size()),
                               adadelta_constants_device_, skip_device_, params, grads, square_avg,
                               acc_delta, stream()),
        "adadelta_step kernel launch");
}

void DeviceOptimizerStep::clip_grad_norm(std::span<const float> max_norm, float* grads,
                                         std::span<float> norms) {
  const char* op = "device gradient clipping";
  const int64_t B = table_.B;
  check_clip_limits(max_norm, B, norms);
  require_device_pointer(grads, "grads", op);
  std::vector<float> limits(static_cast<size_t>(B), max_norm[0]);
  if (max_norm.size() > 1) limits.assign(max_norm.begin(), max_norm.end());
  upload(std::span<const float>(limits), clip_max_norm_device_);
  check(kernels::clip_grad_norms(chunks_device_, static_cast<int64_t>(chunks_.size()), B,
                                 clip_max_norm_device_, grads, clip_partials_device_,
                                 clip_norms_device_, clip_coefs_device_, stream()),
        "clip_grad_norms kernel launch");
  if (norms.empty()) return;
  HFTA_CUDA_CHECK(cudaMemcpyAsync(norms.data(), clip_norms_device_, norms.size_bytes(),
                                  cudaMemcpyDeviceToHost, stream()));
  synchronize();
}

}  // namespace hfta::cuda
