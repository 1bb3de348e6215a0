#include "workflows/export_bert.h"

#include <fmt/format.h>

#include <fstream>

#include "core/error.h"
#include "datasets/text_corpus.h"
#include "models/masked_lm.h"
#include "workflows/export.h"
#include "workflows/safetensors.h"

namespace hfta {

void export_masked_lm(const std::string& arch, const std::string& out, uint64_t seed,
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
  const std::string source = fmt::format("initial weights, seed {}", seed);
  write_safetensors(out, state_dict(model->net(), 0),
                    {{"format", "pt"},
                     {"hfta_model", arch},
                     {"vocab", std::to_string(config.vocab)},
                     {"mask_id", std::to_string(config.vocab - 1)},
                     {"hidden", std::to_string(config.emsize)},
                     {"feed_forward", std::to_string(config.nhid)},
                     {"nlayers", std::to_string(config.nlayers)},
                     {"nhead", std::to_string(config.nhead)},
                     {"source", source}});
  const std::string vocab_path = out + ".vocab.txt";
  std::ofstream vocab(vocab_path);
  for (const std::string& w : words) vocab << w << "\n";
  HFTA_CHECK(vocab.good(), "cannot write the vocabulary to {}", vocab_path);
  fmt::print("{} ({}; vocabulary {} with [MASK] in {}) written to {}: {} parameter values\n", arch,
             source, config.vocab, vocab_path, out, model->params_per_model());
}

}  // namespace hfta
