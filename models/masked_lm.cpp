#include "models/masked_lm.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/parallel.h"

namespace hfta {

namespace {
void check_config(const LmConfig& c, int64_t streams) {
  HFTA_CHECK(c.vocab >= 3,
             "the vocabulary has {} ids with the mask token: a masked language model needs at "
             "least 2 words and the mask",
             c.vocab);
  HFTA_CHECK(c.emsize >= 1, "--emsize (hidden width) must be positive, got {}", c.emsize);
  HFTA_CHECK(c.nhid >= 1, "--nhid (feed-forward width) must be positive, got {}", c.nhid);
  HFTA_CHECK(c.nlayers >= 1, "--nlayers must be positive, got {}", c.nlayers);
  HFTA_CHECK(c.nhead >= 1 && c.emsize % c.nhead == 0,
             "--nhead {} must divide --emsize {} (each head gets emsize / nhead features)", c.nhead,
             c.emsize);
  HFTA_CHECK(c.bptt >= 1 && c.bptt <= kBertMaxPositions,
             "--bptt must be in [1, {}] (BERT's position table has {} rows), got {}",
             kBertMaxPositions, kBertMaxPositions, c.bptt);
  HFTA_CHECK(c.dropout >= 0.0f && c.dropout < 1.0f, "--dropout must be in [0, 1), got {}",
             c.dropout);
  HFTA_CHECK(streams >= 1, "--batch-size (token streams) must be positive, got {}", streams);
}

void check_ids(const IndexView& v, int64_t lo, int64_t hi, bool ignore_ok, const char* what) {
  for (int64_t i = 0; i < v.shape.numel(); ++i) {
    const int32_t id = v.data[i];
    if (ignore_ok && id == kIgnoreTarget) continue;
    HFTA_CHECK(id >= lo && id < hi, "{} id {} at position {} is outside [{}, {})", what, id, i, lo,
               hi);
  }
}
}  // namespace

MaskedLm::MaskedLm(std::string name, LanguageModelSpec spec, MlmDefinition definition,
                   int64_t predicted_per_stream)
    : name_(std::move(name)),
      spec_(std::move(spec)),
      definition_(definition),
      K_(predicted_per_stream) {
  HFTA_CHECK(spec_.B >= 1, "{}: the array needs at least one model, got B = {}", name_, spec_.B);
  check_config(spec_.config, spec_.streams);
  const int64_t T = spec_.config.bptt;
  HFTA_CHECK(K_ >= 0 && K_ <= T,
             "{}: predicted positions per stream must be in [0, {}] (0: all), got {}", name_, T,
             K_);
  require_one_step_per_visit(spec_.plan, "masked language-model");
  layout_ = lay_out(spec_.plan, spec_.B, spec_.threads > 0 ? spec_.threads : num_threads());
  // The other plans split the models over CPU threads; a device runs them in one call per op.
  HFTA_CHECK(spec_.device == Device::kCpu || layout_.is_fused(),
             "{}: an array on --device {} runs plan fused (one call per op for all models), got "
             "plan {}",
             name_, device_flag_name(spec_.device), spec_.plan.str());
  main_ = record(spec_.B, false, !layout_.is_fused());
  if (spec_.device != Device::kCpu) {
    const Shape window{spec_.streams * T}, packed{spec_.streams * std::max<int64_t>(K_, 1)};
    Arena counting(spec_.device);
    for (const Shape& s : {window, window, window, window, packed}) counting.carve<int32_t>(s);
    window_arena_ = Arena(counting.used(), "masked-LM windows", spec_.device);
    device_tokens_ = window_arena_.carve<int32_t>(window);
    device_positions_ = window_arena_.carve<int32_t>(window);
    device_segments_ = window_arena_.carve<int32_t>(window);
    device_targets_ = window_arena_.carve<int32_t>(window);
    device_rows_ = window_arena_.carve<int32_t>(packed);
    upload_ = StagedUpload(spec_.device, static_cast<size_t>(window.numel()) * sizeof(int32_t),
                           "the windows' upload to the device");
  }
  spec_.model_ids = main_.net->spec().model_ids;
  losses_.assign(static_cast<size_t>(spec_.B), 0.0f);
  group_correct_.assign(static_cast<size_t>(spec_.B), 0);
  // A plan that amounts to fused (one group) is fused: say so.
  if (layout_.is_fused()) spec_.plan = ExecutionPlan::fused();
}

MaskedLm::Runner MaskedLm::record(int64_t models, bool external, bool state_only) const {
  const int64_t T = spec_.config.bptt, V = spec_.config.vocab;
  const int64_t out_rows = K_ > 0 ? K_ : T;
  std::vector<int64_t> ids = spec_.model_ids;
  if (!ids.empty()) ids.resize(static_cast<size_t>(models));  // rebound before every use
  Runner r;
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
    r.positions = net.index_input(Shape{T});
    r.segments = net.index_input(Shape{T});
    r.targets = net.index_input(Shape{out_rows});
    if (K_ > 0) r.rows = net.index_input(Shape{K_});
    r.logits = definition_(net, {r.tokens, r.positions, r.segments, r.rows}, spec_.config);
    HFTA_CHECK(net.features(r.logits) == (Shape{out_rows, V}),
               "the model gives {} features per sequence, expected [{}, {}] logits",
               net.features(r.logits).str(), out_rows, V);
    r.loss = net.token_cross_entropy(r.logits, r.targets, kIgnoreTarget);
    net.finalize();
  } catch (const Error& e) {
    fail("{}: {}", name_, e.what());
  }
  if (external) net.bind_state(*main_.net, 0);
  return r;
}

