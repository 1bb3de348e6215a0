#include "datasets/bert_data.h"

#include <utility>

#include "core/error.h"
#include "core/rng.h"

namespace hfta {

namespace {
// The purpose of the masking draws (core/rng.h's purposes are per model; these are per window).
constexpr uint64_t kRngMasking = 0x4D4C4D;  // "MLM"
}  // namespace

void mlm_positions(const int32_t* ids, int64_t T, int32_t eos, int32_t* positions,
                   int32_t* segments) {
  int32_t position = 0, segment = 0;
  for (int64_t t = 0; t < T; ++t) {
    // A sentence starts after <eos>; the first start inside the window opens segment 1.
    if (t > 0 && ids[t - 1] == eos) {
      position = 0;
      segment = 1;
    }
    positions[t] = position++;
    segments[t] = segment;
  }
}

MlmReader::MlmReader(Batchified data, int64_t bptt, MlmMasking masking)
    : data_(std::move(data)), bptt_(bptt), masking_(masking) {
  HFTA_CHECK(bptt_ >= 1 && bptt_ <= kBertMaxPositions,
             "--bptt must be in [1, {}] for BERT (its position table), got {}", kBertMaxPositions,
             bptt_);
  HFTA_CHECK(data_.length >= bptt_,
             "the {} split gives {} streams of {} tokens, shorter than one window of --bptt {}: "
             "lower --bptt or --batch-size, or give more text",
             data_.name, data_.streams, data_.length, bptt_);
  HFTA_CHECK(masking_.words >= 2, "BERT needs a vocabulary of at least 2 words, got {}",
             masking_.words);
  windows_ = data_.length / bptt_;
}

MlmWindow MlmReader::make_window() const {
  MlmWindow w;
  const size_t n = static_cast<size_t>(data_.streams * bptt_);
  w.tokens.assign(n, 0);
  w.positions.assign(n, 0);
  w.segments.assign(n, 0);
  w.targets.assign(n, kIgnoreTarget);
  w.streams = data_.streams;
  w.length = bptt_;
  return w;
}

void MlmReader::fill(int64_t index, uint64_t seed, uint64_t step, MlmWindow& out) const {
  HFTA_CHECK(index >= 0 && index < windows_, "window {} of {} is out of range", index, windows_);
  const int64_t S = data_.streams, T = bptt_;
  RngStream rng = RngStream::for_model(seed, static_cast<int64_t>(step), kRngMasking);
  const int32_t mask = static_cast<int32_t>(masking_.words);
  int64_t chosen = 0;
  const int64_t cap = masking_.max_per_stream > 0 ? S * masking_.max_per_stream : S * T;
  for (int64_t s = 0; s < S; ++s) {
    const int32_t* ids = data_.stream(s) + index * T;
    mlm_positions(ids, T, masking_.eos, out.positions.data() + s * T, out.segments.data() + s * T);
    for (int64_t t = 0; t < T; ++t) {
      const size_t i = static_cast<size_t>(s * T + t);
      out.tokens[i] = ids[t];
      out.targets[i] = kIgnoreTarget;
      // Three draws per token whether or not it is chosen: a token's fate does not depend on
      // the choices before it.
      const double pick = rng.uniform(), how = rng.uniform();
      const int32_t random_word = static_cast<int32_t>(rng.below(static_cast<uint64_t>(mask)));
      if (pick >= masking_.select || chosen == cap) continue;
      ++chosen;
      out.targets[i] = ids[t];
      if (how < masking_.to_mask)
        out.tokens[i] = mask;
      else if (how < masking_.to_mask + masking_.to_random)
        out.tokens[i] = random_word;
    }
  }
  if (chosen == 0) {
    const size_t i = static_cast<size_t>(rng.below(static_cast<uint64_t>(S * T)));
    out.targets[i] = out.tokens[i];
    out.tokens[i] = mask;
  }
}

}  // namespace hfta
