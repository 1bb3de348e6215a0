// BERT's training examples from a word-level corpus (datasets/text_corpus.h): windows of a
// batchified split, masked for the masked-LM objective, with HFTA's examples/bert position and
// segment ids.
//
//   S  streams (--batch-size)    T  window length (--bptt)    V  words (the corpus's vocabulary)
//
// Windows: the split is batchified into S streams (as the example's batchify) and read in
// consecutive, non-overlapping windows of exactly T tokens at offsets 0, T, 2T, ... of every
// stream; a shorter tail is dropped (BERT sees whole windows). There are length / T windows.
//
// Positions and segments (the example's data.py and get_batch, within one window): a sentence
// ends at <eos>; a token's position is its distance from the start of its sentence or from the
// window's start, whichever is nearer (the example counts from the sentence start, which can
// exceed its 512-row position table; counting inside the window keeps ids below T <= 512). A
// token's segment is 0 up to the first sentence start inside the window (after its first token)
// and 1 from there on, as get_batch's seg[id:] = 1.
//
// Masking (BERT's masked LM): every token is chosen with probability 15%; a chosen token becomes
// the mask id (V) with probability 80%, a uniformly random word in [0, V) with 10%, and stays
// itself with 10%; its target is its original id. Every other target is kIgnoreTarget. A window
// where no token was chosen gets one chosen position; MlmMasking::max_per_stream caps the count, so
// every loss has a denominator. The draws depend on (seed, step) only: one RngStream per window,
// shared by all B models, so a fused array and each of its models alone train on the same examples.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "datasets/mlm_batch.h"
#include "datasets/text_corpus.h"

namespace hfta {

struct MlmMasking {
  int64_t words = 0;       // V: the corpus's vocabulary; the mask id is V
  int32_t eos = -1;        // <eos>'s id (-1: no sentence boundaries)
  double select = 0.15;    // the chance a token is predicted
  double to_mask = 0.8;    // of those: replaced by the mask id
  double to_random = 0.1;  // of those: replaced by a random word (the rest stay)
  // At most this many chosen tokens per stream on average: a window of S streams keeps its
  // first S * max_per_stream choices (in window order) and leaves later tokens unchosen, so it
  // fits a masked-only model's output rows (models/masked_lm.h; 0: no cap). The cap is set at 6
  // standard deviations above the mean (mlm_predicted_per_stream), so it practically never acts.
  int64_t max_per_stream = 0;
};

// Fixed [S, T] buffers of one window.
struct MlmWindow {
  std::vector<int32_t> tokens, positions, segments, targets;
  int64_t streams = 0, length = 0;

  MlmBatch batch() {
    const Shape s{streams, length};
    return {.tokens = IndexView(tokens.data(), s),
            .positions = IndexView(positions.data(), s),
            .segments = IndexView(segments.data(), s),
            .targets = IndexView(targets.data(), s)};
  }
};

class MlmReader {
 public:
  // Throws hfta::Error when T < 1, T > kBertMaxPositions, or a stream is shorter than one window
  // (lower --bptt or --batch-size, or give more text), naming the split.
  MlmReader(Batchified data, int64_t bptt, MlmMasking masking);

  MlmWindow make_window() const;
  // Window `index` (in [0, windows())) masked with the draws of (seed, step).
  void fill(int64_t index, uint64_t seed, uint64_t step, MlmWindow& out) const;

  int64_t windows() const { return windows_; }
  int64_t streams() const { return data_.streams; }
  int64_t bptt() const { return bptt_; }
  const MlmMasking& masking() const { return masking_; }

 private:
  Batchified data_;
  int64_t bptt_ = 0, windows_ = 0;
  MlmMasking masking_;
};

// The position and segment ids of one stream's T window ids (before masking), as above.
void mlm_positions(const int32_t* ids, int64_t T, int32_t eos, int32_t* positions,
                   int32_t* segments);

}  // namespace hfta
