// Slots of a live array (models/slots.h): the Net's side (re-initializing and copying one model's
// state), and refill and compaction for the classifier, language model and masked LM arrays.
#include "models/slots.h"

#include <algorithm>
#include <cstring>

#include "core/device_memory.h"
#include "core/error.h"
#include "models/net_value_info.h"
#include "optim/slots.h"

namespace hfta {

namespace {
void copy_slice(const TensorView& src, int64_t from, const TensorView& dst, int64_t to) {
  copy_view(src.replica(from), dst.replica(to), "copy_model()");
}
}  // namespace

void Net::set_forward_origins(const std::vector<int64_t>& origins) {
  HFTA_CHECK(static_cast<int64_t>(origins.size()) == spec_.B,
             "{} dropout origins for an array of {} models: give one per model", origins.size(),
             spec_.B);
  forward_origins_ = origins;
}

void Net::reinit_model(int64_t b, int64_t model_id) {
  HFTA_CHECK(finalized_ && !spec_.external_state,
             "reinit_model(): the net holds no state of its own (refill the net that owns it)");
  HFTA_CHECK(b >= 0 && b < spec_.B, "cannot refill slot {}: the array has slots 0..{}", b,
             spec_.B - 1);
  spec_.model_ids[static_cast<size_t>(b)] = model_id;
  forward_origins_[static_cast<size_t>(b)] = training_forwards_;
  // A device net's other models stay as they are: the host copy is read first.
  const HostState state = host_state(/*read=*/true);
  initialize_model(b, state);
  write_host_state(state);
  for (const Param& p : params_) {
    const TensorView g = p.grad.replica(b);
    zero_memory(g.device, g.data, static_cast<size_t>(g.numel()) * sizeof(float));
  }
}

void Net::copy_model(const Net& src, int64_t from, int64_t to) {
  HFTA_CHECK(finalized_ && !spec_.external_state && src.finalized_ && !src.spec_.external_state,
             "copy_model(): both nets must hold their own state");
  HFTA_CHECK(from >= 0 && from < src.spec_.B && to >= 0 && to < spec_.B,
             "copy_model(): slot {} of {} into slot {} of {}", from, src.spec_.B, to, spec_.B);
  HFTA_CHECK(src.params_.size() == params_.size() && src.buffers_.size() == buffers_.size(),
             "copy_model(): the nets were recorded from other model code");
  for (size_t i = 0; i < params_.size(); ++i) {
    HFTA_CHECK(src.param_shapes_[i] == param_shapes_[i],
               "copy_model(): parameter {} is {} here and {} in the source", params_[i].name,
               param_shapes_[i].str(), src.param_shapes_[i].str());
    copy_slice(src.params_[i].value, from, params_[i].value, to);
    copy_slice(src.params_[i].grad, from, params_[i].grad, to);
  }
  for (size_t i = 0; i < buffers_.size(); ++i)
    copy_slice(src.buffers_[i].value, from, buffers_[i].value, to);
  spec_.model_ids[static_cast<size_t>(to)] = src.spec_.model_ids[static_cast<size_t>(from)];
  forward_origins_[static_cast<size_t>(to)] = src.forward_origins_[static_cast<size_t>(from)];
}

void Model::reinit_slot(int64_t b, int64_t model_id) {
  HFTA_CHECK(b >= 0 && b < spec_.B, "{}: cannot refill slot {}: the array has slots 0..{}", name_,
             b, spec_.B - 1);
  // The plans' nets take the new id (and dropout origin) from net_ at every bind_state().
  net_.reinit_model(b, model_id);
  spec_.model_ids[static_cast<size_t>(b)] = model_id;
  losses_[static_cast<size_t>(b)] = 0.0f;
  correct_[static_cast<size_t>(b)] = 0;
}

void LanguageModel::reinit_slot(int64_t b, int64_t model_id) {
  HFTA_CHECK(b >= 0 && b < spec_.B, "{}: cannot refill slot {}: the array has slots 0..{}", name_,
             b, spec_.B - 1);
  main_.net->reinit_model(b, model_id);
  spec_.model_ids[static_cast<size_t>(b)] = model_id;
  // The nets of shorter windows were bound once: bind again for the new id and dropout origin.
  for (auto& [T, r] : short_) r.net->bind_state(*main_.net, 0);
  losses_[static_cast<size_t>(b)] = 0.0f;
}

void MaskedLm::reinit_slot(int64_t b, int64_t model_id) {
  HFTA_CHECK(b >= 0 && b < spec_.B, "{}: cannot refill slot {}: the array has slots 0..{}", name_,
             b, spec_.B - 1);
  // The groups' nets take the new id (and dropout origin) from the main net at every bind.
  main_.net->reinit_model(b, model_id);
  spec_.model_ids[static_cast<size_t>(b)] = model_id;
  losses_[static_cast<size_t>(b)] = 0.0f;
  if (!group_correct_.empty()) group_correct_[static_cast<size_t>(b)] = 0;
}

namespace {

// The array of m's slots `keep`: `make` builds the model of the compacted spec, then every kept
// slot's state is copied in.
template <typename Array, typename Make>
std::unique_ptr<Array> compact_array(const Array& m, std::span<const int64_t> keep, Make make) {
  check_keep(keep, m.B(), m.name());
  auto spec = m.spec();
  spec.B = static_cast<int64_t>(keep.size());
  spec.model_ids.clear();
  for (int64_t b : keep) spec.model_ids.push_back(m.spec().model_ids[static_cast<size_t>(b)]);
  std::unique_ptr<Array> out = make(spec);
  out->net().set_training_forwards(m.net().training_forwards());
  for (size_t i = 0; i < keep.size(); ++i)
    out->net().copy_model(m.net(), keep[i], static_cast<int64_t>(i));
  return out;
}

}  // namespace

std::unique_ptr<Model> compact(const Model& m, std::span<const int64_t> keep) {
  return compact_array(m, keep, [&](const ModelSpec& spec) {
    return std::make_unique<Model>(m.name(), spec, m.definition());
  });
}

std::unique_ptr<LanguageModel> compact(const LanguageModel& m, std::span<const int64_t> keep) {
  return compact_array(m, keep, [&](const LanguageModelSpec& spec) {
    return std::make_unique<LanguageModel>(m.name(), spec, m.definition());
  });
}

std::unique_ptr<MaskedLm> compact(const MaskedLm& m, std::span<const int64_t> keep) {
  return compact_array(m, keep, [&](const LanguageModelSpec& spec) {
    return std::make_unique<MaskedLm>(m.name(), spec, m.definition(), m.predicted_per_stream());
  });
}

std::unique_ptr<Optimizer> compact_optimizer(const Optimizer& opt, const Net& compacted,
                                             std::span<const int64_t> keep) {
  HFTA_CHECK(compacted.params().size() == opt.table().segments.size(),
             "{}: the compacted net has {} parameters, the optimizer {}: compact the model it "
             "optimizes",
             opt.name(), compacted.params().size(), opt.table().segments.size());
  std::vector<TensorView> views;
  std::vector<uint8_t> decay;
  for (size_t i = 0; i < compacted.params().size(); ++i) {
    views.push_back(compacted.params()[i].value);
    decay.push_back(opt.table().segments[i].decay ? 1 : 0);
  }
  return opt.compact(ParamTable::from_arena(compacted.param_arena(), views, decay), keep);
}

}  // namespace hfta
