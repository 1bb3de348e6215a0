// The language models' corpus (text files, WikiText-2, a seeded token stream), their
// evaluation on a split, and what their checkpoints record and check (train_lm.h); shared by the
// Transformer's and BERT's runs.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "core/rng.h"
#include "datasets/text_corpus.h"
#include "io/checkpoint.h"
#include "models/language_model.h"
#include "run/resume_check.h"
#include "tasks/classifier/resume.h"
#include "tasks/language_model/train_lm.h"

namespace hfta {

// Shared with BERT's training (tasks/masked_lm/train_bert.cpp), declared in train_lm.h.
LmCheckpointInfo lm_info(const TrainOptions& o, const LmConfig& config, const TextCorpus& corpus) {
  return {.vocab = config.vocab,
          .vocab_hash = vocabulary_hash(corpus.dictionary),
          .emsize = config.emsize,
          .nhid = config.nhid,
          .nlayers = config.nlayers,
          .nhead = config.nhead,
          .bptt = config.bptt,
          .dropout = config.dropout,
          .dataset = o.dataset,
          .text_files = o.text_files,
          .data_dir = o.data_dir,
          .corpus = corpus.name};
}

void check_lm_resumable(const Checkpoint& c, const std::string& path, const TrainOptions& o,
                        const LmCheckpointInfo& now,
                        const std::map<std::string, std::vector<double>>& hyper,
                        const std::vector<int64_t>& ids) {
  HFTA_CHECK(c.lm.has_value(),
             "cannot resume from {}: it holds {} models, not a language model; choose another "
             "--out",
             path, c.model);
  const LmCheckpointInfo& was = *c.lm;
  if (c.model == o.model && (was.vocab != now.vocab || was.vocab_hash != now.vocab_hash))
    fail(
        "cannot resume from {}: it was trained on a vocabulary of {} words (hash {:016x}) from "
        "{}, but this command's corpus {} has {} words (hash {:016x}): resume with the same "
        "--dataset, --text-files (or --data-dir) and --seed, or choose another --out",
        path, was.vocab, was.vocab_hash, was.corpus, now.corpus, now.vocab, now.vocab_hash);
  ResumeExpectation expect{.model = o.model,
                           .optimizer = o.optimizer,
                           .seed = o.seed,
                           .batch_size = o.batch_size,
                           .model_ids = ids,
                           .epochs = o.epochs,
                           .hyper_exactly = true};
  for (const auto& [flag, sizes] : {std::pair{"--emsize", std::pair{was.emsize, now.emsize}},
                                    std::pair{"--nhid", std::pair{was.nhid, now.nhid}},
                                    std::pair{"--nlayers", std::pair{was.nlayers, now.nlayers}},
                                    std::pair{"--nhead", std::pair{was.nhead, now.nhead}},
                                    std::pair{"--bptt", std::pair{was.bptt, now.bptt}}})
    expect.settings.push_back({flag, std::to_string(sizes.first), std::to_string(sizes.second)});
  expect.settings.push_back({"--dropout", fmt::format("{:g}", static_cast<float>(was.dropout)),
                             fmt::format("{:g}", static_cast<float>(now.dropout))});
  for (const auto& [name, values] : hyper)
    expect.hyper[name] = std::vector<float>(values.begin(), values.end());
  check_resumable(c, path, expect);
}

uint64_t vocabulary_hash(const Dictionary& d) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](unsigned char c) {
    h ^= c;
    h *= 1099511628211ull;
  };
  for (const std::string& w : d.words()) {
    for (char c : w) mix(static_cast<unsigned char>(c));
    mix(0);  // words never hold NUL: "ab","c" and "a","bc" differ
  }
  return h;
}

TextCorpus synthetic_text_corpus(int64_t vocab, int64_t train_tokens, uint64_t seed) {
  HFTA_CHECK(vocab >= 2, "--vocab must be at least 2 for --dataset synthetic-text, got {}", vocab);
  HFTA_CHECK(train_tokens >= 2, "synthetic-text needs at least 2 training tokens, got {}",
             train_tokens);
  TextCorpus c;
  c.name = fmt::format("synthetic-text (V {}, seed {})", vocab, seed);
  c.dictionary.add(kEos);
  for (int64_t w = 1; w < vocab; ++w) c.dictionary.add(fmt::format("w{}", w));
  auto draw = [&](uint64_t stream, int64_t n) {
    RngStream rng = RngStream::for_model(seed, static_cast<int64_t>(stream), kRngData);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t& id : ids) id = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
    return ids;
  };
  c.train = draw(0, train_tokens);
  c.valid = draw(1, 16384);
  c.test = draw(2, 16384);
  return c;
}

