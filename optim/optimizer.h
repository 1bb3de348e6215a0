// Fused optimizers: one update pass over the whole [B, ...] parameter arena per step.
//
//   B           models in the array, b one model's index
//   segment     one parameter tensor [B, n]: floats [offset, offset + B*n) of the parameter arena,
//               model b's slice at offset + b*n (n = per_model_numel)
//   chunk       at most kChunkFloats floats of one model's slice of one segment: the unit of
//               parallel work, so the model index b (and its hyperparameters) is fixed per chunk
// The gradient arena and every state arena (Adam's m and v, SGD's momentum buffer) mirror the
// parameter arena: a parameter, its gradient and its state sit at the same float offset.
//
// A step is two passes: a read-only pass that flags the models whose gradients hold NaN or Inf,
// then the update pass, which leaves flagged models untouched (parameters, state, step count).
// Hyperparameters and step counts are per model, so model b updates exactly as it would alone.
//
// Weight decay applies only to segments with decay = true: an exempt segment (a norm layer's scale
// and shift, a bias) updates as with weight_decay = 0. Chunks carry their segment's flag, so the
// choice is made once per chunk, never per element.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "optim/slots.h"

namespace hfta {

namespace cuda {
class DeviceOptimizerStep;  // optim/cuda/fused_step.h, in a build with the CUDA backend
}

struct ParamSegment {
  int64_t offset = 0;           // in floats from the arena base
  int64_t per_model_numel = 0;  // n: the segment holds [B, n]
  bool decay = true;            // false: exempt from weight decay (e.g. norm parameters, biases)
};

struct ParamTable {
  int64_t B = 1;
  std::vector<ParamSegment> segments;
  int64_t total_floats = 0;  // size of the parameter arena (and of each mirrored arena)
  // Where the arenas live: an optimizer over a kCuda table keeps its state in device memory and
  // steps with the CUDA backend's kernels (optim/cuda/fused_step.h).
  Device device = Device::kCpu;

  int64_t per_model_numel() const;
  // Throws hfta::Error unless B >= 1 and the segments are non-empty, disjoint and inside the arena.
  void check() const;

