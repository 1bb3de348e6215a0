#include "models/masked_lm.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

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
    : name_(std::move(name)), spec_(std::move(spec)), K_(predicted_per_stream) {
  HFTA_CHECK(spec_.B >= 1, "{}: the array needs at least one model, got B = {}", name_, spec_.B);
  check_config(spec_.config, spec_.streams);
  const int64_t T = spec_.config.bptt, V = spec_.config.vocab;
  HFTA_CHECK(K_ >= 0 && K_ <= T,
             "{}: predicted positions per stream must be in [0, {}] (0: all), got {}", name_, T,
             K_);
  const int64_t out_rows = K_ > 0 ? K_ : T;
  net_ = std::make_unique<Net>(NetSpec{
      .B = spec_.B, .capacity = spec_.streams, .seed = spec_.seed, .model_ids = spec_.model_ids});
  Net& net = *net_;
  try {
    tokens_ = net.index_input(Shape{T});
    positions_ = net.index_input(Shape{T});
    segments_ = net.index_input(Shape{T});
    targets_ = net.index_input(Shape{out_rows});
    if (K_ > 0) rows_ = net.index_input(Shape{K_});
    logits_ = definition(net, {tokens_, positions_, segments_, rows_}, spec_.config);
    HFTA_CHECK(net.features(logits_) == (Shape{out_rows, V}),
               "the model gives {} features per sequence, expected [{}, {}] logits",
               net.features(logits_).str(), out_rows, V);
    loss_ = net.token_cross_entropy(logits_, targets_, kIgnoreTarget);
    net.finalize();
  } catch (const Error& e) {
    fail("{}: {}", name_, e.what());
  }
  spec_.model_ids = net.spec().model_ids;
  losses_.assign(static_cast<size_t>(spec_.B), 0.0f);
}

void MaskedLm::forward(const MlmBatch& batch, bool training) {
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
  net_->set_input(tokens_, batch.tokens);
  net_->set_input(positions_, batch.positions);
  net_->set_input(segments_, batch.segments);
  if (K_ > 0) {
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
    const Shape packed{n, K_};
    net_->set_input(rows_, IndexView(rows_buffer_.data(), packed));
    net_->set_input(targets_, IndexView(targets_buffer_.data(), packed));
    last_targets_ = targets_buffer_.data();
    last_rows_ = capacity;
  } else {
    net_->set_input(targets_, batch.targets);
    last_targets_ = batch.targets.data;
    last_rows_ = shape.numel();
  }
  net_->forward(training);
  const TensorView loss = net_->value(loss_);
  std::copy(loss.data, loss.data + spec_.B, losses_.begin());
  predicted_ = 0;
  for (int64_t i = 0; i < shape.numel(); ++i) predicted_ += batch.targets.data[i] != kIgnoreTarget;
}

void MaskedLm::backward() {
  HFTA_CHECK(last_targets_ != nullptr, "{}: backward() needs a forward() first", name_);
  net_->zero_grad();
  net_->backward();
}

std::vector<int64_t> MaskedLm::correct() const {
  std::vector<int64_t> out(static_cast<size_t>(spec_.B), 0);
  if (last_targets_ == nullptr) return out;
  // Logits are [B, n, T, V] row-major: model b's rows are contiguous.
  const TensorView logits = net_->value(logits_);
  const int64_t V = spec_.config.vocab;
  const int64_t rows = last_rows_;
  for (int64_t b = 0; b < spec_.B; ++b)
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t target = last_targets_[r];
      if (target == kIgnoreTarget) continue;
      const float* row = logits.data + (b * rows + r) * V;
      // A NaN logit never wins, so a diverged model scores 0.
      if (std::max_element(row, row + V) - row == target && row[target] == row[target])
        ++out[static_cast<size_t>(b)];
    }
  return out;
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
