// One window of BERT's masked examples as the data hands it to a masked language model
// (models/masked_lm.h) and the ids' ranges they share (HFTA's examples/bert).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace hfta {

// The target of a position that is not predicted (PyTorch's default ignore_index).
inline constexpr int32_t kIgnoreTarget = -100;
// The rows of BERTEmbedding's position and segment tables (HFTA's examples/bert).
inline constexpr int64_t kBertMaxPositions = 512;
inline constexpr int64_t kBertSegments = 3;

// One window of masked examples, every view [S, T] (S <= streams, T = bptt), shared by all models.
struct MlmBatch {
  IndexView tokens;     // ids in [0, V), masked positions mostly the mask token
  IndexView positions;  // in [0, kBertMaxPositions)
  IndexView segments;   // in [0, kBertSegments)
  IndexView targets;    // the original id at predicted positions, kIgnoreTarget elsewhere
};

}  // namespace hfta