MaskedLm::Runner& MaskedLm::group_runner(int64_t models, int worker) {
  const auto key = std::make_pair(models, worker);
  auto it = groups_.find(key);
  if (it == groups_.end()) it = groups_.emplace(key, record(models, true, false)).first;
  return it->second;
}

void MaskedLm::check_window(const MlmBatch& batch) const {
  const Shape& shape = batch.tokens.shape;
  HFTA_CHECK(shape.rank() == 2 && batch.positions.shape == shape && batch.segments.shape == shape &&
                 batch.targets.shape == shape,
             "{}: a window is tokens, positions, segments and targets [streams, tokens], got {}, "
             "{}, {} and {}",
             name_, shape.str(), batch.positions.shape.str(), batch.segments.shape.str(),
             batch.targets.shape.str());
  HFTA_CHECK(shape[1] == spec_.config.bptt,
             "{}: a window of {} tokens, but the model was built for {} (--bptt)", name_, shape[1],
             spec_.config.bptt);
  // Embedding and cross-entropy check tokens and targets; positions and segments index tables
  // whose sizes the user does not see, so they are named here.
  check_ids(batch.positions, 0, kBertMaxPositions, false, "position");
  check_ids(batch.segments, 0, kBertSegments, false, "segment");
  check_ids(batch.targets, 0, spec_.config.vocab, true, "target");
}

void MaskedLm::pack_predicted(const MlmBatch& batch) {
  const Shape& shape = batch.tokens.shape;
  predicted_ = 0;
  for (int64_t i = 0; i < shape.numel(); ++i) predicted_ += batch.targets.data[i] != kIgnoreTarget;
  if (K_ == 0) {
    last_targets_ = batch.targets.data;
    last_rows_ = shape.numel();
    return;
  }
  // Pack the predicted positions (window order) into the n*K rows; padding rows are ignored.
  const int64_t n = shape[0], capacity = n * K_;
  rows_buffer_.assign(static_cast<size_t>(capacity), -1);
  targets_buffer_.assign(static_cast<size_t>(capacity), kIgnoreTarget);
  int64_t c = 0;
  for (int64_t i = 0; i < shape.numel(); ++i) {
    if (batch.targets.data[i] == kIgnoreTarget) continue;
    HFTA_CHECK(c < capacity,
               "{}: the window predicts more than {} positions ({} streams x {}), the model's "
               "masked-only output capacity; predict fewer positions or build it with more",
               name_, capacity, n, K_);
    rows_buffer_[static_cast<size_t>(c)] = static_cast<int32_t>(i);
    targets_buffer_[static_cast<size_t>(c)] = batch.targets.data[i];
    ++c;
  }
  last_targets_ = targets_buffer_.data();
  last_rows_ = capacity;
}

