#include "optim/optimizer.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/device_memory.h"
#include "core/parallel.h"

namespace hfta {

int64_t ParamTable::per_model_numel() const {
  int64_t n = 0;
  for (const auto& s : segments) n += s.per_model_numel;
  return n;
}

void ParamTable::check() const {
  HFTA_CHECK(B >= 1, "the parameter table has B={} models, expected at least 1", B);
  HFTA_CHECK(!segments.empty(), "the parameter table has no parameters to optimize");
  std::vector<ParamSegment> sorted = segments;
  std::sort(sorted.begin(), sorted.end(),
            [](const ParamSegment& a, const ParamSegment& b) { return a.offset < b.offset; });
  int64_t end = 0;
  for (const auto& s : sorted) {
    HFTA_CHECK(s.per_model_numel >= 1 && s.offset >= 0,
               "parameter segment at offset {} with {} floats per model is invalid: expected "
               "offset >= 0 and at least 1 float per model",
               s.offset, s.per_model_numel);
    HFTA_CHECK(s.offset >= end,
               "parameter segment at offset {} overlaps the previous one, which ends at {}: each "
               "float of the arena belongs to at most one parameter",
               s.offset, end);
    end = s.offset + B * s.per_model_numel;
  }
  HFTA_CHECK(end <= total_floats, "parameter segments reach float {} but the arena holds {} floats",
             end, total_floats);
}

ParamTable ParamTable::from_views(const float* arena_base, int64_t total_floats,
                                  std::span<const TensorView> params,
                                  std::span<const uint8_t> decay) {
  HFTA_CHECK(!params.empty(), "the parameter table has no parameters to optimize");
  HFTA_CHECK(decay.empty() || decay.size() == params.size(),
             "the parameter table got {} weight decay flags for {} parameters: give one per "
             "parameter, or none (every parameter decays)",
             decay.size(), params.size());
  HFTA_CHECK(params[0].shape.rank() >= 1, "parameter 0 has shape {}: expected [B, ...]",
             params[0].shape.str());
  ParamTable table;
  table.B = params[0].shape[0];
  table.total_floats = total_floats;
  table.device = params[0].device;
  for (size_t i = 0; i < params.size(); ++i) {
    const TensorView& p = params[i];
    HFTA_CHECK(p.data != nullptr, "parameter {} has no memory: carve it from a real arena", i);
    HFTA_CHECK(p.shape.rank() >= 1 && p.shape[0] == table.B,
               "parameter {} has shape {} but parameter 0 has B={}: every parameter is [B, ...]", i,
               p.shape.str(), table.B);
    HFTA_CHECK(p.device == table.device, "parameter {} is on another device than parameter 0", i);
    HFTA_CHECK(p.data >= arena_base && p.data + p.numel() <= arena_base + total_floats,
               "parameter {} (shape {}) lies outside the parameter arena of {} floats", i,
               p.shape.str(), total_floats);
    table.segments.push_back(
        {p.data - arena_base, p.shape.numel_from(1), decay.empty() || decay[i] != 0});
  }
  table.check();
  return table;
}

ParamTable ParamTable::from_arena(const Arena& arena, std::span<const TensorView> params,
                                  std::span<const uint8_t> decay) {
  HFTA_CHECK(!arena.counting(), "the parameter arena is a counting arena with no memory");
  ParamTable table = from_views(reinterpret_cast<const float*>(arena.data()),
                                static_cast<int64_t>(arena.used() / sizeof(float)), params, decay);
  HFTA_CHECK(table.device == arena.device(), "the parameters are not on their arena's device");
  return table;
}

static void check_lr(std::span<const float> lr) {
  check_per_model(
      lr, "lr", [](float x) { return x >= 0.0f && std::isfinite(x); }, "a finite lr >= 0");
}

Optimizer::Optimizer(ParamTable table) : table_(std::move(table)) {
  table_.check();
  const int64_t B = table_.B;
  lr_.assign(B, 0.0f);
  steps_.assign(B, 0);
  skips_.assign(B, 0);
  report_.skipped.assign(B, 0);
  for (const auto& s : table_.segments)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < s.per_model_numel; i += kChunkFloats)
        chunks_.push_back({s.offset + b * s.per_model_numel + i,
                           std::min(kChunkFloats, s.per_model_numel - i), b, s.decay});
  chunk_nonfinite_.assign(chunks_.size(), 0);
  chunks_of_model_.resize(static_cast<size_t>(B));
  for (size_t i = 0; i < chunks_.size(); ++i)
    chunks_of_model_[static_cast<size_t>(chunks_[i].b)].push_back(static_cast<int64_t>(i));
  if (table_.device != Device::kCpu) device_step_ = make_device_step(table_);
}