  // The table of tensors [B, ...] carved from one arena that starts at `arena_base` and holds
  // `total_floats` floats. Offsets are the tensors' distances from the base. `decay` is empty
  // (every parameter decays) or holds one flag per parameter, 0 exempting it from weight decay.
  static ParamTable from_views(const float* arena_base, int64_t total_floats,
                               std::span<const TensorView> params,
                               std::span<const uint8_t> decay = {});
  // Same, for an arena: every float carved so far belongs to the table's address range, and the
  // table is on the arena's device.
  static ParamTable from_arena(const Arena& arena, std::span<const TensorView> params,
                               std::span<const uint8_t> decay = {});
};

// A user's list for one hyperparameter, expanded to one value per model: a single value is shared
// by all B models, B values are used as given; any other length throws hfta::Error naming `name`
// (write it as the user typed it, e.g. "--beta1").
template <typename T>
std::vector<T> expand_per_model(std::span<const T> values, int64_t B, std::string_view name) {
  if (values.size() == 1) return std::vector<T>(static_cast<size_t>(B), values[0]);
  HFTA_CHECK(static_cast<int64_t>(values.size()) == B,
             "{} has {} values but the array has {} model{}: give one value (shared) or {} (one "
             "per model)",
             name, values.size(), B, B == 1 ? "" : "s", B);
  return std::vector<T>(values.begin(), values.end());
}

template <typename T>
std::vector<T> expand_per_model(const std::vector<T>& values, int64_t B, std::string_view name) {
  return expand_per_model(std::span<const T>(values), B, name);
}

// Throws hfta::Error naming the model when `ok(values[b])` fails: "model 2: beta1 = 1 is out of
// range: expected 0 <= beta1 < 1".
template <typename T, typename Ok>
void check_per_model(std::span<const T> values, std::string_view name, Ok ok,
                     std::string_view expected) {
  for (size_t b = 0; b < values.size(); ++b)
    HFTA_CHECK(ok(values[b]), "model {}: {} = {} is out of range: expected {}", b, name, values[b],
               expected);
}

template <typename T, typename Ok>
void check_per_model(const std::vector<T>& values, std::string_view name, Ok ok,
                     std::string_view expected) {
  check_per_model(std::span<const T>(values), name, ok, expected);
}

// What one step did. `skipped[b]` is 1 where model b's gradient held NaN or Inf: that model was
// not updated.
struct StepReport {
  std::vector<uint8_t> skipped;
  int64_t num_skipped = 0;
  bool any_skipped() const { return num_skipped > 0; }
};

class Optimizer {
 public:
  static constexpr int64_t kChunkFloats = 16384;

  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One step over the whole arenas (each holds table().total_floats floats, on the table's
  // device). The report stays valid until the next step. On a device: the NaN/Inf flags are
  // copied back (B bytes, waiting for the stream), then one kernel updates every chunk.
  const StepReport& step(float* params, const float* grads);
  const StepReport& step(const Arena& params, const Arena& grads);

  // The same step in pieces, for execution plans whose workers each own a block of models: each
  // worker calls step_models for its block right after that block's backward, while its gradients
  // are still in cache, and the caller then calls finish_model_steps once. Blocks must be disjoint
  // and cover every model once per step; calls for disjoint blocks may run on different threads at
  // the same time. Each model updates exactly as in step(). Host arenas only.
  void step_models(float* params, const float* grads, int64_t first, int64_t count);
  const StepReport& finish_model_steps();
  // Per-model gradient clipping (optim/clip.h's rule: model b's gradients scaled by its own norm)
  // of a device table's gradient arena, on the device, in stream order before the next step. The
  // host clips views with clip_grad_norm_per_model; a host table raises here.
  void clip_grad_norm_on_device(std::span<const float> max_norm, float* grads);
  // Whether model b's last step (step() or step_models()) was skipped for NaN/Inf gradients; a
  // worker may read its own models' while others step theirs.
  bool skipped_last_step(int64_t b) const { return report_.skipped[static_cast<size_t>(b)] != 0; }

  // Forgets model b's state and step count (a fresh optimizer for that model); skip counts stay.
  void reset_model(int64_t b);
  // Restores each model's step count (B values >= 0), with the state buffers, from a checkpoint.
  void set_steps(std::span<const int64_t> steps);
  // The learning rate of each model from now on (B values, each >= 0): an LR schedule calls this
  // before every step. The base rates it started from stay in the hyperparameters.
  void set_lr(std::span<const float> lr);

  // ---- Slots (models/slots.h) -----------------------------------------------------------
  // Slot b takes a new model: its hyperparameters become `h`'s (empty fields keep the slot's),
  // its state, step count and skip count are zeroed and its current lr is its new base lr, so an
  // LR schedule restarts for it from t = 0. Everything is checked first: on error (slot out of
  // range, a value out of range, a hyperparameter this optimizer does not read) nothing changes.
  void reset_slot(int64_t b, const SlotHyper& h);
  // The same optimizer for the B' = keep.size() models keep[0], keep[1], ... of this one over
  // `table` (the compacted model's parameters: the same tensors for B' models): slot i is slot
  // keep[i] bit for bit (hyperparameters, current lr, state, step and skip counts). Throws
  // hfta::Error for a bad keep list or a table of other tensors.
  std::unique_ptr<Optimizer> compact(ParamTable table, std::span<const int64_t> keep) const;

  std::span<const float> lr() const { return lr_; }
  int64_t B() const { return table_.B; }
  const ParamTable& table() const { return table_; }
  // Updates applied to each model (the t of bias correction), and steps skipped for NaN/Inf.
  std::span<const int64_t> steps() const { return steps_; }
  std::span<const int64_t> skip_counts() const { return skips_; }
  // State buffers (Adam: m then v; SGD with momentum: the buffer), each mirroring the parameter
  // arena, for checkpoints and model extraction.
  int num_state_buffers() const { return static_cast<int>(state_.size()); }
  float* state_buffer(int i) { return reinterpret_cast<float*>(state_.at(i).data()); }
  const float* state_buffer(int i) const {
    return reinterpret_cast<const float*>(state_.at(i).data());
  }
  virtual std::string_view name() const = 0;

 protected:
  struct Chunk {
    int64_t begin;  // first float, in the arena
    int64_t size;
    int64_t b;
    bool decay;  // the segment's flag: false means weight decay 0 for this chunk
  };

  // Derived constructors set lr_ (B checked values) and add their state buffers.
  explicit Optimizer(ParamTable table);
  // A device table's step after begin_model_step has run for every updating model: one launch
  // of the optimizer's kernel over the chunk table (optim/device_update.cpp). The base raises.
  virtual void device_update(cuda::DeviceOptimizerStep& device, float* params, const float* grads);
  void add_state_buffers(int count);
  // Called once per step and updated model, after its step count advanced: compute the constants
  // of model b that update_chunk reads (bias corrections, first-step flags, ...).
  virtual void begin_model_step(int64_t b) = 0;
  // The update of one chunk; must be branch-free per element.
  virtual void update_chunk(const Chunk& c, float* params, const float* grads) = 0;
  // reset_slot's hyperparameters: checks `h` for model b (throwing before any change), applies
  // it, adds (zeroed) any state buffer it needs that the array lacked; returns b's base lr.
  virtual float set_slot_hyper(int64_t b, const SlotHyper& h) = 0;
  // compact's optimizer: the same kind over `table`, the hyperparameters of models `keep`, and
  // the same state buffers as this one (count and roles), zeroed.
  virtual std::unique_ptr<Optimizer> with_models(ParamTable table,
                                                 std::span<const int64_t> keep) const = 0;
  // values[keep[0]], values[keep[1]], ...
  template <typename T>
  static std::vector<T> pick(const std::vector<T>& values, std::span<const int64_t> keep) {
    std::vector<T> out;
    for (int64_t b : keep) out.push_back(values[static_cast<size_t>(b)]);
    return out;
  }

  ParamTable table_;
  std::vector<float> lr_;
  std::vector<int64_t> steps_, skips_;
  std::vector<Arena> state_;

 private:
  void find_nonfinite_models(const float* grads);
  const StepReport& step_on_device(float* params, const float* grads);
  // Counts each model's step or skip from report_.skipped.
  void count_steps();

  struct DeviceStepDeleter {
    void operator()(cuda::DeviceOptimizerStep* p) const;
  };
  using DeviceStepPtr = std::unique_ptr<cuda::DeviceOptimizerStep, DeviceStepDeleter>;
  static DeviceStepPtr make_device_step(const ParamTable& table);
  DeviceStepPtr device_step_;  // kCuda tables

  std::vector<Chunk> chunks_;
  std::vector<std::vector<int64_t>> chunks_of_model_;  // indices into chunks_, per model
  std::vector<uint8_t> chunk_nonfinite_;
  StepReport report_;
};

}  // namespace hfta