void MaskedLm::set_inputs(Runner& r, const MlmBatch& batch) {
  Net& net = *r.net;
  // A host index tensor as the input `v`: itself on the CPU, else uploaded into `on_device`.
  auto put = [&](Value v, const IndexView& host, const IndexView& on_device) {
    if (spec_.device == Device::kCpu) return net.set_input(v, host);
    const IndexView copy = on_device.leading(host.shape);
    upload_.upload(host, copy);
    net.set_input(v, copy);
  };
  put(r.tokens, batch.tokens, device_tokens_);
  put(r.positions, batch.positions, device_positions_);
  put(r.segments, batch.segments, device_segments_);
  if (K_ > 0) {
    const Shape packed{batch.tokens.shape[0], K_};
    put(r.rows, IndexView(rows_buffer_.data(), packed), device_rows_);
    put(r.targets, IndexView(targets_buffer_.data(), packed), device_targets_);
  } else {
    put(r.targets, batch.targets, device_targets_);
  }
}

void MaskedLm::forward(const MlmBatch& batch, bool training) {
  check_window(batch);
  HFTA_CHECK(layout_.is_fused() || !training,
             "{}: under plan {} a training forward runs in train_step()", name_, spec_.plan.str());
  pack_predicted(batch);
  if (!layout_.is_fused()) return run_groups(batch, false, {});
  set_inputs(main_, batch);
  main_.net->forward(training);
  const TensorView loss = main_.net->value(main_.loss);
  copy_memory(losses_.data(), Device::kCpu, loss.data, loss.device,
              static_cast<size_t>(spec_.B) * sizeof(float));
  forwarded_ = true;
}

void MaskedLm::backward() {
  HFTA_CHECK(layout_.is_fused(), "{}: under plan {} backward runs in train_step()", name_,
             spec_.plan.str());
  HFTA_CHECK(forwarded_, "{}: backward() needs a forward() first", name_);
  main_.net->zero_grad_and_backward();
}

void MaskedLm::train_step(const MlmBatch& batch, const AfterBackward& after_backward) {
  if (layout_.is_fused()) {
    forward(batch, true);
    backward();
    if (after_backward) after_backward(0, spec_.B);
    return;
  }
  check_window(batch);
  pack_predicted(batch);
  run_groups(batch, true, after_backward);
}

void MaskedLm::run_groups(const MlmBatch& batch, bool training,
                          const AfterBackward& after_backward) {
  // Record every runner before any worker starts (no recording in parallel).
  for (const PlanGroup& g : layout_.groups) group_runner(g.count, g.worker);
  const int64_t forwards = main_.net->training_forwards();
  auto run_group = [&](size_t index) {
    const PlanGroup& g = layout_.groups[index];
    Runner& r = group_runner(g.count, g.worker);
    r.net->bind_state(*main_.net, g.first);
    r.net->set_training_forwards(forwards);
    set_inputs(r, batch);
    r.net->forward(training);
    const TensorView loss = r.net->value(r.loss);
    std::copy(loss.data, loss.data + g.count, losses_.begin() + g.first);
    if (!training) {  // the runner's logits are the next group's after this one
      const std::vector<int64_t> c = count_correct(r, g.count);
      std::copy(c.begin(), c.end(), group_correct_.begin() + g.first);
      return;
    }
    // the bound net's gradients are this group's slices of the main net's
    r.net->zero_grad_and_backward();
    if (after_backward) after_backward(g.first, g.count);
  };
  run_plan_groups(layout_, run_group);
  if (training) main_.net->set_training_forwards(forwards + 1);
  forwarded_ = !training;
}

