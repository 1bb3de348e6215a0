// `hfta export --init --arch bert`: a BERT's initial weights (model 0 of an array seeded with
// `seed`) with HFTA's examples/bert state_dict names (models/zoo_bert.cpp), so its BERT module
// built unfused (benchmarks/torch_models.py's Bert) loads the file strictly, and its vocabulary
// beside it (<out>.vocab.txt, one word per line in id order, the mask token "[MASK]" last).
#pragma once

#include <string>

#include "models/language_model.h"

namespace hfta {

// sizes.vocab counts the corpus's words (the mask token is added); with text_files the corpus
// (split as `hfta train --dataset text` splits it with the same seed) gives the vocabulary.
void export_masked_lm(const std::string& arch, const std::string& out, uint64_t seed,
                      const LmConfig& sizes, const std::string& text_files);

}  // namespace hfta
