#include "tasks/masked_lm/export_bert.h"

#include <fmt/format.h>

#include <fstream>

#include "core/error.h"
#include "datasets/text_corpus.h"
#include "io/safetensors.h"
#include "models/masked_lm.h"
#include "run/export.h"

namespace hfta {

std::map<std::string, std::string> bert_export_metadata(const std::string& arch,
                                                        const LmConfig& config,
                                                        const std::string& source) {
  return {{"format", "pt"},
          {"hfta_model", arch},
          {"vocab", std::to_string(config.vocab)},
          {"mask_id", std::to_string(config.vocab - 1)},
          {"hidden", std::to_string(config.emsize)},
          {"feed_forward", std::to_string(config.nhid)},
          {"nlayers", std::to_string(config.nlayers)},
          {"nhead", std::to_string(config.nhead)},
          {"source", source}};
}

std::string write_bert_export(const std::string& arch, const Net& net, const LmConfig& config,
                              const std::vector<std::string>& words, const std::string& out,
                              const std::string& source) {
  write_safetensors(out, state_dict(net, 0), bert_export_metadata(arch, config, source));
  const std::string vocab_path = out + ".vocab.txt";
  std::ofstream vocab(vocab_path);
  for (const std::string& w : words) vocab << w << "\n";
  HFTA_CHECK(vocab.good(), "cannot write the vocabulary to {}", vocab_path);
  return fmt::format("{} ({}; vocabulary {} with [MASK] in {}) written to {}: {} parameter values",
                     arch, source, config.vocab, vocab_path, out, net.params_per_model());
}

std::string export_masked_lm(const std::string& arch, const std::string& out, uint64_t seed,
                             const LmConfig& sizes, const std::string& text_files) {
  LmConfig config = sizes;
  std::vector<std::string> words;
  if (!text_files.empty()) {
    TextCorpus corpus = load_text_files(split_paths(text_files), {.seed = seed});
    words = corpus.dictionary.words();
  } else {
    for (int64_t i = 0; i < config.vocab; ++i) words.push_back(fmt::format("<w{}>", i));
  }
  words.emplace_back("[MASK]");
  config.vocab = static_cast<int64_t>(words.size());
  // The sizes of the window do not change the parameters: one stream of the smallest window.
  config.bptt = 1;
  auto model = make_masked_lm(arch, {.B = 1, .streams = 1, .seed = seed, .config = config});
  return write_bert_export(arch, model->net(), config, words, out,
                           fmt::format("initial weights, seed {}", seed));
}

}  // namespace hfta