std::vector<int64_t> MaskedLm::count_correct(const Runner& r, int64_t models) const {
  std::vector<int64_t> out(static_cast<size_t>(models), 0);
  // Logits are [models, n, T, V] row-major: model b's rows are contiguous. A device net's are
  // read from a host copy.
  TensorView logits = r.net->value(r.logits);
  if (logits.device != Device::kCpu) {
    host_logits_.resize(static_cast<size_t>(logits.numel()));
    const TensorView host(host_logits_.data(), logits.shape);
    copy_view(logits, host, "the logits' copy to the host");
    logits = host;
  }
  const int64_t V = spec_.config.vocab;
  const int64_t rows = last_rows_;
  for (int64_t b = 0; b < models; ++b)
    for (int64_t i = 0; i < rows; ++i) {
      const int32_t target = last_targets_[i];
      if (target == kIgnoreTarget) continue;
      const float* row = logits.data + (b * rows + i) * V;
      // A NaN logit never wins, so a diverged model scores 0.
      if (std::max_element(row, row + V) - row == target && row[target] == row[target])
        ++out[static_cast<size_t>(b)];
    }
  return out;
}

std::vector<int64_t> MaskedLm::correct() const {
  if (last_targets_ == nullptr) return std::vector<int64_t>(static_cast<size_t>(spec_.B), 0);
  if (layout_.is_fused()) return count_correct(main_, spec_.B);
  HFTA_CHECK(forwarded_, "{}: under plan {} correct() counts an evaluation forward's predictions",
             name_, spec_.plan.str());
  return group_correct_;
}

size_t MaskedLm::arena_bytes() const {
  size_t bytes = main_.net->arena_bytes();
  for (const auto& [key, r] : groups_) bytes += r.net->arena_bytes();
  return bytes;
}

double MaskedLm::train_flops_per_sample() const {
  // Under a plan the main net holds only state: count a group's net, which has the gradients.
  for (const auto& [key, r] : groups_) return r.net->train_flops_per_sample();
  return main_.net->train_flops_per_sample();
}

namespace {
struct MlmInfo {
  const char* name;
  MlmDefinition definition;
};
const std::vector<MlmInfo>& registry() {
  static const std::vector<MlmInfo> r = {{"bert", define_bert}};
  return r;
}
}  // namespace

std::vector<std::string> masked_lm_names() {
  std::vector<std::string> out;
  for (const MlmInfo& i : registry()) out.emplace_back(i.name);
  return out;
}

bool is_masked_lm(const std::string& name) {
  return std::any_of(registry().begin(), registry().end(),
                     [&](const MlmInfo& i) { return name == i.name; });
}

int64_t mlm_predicted_per_stream(int64_t T, int64_t streams, double select) {
  const double S = static_cast<double>(std::max<int64_t>(1, streams));
  const double mean = select * static_cast<double>(T);
  const double sd = std::sqrt(select * (1.0 - select) * static_cast<double>(T) / S);
  return std::min<int64_t>(T, std::max<int64_t>(1, static_cast<int64_t>(std::ceil(mean + 6 * sd))));
}

std::unique_ptr<MaskedLm> make_masked_lm(const std::string& name, const LanguageModelSpec& spec,
                                         int64_t predicted_per_stream) {
  for (const MlmInfo& i : registry())
    if (name == i.name)
      return std::make_unique<MaskedLm>(name, spec, i.definition, predicted_per_stream);
  fail("unknown masked language model '{}': choose one of {}", name,
       fmt::join(masked_lm_names(), ", "));
}

}  // namespace hfta
