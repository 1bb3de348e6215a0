#include "models/language_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <exception>

#include "core/error.h"
#include "core/parallel.h"

namespace hfta {

namespace {
void check_config(const LmConfig& c, int64_t streams) {
  HFTA_CHECK(c.vocab >= 2, "the vocabulary has {} words: a language model needs at least 2",
             c.vocab);
  HFTA_CHECK(c.emsize >= 1, "--emsize must be positive, got {}", c.emsize);
  HFTA_CHECK(c.nhid >= 1, "--nhid must be positive, got {}", c.nhid);
  HFTA_CHECK(c.nlayers >= 1, "--nlayers must be positive, got {}", c.nlayers);
  HFTA_CHECK(c.nhead >= 1 && c.emsize % c.nhead == 0,
             "--nhead {} must divide --emsize {} (each head gets emsize / nhead features)", c.nhead,
             c.emsize);
  HFTA_CHECK(c.bptt >= 1, "--bptt must be positive, got {}", c.bptt);
  HFTA_CHECK(c.dropout >= 0.0f && c.dropout < 1.0f, "--dropout must be in [0, 1), got {}",
             c.dropout);
  HFTA_CHECK(streams >= 1, "--batch-size (token streams) must be positive, got {}", streams);
}
}  // namespace

LanguageModel::LanguageModel(std::string name, LanguageModelSpec spec, LmDefinition definition)
    : name_(std::move(name)), spec_(std::move(spec)), definition_(definition) {
  HFTA_CHECK(spec_.B >= 1, "{}: the array needs at least one model, got B = {}", name_, spec_.B);
  check_config(spec_.config, spec_.streams);
  require_one_step_per_visit(spec_.plan, "language-model");
  layout_ = lay_out(spec_.plan, spec_.B, spec_.threads > 0 ? spec_.threads : num_threads());
  // The other plans split the models over CPU threads; a device runs them in one call per op.
  HFTA_CHECK(spec_.device == Device::kCpu || layout_.is_fused(),
             "{}: an array on --device {} runs plan fused (one call per op for all models), got "
             "plan {}",
             name_, device_flag_name(spec_.device), spec_.plan.str());
  main_ = record(spec_.config.bptt, false, spec_.B, !layout_.is_fused());
  if (spec_.device != Device::kCpu) {
    const Shape window{spec_.streams * spec_.config.bptt};
    Arena counting(spec_.device);
    counting.carve<int32_t>(window);
    counting.carve<int32_t>(window);
    window_arena_ = Arena(counting.used(), "token windows", spec_.device);
    device_inputs_ = window_arena_.carve<int32_t>(window);
    device_targets_ = window_arena_.carve<int32_t>(window);
    const size_t bytes = static_cast<size_t>(window.numel()) * sizeof(int32_t);
    input_upload_ = StagedUpload(spec_.device, bytes, "the windows' upload to the device");
    target_upload_ = StagedUpload(spec_.device, bytes, "the targets' upload to the device");
  }
  spec_.model_ids = main_.net->spec().model_ids;
  losses_.assign(static_cast<size_t>(spec_.B), 0.0f);
  // A plan that amounts to fused (one group) is fused: say so.
  if (layout_.is_fused()) spec_.plan = ExecutionPlan::fused();
}

LanguageModel::Runner LanguageModel::record(int64_t T, bool external, int64_t models,
                                            bool state_only) const {
  if (models == 0) models = spec_.B;
  Runner r;
  std::vector<int64_t> ids = spec_.model_ids;
  if (!ids.empty()) ids.resize(static_cast<size_t>(models));  // rebound before every use
  r.net = std::make_unique<Net>(NetSpec{.B = models,
                                        .capacity = spec_.streams,
                                        .seed = spec_.seed,
                                        .model_ids = ids,
                                        .state_only = state_only,
                                        .external_state = external,
                                        .device = spec_.device});
  Net& net = *r.net;
  try {
    r.tokens = net.index_input(Shape{T});
    r.targets = net.index_input(Shape{T});
    r.logits = definition_(net, r.tokens, spec_.config);
    HFTA_CHECK(net.features(r.logits) == (Shape{T, spec_.config.vocab}),
               "the model gives {} features per sequence, expected [{}, {}] logits",
               net.features(r.logits).str(), T, spec_.config.vocab);
    r.loss = net.token_cross_entropy(r.logits, r.targets);
    net.finalize();
  } catch (const Error& e) {
    fail("{}: {}", name_, e.what());
  }
  if (external) net.bind_state(*main_.net, 0);
  return r;
}

LanguageModel::Runner& LanguageModel::group_runner(int64_t T, int64_t models, int worker) {
  const auto key = std::make_tuple(T, models, worker);
  auto it = groups_.find(key);
  if (it == groups_.end()) it = groups_.emplace(key, record(T, true, models)).first;
  return it->second;
}

void LanguageModel::run_groups(const IndexView& inputs, const IndexView& targets, bool training,
                               bool with_backward, const AfterBackward& after_backward) {
  const int64_t T = inputs.shape[1];
  // Record every runner this window needs before any worker starts (no recording in parallel).
  for (const PlanGroup& g : layout_.groups) group_runner(T, g.count, g.worker);
  const int64_t forwards = main_.net->training_forwards();
  auto run_group = [&](size_t index) {
    const PlanGroup& g = layout_.groups[index];
    Runner& r = group_runner(T, g.count, g.worker);
    r.net->bind_state(*main_.net, g.first);
    r.net->set_training_forwards(forwards);
    r.net->set_input(r.tokens, inputs);
    r.net->set_input(r.targets, targets);
    r.net->forward(training);
    const TensorView loss = r.net->value(r.loss);
    copy_memory(losses_.data() + g.first, Device::kCpu, loss.data, loss.device,
                static_cast<size_t>(g.count) * sizeof(float));
    if (!with_backward) return;
    // the bound net's gradients are this group's slices of the main net's
    r.net->zero_grad_and_backward();
    if (after_backward) after_backward(g.first, g.count);
  };
  run_plan_groups(layout_, run_group);
  if (training) main_.net->set_training_forwards(forwards + 1);
  last_ = nullptr;
}

void LanguageModel::train_step(const IndexView& inputs, const IndexView& targets,
                               const AfterBackward& after_backward) {
  if (layout_.is_fused()) {
    forward(inputs, targets, true);
    backward();
    if (after_backward) after_backward(0, spec_.B);
    return;
  }
  check_window(inputs, targets);
  run_groups(inputs, targets, true, true, after_backward);
}

LanguageModel::Runner& LanguageModel::runner_for(int64_t T) {
  if (T == spec_.config.bptt) return main_;
  auto it = short_.find(T);
  if (it == short_.end()) it = short_.emplace(T, record(T, true)).first;
  return it->second;
}

void LanguageModel::check_window(const IndexView& inputs, const IndexView& targets) const {
  HFTA_CHECK(inputs.shape.rank() == 2 && inputs.shape == targets.shape,
             "{}: a window is inputs and targets [streams, tokens], got {} and {}", name_,
             inputs.shape.str(), targets.shape.str());
  const int64_t T = inputs.shape[1];
  HFTA_CHECK(T >= 1 && T <= spec_.config.bptt,
             "{}: a window of {} tokens, but the model was built for 1 to {} (--bptt)", name_, T,
             spec_.config.bptt);
}

void LanguageModel::forward(const IndexView& inputs, const IndexView& targets, bool training) {
  check_window(inputs, targets);
  if (!layout_.is_fused()) {
    HFTA_CHECK(!training, "{}: under plan {} a training forward runs in train_step()", name_,
               spec_.plan.str());
    return run_groups(inputs, targets, false, false);
  }
  const int64_t T = inputs.shape[1];
  Runner& r = runner_for(T);
  // Dropout draws depend on the count of training forwards: every net continues the main one's.
  r.net->set_training_forwards(main_.net->training_forwards());
  if (spec_.device == Device::kCpu) {
    r.net->set_input(r.tokens, inputs);
    r.net->set_input(r.targets, targets);
  } else {
    const IndexView in = device_inputs_.leading(inputs.shape);
    const IndexView out = device_targets_.leading(targets.shape);
    input_upload_.upload(inputs, in);
    target_upload_.upload(targets, out);
    r.net->set_input(r.tokens, in);
    r.net->set_input(r.targets, out);
  }
  r.net->forward(training);
  main_.net->set_training_forwards(r.net->training_forwards());
  const TensorView loss = r.net->value(r.loss);
  copy_memory(losses_.data(), Device::kCpu, loss.data, loss.device,
              static_cast<size_t>(spec_.B) * sizeof(float));
  last_ = &r;
}

void LanguageModel::backward() {
  HFTA_CHECK(layout_.is_fused(), "{}: under plan {} backward runs in train_step()", name_,
             spec_.plan.str());
  HFTA_CHECK(last_ != nullptr, "{}: backward() needs a forward() first", name_);
  last_->net->zero_grad_and_backward();
}

size_t LanguageModel::arena_bytes() const {
  size_t bytes = main_.net->arena_bytes();
  for (const auto& [T, r] : short_) bytes += r.net->arena_bytes();
  for (const auto& [key, r] : groups_) bytes += r.net->arena_bytes();
  return bytes;
}

void LanguageModel::reset_profile() {
  main_.net->reset_profile();
  for (auto& [T, r] : short_) r.net->reset_profile();
  for (auto& [key, r] : groups_) r.net->reset_profile();
}

const Net& LanguageModel::full_window_net() const {
  // Under a plan: the first full-length group's net (the main one holds only the models' state:
  // no gradients to time or to count FLOPs for; profiles are then ms per group it ran).
  for (const auto& [key, r] : groups_)
    if (std::get<0>(key) == spec_.config.bptt) return *r.net;
  return net();
}

double LanguageModel::train_flops_per_sample() const {
  return full_window_net().train_flops_per_sample();
}

AttentionShare attention_share(const Net& net) {
  AttentionShare s;
  for (const Net::NodeTime& t : net.profile()) {
    const double ms = t.forward_ms + t.backward_ms;
    s.total_ms += ms;
    if (t.node.find("Attention(") != std::string::npos) s.attention_ms += ms;
  }
  return s;
}

LanguageModel::ProfileShare LanguageModel::attention_profile() const {
  return attention_share(full_window_net());
}

std::string attention_profile_report(const std::string& name, const Net& net) {
  const AttentionShare s = attention_share(net);
  return fmt::format("{} {}\nattention: {:.3f} of {:.3f} ms per step in the net's nodes ({:.1f}%)",
                     name, net.profile_report(), s.attention_ms, s.total_ms,
                     s.total_ms > 0 ? 100.0 * s.attention_ms / s.total_ms : 0.0);
}

std::string LanguageModel::profile_report() const {
  return attention_profile_report(name_, full_window_net());
}

namespace {
struct LmInfo {
  const char* name;
  LmDefinition definition;
};
const std::vector<LmInfo>& registry() {
  static const std::vector<LmInfo> r = {{"transformer", define_transformer}};
  return r;
}
}  // namespace

std::vector<std::string> language_model_names() {
  std::vector<std::string> out;
  for (const LmInfo& i : registry()) out.emplace_back(i.name);
  return out;
}

bool is_language_model(const std::string& name) {
  return std::any_of(registry().begin(), registry().end(),
                     [&](const LmInfo& i) { return name == i.name; });
}

std::unique_ptr<LanguageModel> make_language_model(const std::string& name,
                                                   const LanguageModelSpec& spec) {
  for (const LmInfo& i : registry())
    if (name == i.name) return std::make_unique<LanguageModel>(name, spec, i.definition);
  fail("unknown language model '{}': choose one of {}", name,
       fmt::join(language_model_names(), ", "));
}

}  // namespace hfta