void Optimizer::add_state_buffers(int count) {
  for (int i = 0; i < count; ++i)
    state_.emplace_back(static_cast<size_t>(table_.total_floats) * sizeof(float),
                        fmt::format("{} state", name()), table_.device);
}

// Exponent bits all ones: Inf or NaN. Integer tests, so the loop vectorizes under strict FP.
static bool has_nonfinite(const float* x, int64_t n) {
  uint32_t found = 0;
  for (int64_t i = 0; i < n; ++i)
    found |= (std::bit_cast<uint32_t>(x[i]) & 0x7f800000u) == 0x7f800000u;
  return found != 0;
}

void Optimizer::find_nonfinite_models(const float* grads) {
  parallel_for(static_cast<int64_t>(chunks_.size()), [&](int64_t i) {
    chunk_nonfinite_[i] = has_nonfinite(grads + chunks_[i].begin, chunks_[i].size);
  });
  std::fill(report_.skipped.begin(), report_.skipped.end(), 0);
  for (size_t i = 0; i < chunks_.size(); ++i)
    if (chunk_nonfinite_[i]) report_.skipped[chunks_[i].b] = 1;
  report_.num_skipped = std::count(report_.skipped.begin(), report_.skipped.end(), 1);
}

const StepReport& Optimizer::step(float* params, const float* grads) {
  HFTA_CHECK(params != nullptr && grads != nullptr, "{} step needs parameters and gradients",
             name());
  if (device_step_) return step_on_device(params, grads);
  find_nonfinite_models(grads);
  count_steps();
  if (report_.num_skipped == B()) return report_;
  for (int64_t b = 0; b < B(); ++b)
    if (!report_.skipped[b]) begin_model_step(b);
  parallel_for(static_cast<int64_t>(chunks_.size()), [&](int64_t i) {
    if (!report_.skipped[chunks_[i].b]) update_chunk(chunks_[i], params, grads);
  });
  return report_;
}

void Optimizer::count_steps() {
  for (int64_t b = 0; b < B(); ++b) {
    if (report_.skipped[b])
      ++skips_[b];
    else
      ++steps_[b];
  }
}

const StepReport& Optimizer::step(const Arena& params, const Arena& grads) {
  HFTA_CHECK(params.device() == table_.device && grads.device() == table_.device,
             "{} step: the parameter and gradient arenas must be on the parameter table's device",
             name());
  const size_t bytes = static_cast<size_t>(table_.total_floats) * sizeof(float);
  HFTA_CHECK(params.capacity() >= bytes && grads.capacity() >= bytes,
             "{} step: the parameter arena ({} bytes) and gradient arena ({} bytes) must each "
             "hold the {} bytes of the parameter table",
             name(), params.capacity(), grads.capacity(), bytes);
  return step(reinterpret_cast<float*>(params.data()),
              reinterpret_cast<const float*>(grads.data()));
}

void Optimizer::step_models(float* params, const float* grads, int64_t first, int64_t count) {
  HFTA_CHECK(params != nullptr && grads != nullptr, "{} step needs parameters and gradients",
             name());
  HFTA_CHECK(first >= 0 && count >= 1 && first + count <= B(),
             "{} step of models [{}, {}): the array has models 0..{}", name(), first, first + count,
             B() - 1);
  HFTA_CHECK(!device_step_, "{}: a device array steps all its models at once (step())", name());
  // Only models [first, first + count) are read or written, here and in update_chunk, so
  // workers with disjoint blocks never touch the same element.
  for (int64_t b = first; b < first + count; ++b) {
    const std::vector<int64_t>& chunks = chunks_of_model_[static_cast<size_t>(b)];
    bool nonfinite = false;
    for (int64_t i : chunks) nonfinite |= has_nonfinite(grads + chunks_[i].begin, chunks_[i].size);
    report_.skipped[b] = nonfinite ? 1 : 0;
    if (nonfinite) {
      ++skips_[b];
      continue;
    }
    ++steps_[b];
    begin_model_step(b);
    parallel_for(static_cast<int64_t>(chunks.size()),
                 [&](int64_t k) { update_chunk(chunks_[chunks[k]], params, grads); });
  }
}

