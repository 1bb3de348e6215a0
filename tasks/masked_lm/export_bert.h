// `hfta export` of a BERT: one model's weights with HFTA's examples/bert state_dict names
// (models/zoo_bert.cpp), so its BERT module built unfused (benchmarks/torch_models.py's Bert)
// loads the file strictly, and its vocabulary beside it (<out>.vocab.txt, one word per line in id
// order, the mask token "[MASK]" last).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "models/language_model.h"

namespace hfta {

class Net;

// The safetensors metadata of a BERT export (also each model<b>.safetensors of a run).
std::map<std::string, std::string> bert_export_metadata(const std::string& arch,
                                                        const LmConfig& config,
                                                        const std::string& source);
// Model 0 of `net` and `words` (the corpus's, "[MASK]" last) into `out` and <out>.vocab.txt;
// returns what was written.
std::string write_bert_export(const std::string& arch, const Net& net, const LmConfig& config,
                              const std::vector<std::string>& words, const std::string& out,
                              const std::string& source);

// `hfta export --init --arch bert`: model 0 of an array seeded with `seed`. sizes.vocab counts
// the corpus's words (the mask token is added); with text_files the corpus (split as `hfta train
// --dataset text` splits it with the same seed) gives the vocabulary.
std::string export_masked_lm(const std::string& arch, const std::string& out, uint64_t seed,
                             const LmConfig& sizes, const std::string& text_files);

}  // namespace hfta
