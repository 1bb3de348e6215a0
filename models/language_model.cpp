#include "models/language_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"

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
  main_ = record(spec_.config.bptt, false);
  spec_.model_ids = main_.net->spec().model_ids;
  losses_.assign(static_cast<size_t>(spec_.B), 0.0f);
}

LanguageModel::Runner LanguageModel::record(int64_t T, bool external) const {
  Runner r;
  r.net = std::make_unique<Net>(NetSpec{.B = spec_.B,
                                        .capacity = spec_.streams,
                                        .seed = spec_.seed,
                                        .model_ids = spec_.model_ids,
                                        .external_state = external});
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

LanguageModel::Runner& LanguageModel::runner_for(int64_t T) {
  if (T == spec_.config.bptt) return main_;
  auto it = short_.find(T);
  if (it == short_.end()) it = short_.emplace(T, record(T, true)).first;
  return it->second;
}

void LanguageModel::forward(const IndexView& inputs, const IndexView& targets, bool training) {
  HFTA_CHECK(inputs.shape.rank() == 2 && inputs.shape == targets.shape,
             "{}: a window is inputs and targets [streams, tokens], got {} and {}", name_,
             inputs.shape.str(), targets.shape.str());
  const int64_t T = inputs.shape[1];
  HFTA_CHECK(T >= 1 && T <= spec_.config.bptt,
             "{}: a window of {} tokens, but the model was built for 1 to {} (--bptt)", name_, T,
             spec_.config.bptt);
  Runner& r = runner_for(T);
  // Dropout draws depend on the count of training forwards: every net continues the main one's.
  r.net->set_training_forwards(main_.net->training_forwards());
  r.net->set_input(r.tokens, inputs);
  r.net->set_input(r.targets, targets);
  r.net->forward(training);
  main_.net->set_training_forwards(r.net->training_forwards());
  const TensorView loss = r.net->value(r.loss);
  std::copy(loss.data, loss.data + spec_.B, losses_.begin());
  last_ = &r;
}

void LanguageModel::backward() {
  HFTA_CHECK(last_ != nullptr, "{}: backward() needs a forward() first", name_);
  last_->net->zero_grad();
  last_->net->backward();
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