TextCorpus load_lm_corpus(const LmCorpusSource& s) {
  if (s.dataset == "wikitext2") {
    HFTA_CHECK(!s.data_dir.empty(),
               "--dataset wikitext2 needs --data-dir, the directory of wiki.train.tokens, "
               "wiki.valid.tokens and wiki.test.tokens");
    return load_wikitext2(s.data_dir);
  }
  if (s.dataset == "synthetic-text" || s.dataset == "synthetic")
    return synthetic_text_corpus(s.vocab, s.synthetic_tokens, s.seed);
  HFTA_CHECK(s.dataset == "text",
             "--dataset {} holds no text: a language model reads --dataset text, wikitext2 or "
             "synthetic-text",
             s.dataset);
  HFTA_CHECK(!s.text_files.empty(),
             "--dataset text needs --text-files A,B,... (files or directories of plain UTF-8 "
             "text, e.g. /usr/share/games/fortunes)");
  return load_text_files(split_paths(s.text_files), {.seed = s.seed});
}

std::vector<double> evaluate_lm(LanguageModel& m, BpttReader& reader) {
  std::vector<double> total(static_cast<size_t>(m.B()), 0.0);
  TokenWindow w = reader.make_window();
  int64_t tokens = 0;
  reader.restart();
  while (reader.next(w)) {
    m.forward(w.inputs(), w.targets(), false);
    for (int64_t b = 0; b < m.B(); ++b)
      total[static_cast<size_t>(b)] +=
          static_cast<double>(m.losses()[static_cast<size_t>(b)]) * static_cast<double>(w.length);
    tokens += w.length;
  }
  for (double& t : total) t /= static_cast<double>(std::max<int64_t>(1, tokens));
  return total;
}

LmConfig lm_config_of(const LmCheckpointInfo& info) {
  return {.vocab = info.vocab,
          .emsize = info.emsize,
          .nhid = info.nhid,
          .nlayers = info.nlayers,
          .nhead = info.nhead,
          .bptt = info.bptt,
          .dropout = static_cast<float>(info.dropout)};
}

void check_lm_checkpoint(const Checkpoint& c, const std::string& path) {
  HFTA_CHECK(c.lm.has_value(), "{} holds {} models, not a language model", path, c.model);
  for (const CheckpointTensor& t : c.tensors) {
    if (t.name.find('#') != std::string::npos) continue;  // optimizer state: checked by restore
    // The embedding (BERT: its token table) is [B, V, D]; the decoder's weight [B, D, V] (rows
    // layout: in, out) and bias [B, V].
    int axis = 0;
    if (t.name.ends_with(".encoder.weight") || t.name.ends_with(".embedding.token.weight"))
      axis = 1;
    // BERT's output layer (models/zoo_bert.cpp) is the decoder's counterpart.
    if (t.name.ends_with(".decoder.weight") || t.name.ends_with(".decoder.bias") ||
        t.name.ends_with(".output.weight") || t.name.ends_with(".output.bias"))
      axis = t.shape.rank() - 1;
    if (axis >= 1 && t.shape[axis] != c.lm->vocab)
      fail(
          "token ids out of range in checkpoint {}: its header gives a vocabulary of {} words but "
          "tensor {} has shape {} ({} where the vocabulary belongs): the file does not match its "
          "own header (edited, or written by another hfta); use the run's own checkpoint or "
          "train again",
          path, c.lm->vocab, t.name, t.shape.str(), t.shape[axis]);
  }
}

void fill_lm_checkpoint(Checkpoint& c, const TrainOptions& o, const LmConfig& config,
                        const std::vector<int64_t>& group,
                        const std::map<std::string, std::vector<double>>& hyper,
                        const LmProgress& p, const Net& net, const Optimizer& optimizer,
                        const LmCheckpointInfo& info) {
  c.model = o.model;
  c.sample_shape = {config.bptt};
  c.num_classes = config.vocab;
  c.dropout = config.dropout;
  c.no_decay_norm_bias = o.no_decay_norm_bias;
  c.B = static_cast<int64_t>(group.size());
  c.seed = o.seed;
  c.batch_size = o.batch_size;
  c.model_ids = group;
  c.optimizer = o.optimizer;
  c.hyper = hyper;
  c.epoch = p.epochs_done;
  c.batch_in_epoch = p.batch_in_epoch;
  c.step = p.step;
  c.epoch_loss_sum = p.epoch_loss;
  c.last_train_loss = p.last_train_loss;
  const auto steps = optimizer.steps();
  c.optimizer_steps.assign(steps.begin(), steps.end());
  const auto skips = optimizer.skip_counts();
  c.skipped_steps.assign(skips.begin(), skips.end());
  c.lm = info;
  capture_tensors(net, &optimizer, c.tensors, true, c.borrow_tensors);
}

LmProgress restore_lm_checkpoint(const Checkpoint& c, Net& net, Optimizer& optimizer) {
  restore_tensors(c, net, &optimizer);
  return {.step = c.step,
          .epochs_done = c.epoch,
          .batch_in_epoch = c.batch_in_epoch,
          .epoch_loss = c.epoch_loss_sum,
          .last_train_loss = c.last_train_loss};
}

}  // namespace hfta
