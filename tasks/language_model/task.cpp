// The language-model task (models/language_model.h; trained by train_lm.cpp): its flags and
// metric, `hfta eval` and `hfta export` of its checkpoints.
#include <fmt/format.h>

#include <fstream>

#include "core/error.h"
#include "datasets/text_corpus.h"
#include "fused_ops/positions.h"
#include "io/checkpoint.h"
#include "models/language_model.h"
#include "run/export.h"
#include "tasks/language_model/train_lm.h"
#include "tasks/tasks.h"

namespace hfta {

namespace {

// The flags every text model (language model and BERT) reads.
bool text_model_flag(std::string_view flag) {
  for (std::string_view f :
       {"--dropout", "--no-decay-norm-bias", "--text-files", "--emsize", "--nhid", "--nlayers",
        "--nhead", "--bptt", "--clip", "--lr-gamma", "--lr-step-size"})
    if (flag == f) return true;
  return false;
}

// One model's weights with word_language_model's state_dict names and its PositionalEncoding's
// `pos_encoder.pe` buffer [5000, 1, D] (its max_len), so PyTorch's TransformerModel loads the file
// strictly, and its vocabulary beside it (<out>.vocab.txt, one word per line in id order).
std::string write_lm_export(const std::string& arch, const Net& net, const LmConfig& config,
                            const std::vector<std::string>& words, const std::string& out,
                            const std::string& source) {
  std::vector<SafeTensor> tensors = state_dict(net, 0);
  constexpr int64_t kMaxLen = 5000;
  tensors.push_back({.name = "pos_encoder.pe",
                     .shape = {kMaxLen, 1, config.emsize},
                     .floats = sinusoidal_table(kMaxLen, config.emsize)});
  write_safetensors(out, tensors,
                    {{"format", "pt"},
                     {"hfta_model", arch},
                     {"vocab", std::to_string(config.vocab)},
                     {"emsize", std::to_string(config.emsize)},
                     {"nhid", std::to_string(config.nhid)},
                     {"nlayers", std::to_string(config.nlayers)},
                     {"nhead", std::to_string(config.nhead)},
                     {"source", source}});
  const std::string vocab_path = out + ".vocab.txt";
  std::ofstream vocab(vocab_path);
  for (const std::string& w : words) vocab << w << "\n";
  HFTA_CHECK(vocab.good(), "cannot write the vocabulary to {}", vocab_path);
  return fmt::format("{} ({}; vocabulary {} in {}) written to {}: {} parameter values", arch,
                     source, config.vocab, vocab_path, out, net.params_per_model());
}

class LanguageModelTask final : public Task {
 public:
  std::string_view kind() const override { return "language model"; }
  std::vector<std::string> model_names() const override { return language_model_names(); }

  bool reads_flag(const std::string&, std::string_view flag) const override {
    // --device: every op of the Transformer has a CUDA kernel (docs/cuda.md).
    return text_model_flag(flag) || flag == "--vocab" || flag == "--synthetic-size" ||
           flag == "--device";
  }

  std::optional<TaskMetric> primary_metric(const std::string&) const override {
    return TaskMetric{"valid_ppl", false, "validation perplexity"};
  }

  std::optional<std::string> tune_metric(const std::string&, std::string*) const override {
    return "val_loss";
  }
  // The validation loss per token (perplexity is its exp); a word-level LM has no accuracy.
  std::vector<std::string> tune_metrics(const std::string&) const override { return {"val_loss"}; }
  std::unique_ptr<SearchData> load_search_data(const TrainOptions& o, int64_t) const override {
    return load_transformer_search_data(o);
  }

  std::string_view sample_unit() const override { return "tokens"; }
  TrainResult train(const TrainOptions& o) const override { return run_train_lm(o); }
  TrialResult trial(const TrialOptions& o) const override { return run_trial_lm(o); }

  EvalReport evaluate(const Checkpoint& c, const std::string& path,
                      const EvalOptions& options) const override {
    HFTA_CHECK(options.device == "cpu",
               "--device {}: hfta eval scores a language model's checkpoint on the CPU (train on "
               "the GPU, evaluate here: the checkpoint is the same file)",
               options.device);
    const LmEvaluation e = evaluate_lm_checkpoint(c, path,
                                                  {.dataset = options.dataset,
                                                   .text_files = options.text_files,
                                                   .data_dir = options.data_dir});
    EvalReport report{.data = fmt::format("{} test tokens of {}", e.tokens, e.corpus)};
    for (int64_t b = 0; b < c.B; ++b)
      report.model_metrics.push_back(
          fmt::format("test loss {:.4f}  test ppl {:.2f}", e.loss[b], e.perplexity[b]));
    return report;
  }

  std::string export_model(const Checkpoint& one, const ExportOptions& options) const override {
    check_lm_checkpoint(one, options.source);
    const LmCheckpointInfo& info = *one.lm;
    // The words come from the corpus the model was trained on, checked against its hash.
    const TextCorpus corpus = load_lm_corpus({.dataset = info.dataset,
                                              .text_files = info.text_files,
                                              .data_dir = info.data_dir,
                                              .seed = one.seed,
                                              .vocab = info.vocab,
                                              .synthetic_tokens = 2});
    HFTA_CHECK(
        corpus.vocab_size() == info.vocab && vocabulary_hash(corpus.dictionary) == info.vocab_hash,
        "{}: the vocabulary of its corpus {} ({} words) is not the one it was trained on "
        "({} words): the text files changed since; the export needs the words",
        options.source, corpus.name, corpus.vocab_size(), info.vocab);
    const LmConfig config = lm_config_of(info);
    auto model = make_language_model(
        one.model,
        {.B = 1, .streams = 1, .seed = one.seed, .model_ids = one.model_ids, .config = config});
    restore_tensors(one, model->net(), nullptr);
    return write_lm_export(one.model, model->net(), config, corpus.dictionary.words(), options.out,
                           options.source);
  }

  std::string export_init(const InitExportOptions& o) const override {
    LmConfig config{.vocab = o.vocab,
                    .emsize = o.emsize,
                    .nhid = o.nhid,
                    .nlayers = o.nlayers,
                    .nhead = o.nhead};
    std::vector<std::string> words;
    if (!o.text_files.empty()) {
      TextCorpus corpus = load_text_files(split_paths(o.text_files), {.seed = o.seed});
      words = corpus.dictionary.words();
      config.vocab = corpus.vocab_size();
    } else {
      for (int64_t i = 0; i < config.vocab; ++i) words.push_back(fmt::format("<w{}>", i));
    }
    auto model =
        make_language_model(o.model, {.B = 1, .streams = 1, .seed = o.seed, .config = config});
    return write_lm_export(o.model, model->net(), config, words, o.out,
                           fmt::format("initial weights, seed {}", o.seed));
  }
};

}  // namespace

const Task& language_model_task() {
  static const LanguageModelTask task;
  return task;
}

bool reads_text_model_flag(std::string_view flag) { return text_model_flag(flag); }

}  // namespace hfta