const StepReport& Optimizer::finish_model_steps() {
  report_.num_skipped = std::count(report_.skipped.begin(), report_.skipped.end(), 1);
  return report_;
}

void Optimizer::reset_model(int64_t b) {
  HFTA_CHECK(b >= 0 && b < B(), "cannot reset model {}: the array has models 0..{}", b, B() - 1);
  steps_[b] = 0;
  for (int i = 0; i < num_state_buffers(); ++i)
    for (const auto& s : table_.segments)
      zero_memory(table_.device, state_buffer(i) + s.offset + b * s.per_model_numel,
                  static_cast<size_t>(s.per_model_numel) * sizeof(float));
}

void Optimizer::set_steps(std::span<const int64_t> steps) {
  HFTA_CHECK(static_cast<int64_t>(steps.size()) == B(),
             "set_steps got {} step counts but the array has {} models: give one per model",
             steps.size(), B());
  check_per_model(
      steps, "step count", [](int64_t t) { return t >= 0; }, "a step count >= 0");
  std::copy(steps.begin(), steps.end(), steps_.begin());
}

void Optimizer::set_lr(std::span<const float> lr) {
  HFTA_CHECK(static_cast<int64_t>(lr.size()) == B(),
             "set_lr got {} learning rates but the array has {} models: give one per model",
             lr.size(), B());
  check_lr(lr);
  std::copy(lr.begin(), lr.end(), lr_.begin());
}

void Optimizer::reset_slot(int64_t b, const SlotHyper& h) {
  HFTA_CHECK(b >= 0 && b < B(), "{}: cannot refill slot {}: the array has slots 0..{}", name(), b,
             B() - 1);
  const float base_lr = set_slot_hyper(b, h);
  reset_model(b);
  skips_[b] = 0;
  lr_[b] = base_lr;
}

std::unique_ptr<Optimizer> Optimizer::compact(ParamTable table,
                                              std::span<const int64_t> keep) const {
  check_keep(keep, B(), name());
  HFTA_CHECK(table.B == static_cast<int64_t>(keep.size()),
             "{}: compacting to {} models over a parameter table of {}", name(), keep.size(),
             table.B);
  HFTA_CHECK(table.segments.size() == table_.segments.size(),
             "{}: the compacted table has {} parameters, this optimizer {}: build it from the "
             "compacted model",
             name(), table.segments.size(), table_.segments.size());
  for (size_t i = 0; i < table.segments.size(); ++i)
    HFTA_CHECK(table.segments[i].per_model_numel == table_.segments[i].per_model_numel &&
                   table.segments[i].decay == table_.segments[i].decay,
               "{}: parameter {} of the compacted table has {} floats per model (decay {}), "
               "expected {} (decay {})",
               name(), i, table.segments[i].per_model_numel, table.segments[i].decay,
               table_.segments[i].per_model_numel, table_.segments[i].decay);
  std::unique_ptr<Optimizer> out = with_models(std::move(table), keep);
  HFTA_CHECK(out->num_state_buffers() == num_state_buffers(),
             "internal: {} compacted to {} state buffers, expected {}", name(),
             out->num_state_buffers(), num_state_buffers());
  for (size_t i = 0; i < keep.size(); ++i) {
    const int64_t from = keep[i], to = static_cast<int64_t>(i);
    out->lr_[to] = lr_[from];
    out->steps_[to] = steps_[from];
    out->skips_[to] = skips_[from];
    for (int k = 0; k < num_state_buffers(); ++k)
      for (size_t s = 0; s < table_.segments.size(); ++s) {
        const ParamSegment &src = table_.segments[s], &dst = out->table_.segments[s];
        copy_memory(out->state_buffer(k) + dst.offset + to * dst.per_model_numel,
                    out->table_.device, state_buffer(k) + src.offset + from * src.per_model_numel,
                    table_.device, static_cast<size_t>(src.per_model_numel) * sizeof(float));
      }
  }
  return out;
}

}  // namespace hfta
