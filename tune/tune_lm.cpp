// `hfta tune` of language models (transformer, bert): each array of trials is trained by `hfta
// train`'s own loop (run_train_lm, run_train_bert) on options that give every model its trial's
// hyperparameters and RNG stream, so a trial is exactly `hfta train --first-model-id <trial>`
// with its config (the reproduce command), whatever array it trained in. A promoted trial
// continues from its checkpoint: the array's trials' B = 1 checkpoints are stacked into one and
// the loop resumes from it.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "datasets/text_corpus.h"
#include "io/checkpoint.h"
#include "io/interrupt.h"
#include "io/safetensors.h"
#include "models/language_model.h"
#include "models/masked_lm.h"
#include "run/export.h"
#include "tasks/language_model/train_lm.h"
#include "tasks/tasks.h"
#include "tune/tune_search.h"

namespace hfta {

namespace fs = std::filesystem;

bool tunes_language_model(const std::string& model) {
  return is_language_model(model) || is_masked_lm(model);
}

namespace {

// The configuration of one model of the search with the array's dropout, for a corpus of
// `words` words (BERT adds its mask token).
LmConfig search_lm_config(const TuneOptions& o, const ArrayKey& key, int64_t words) {
  const bool bert = is_masked_lm(o.model);
  return {.vocab = words + (bert ? 1 : 0),
          .emsize = o.lm.emsize,
          .nhid = o.lm.nhid,
          .nlayers = o.lm.nlayers,
          .nhead = o.lm.nhead,
          .bptt = o.lm.bptt,
          .dropout = key.dropout >= 0 ? key.dropout : o.lm.dropout.value_or(bert ? 0.1f : 0.2f)};
}

// Trials `ids`' B = 1 checkpoints at one budget as one checkpoint of models 0..B-1 (each
// replica-major slice is one trial), the per-model values side by side.
Checkpoint stack_checkpoints(const std::vector<std::string>& paths) {
  Checkpoint c;
  const int64_t B = static_cast<int64_t>(paths.size());
  for (size_t b = 0; b < paths.size(); ++b) {
    Checkpoint one = load_checkpoint(paths[b]);
    HFTA_CHECK(one.B == 1 && one.lm.has_value(),
               "{} is not a language model trial's checkpoint (B {}): choose another --out",
               paths[b], one.B);
    if (b == 0) {
      c = std::move(one);
      continue;
    }
    HFTA_CHECK(one.epoch == c.epoch && one.step == c.step && one.tensors.size() == c.tensors.size(),
               "{} is at budget {} (step {}), {} at {} (step {}): the trials of one array must "
               "have trained alike; choose another --out",
               paths[b], one.epoch, one.step, paths[0], c.epoch, c.step);
    for (size_t i = 0; i < c.tensors.size(); ++i)
      c.tensors[i].values.insert(c.tensors[i].values.end(), one.tensors[i].values.begin(),
                                 one.tensors[i].values.end());
    for (auto& [name, values] : c.hyper) values.push_back(one.hyper.at(name).at(0));
    c.epoch_loss_sum.push_back(one.epoch_loss_sum[0]);
    c.last_train_loss.push_back(one.last_train_loss[0]);
    c.optimizer_steps.push_back(one.optimizer_steps[0]);
    c.skipped_steps.push_back(one.skipped_steps[0]);
    if (!c.forward_origins.empty()) c.forward_origins.push_back(one.forward_origins.at(0));
  }
  c.B = B;
  c.model_ids.resize(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) c.model_ids[static_cast<size_t>(b)] = b;
  for (CheckpointTensor& t : c.tensors) t.shape[0] = B;
  return c;
}

}  // namespace

int64_t lm_arena_bytes_per_model(const TuneOptions& o, const ArrayKey& key) {
  const TextCorpus corpus = load_lm_corpus({.dataset = o.dataset,
                                            .text_files = o.lm.text_files,
                                            .data_dir = o.data_dir,
                                            .seed = o.seed,
                                            .vocab = o.lm.vocab,
                                            .synthetic_tokens = 2});
  const LanguageModelSpec spec{.B = 1,
                               .streams = key.batch_size,
                               .seed = o.seed,
                               .config = search_lm_config(o, key, corpus.vocab_size())};
  if (is_masked_lm(o.model))
    return static_cast<int64_t>(
        make_masked_lm(o.model, spec, mlm_predicted_per_stream(o.lm.bptt, key.batch_size))
            ->net()
            .arena_bytes());
  return static_cast<int64_t>(make_language_model(o.model, spec)->net().arena_bytes());
}

void write_lm_safetensors(const Checkpoint& c, const std::string& path, const std::string& source) {
  check_lm_checkpoint(c, path);
  const LmCheckpointInfo& info = *c.lm;
  const LanguageModelSpec spec{.B = 1,
                               .streams = 1,
                               .seed = c.seed,
                               .config = {.vocab = info.vocab,
                                          .emsize = info.emsize,
                                          .nhid = info.nhid,
                                          .nlayers = info.nlayers,
                                          .nhead = info.nhead,
                                          .bptt = info.bptt,
                                          .dropout = static_cast<float>(info.dropout)}};
  std::map<std::string, std::string> meta = {{"format", "pt"},
                                             {"hfta_model", c.model},
                                             {"vocab", std::to_string(info.vocab)},
                                             {"emsize", std::to_string(info.emsize)},
                                             {"nhid", std::to_string(info.nhid)},
                                             {"nlayers", std::to_string(info.nlayers)},
                                             {"nhead", std::to_string(info.nhead)},
                                             {"source", source}};
  auto write = [&](Net& net) {
    restore_tensors(c, net, nullptr);
    write_safetensors(path, state_dict(net, 0), meta);
  };
  if (is_masked_lm(c.model)) {
    meta["mask_id"] = std::to_string(info.vocab - 1);
    write(make_masked_lm(c.model, spec, mlm_predicted_per_stream(info.bptt, 1))->net());
  } else {
    write(make_language_model(c.model, spec)->net());
  }
}

void TuneSearch::train_lm_array(const ArrayKey& key, int64_t start, int64_t to,
                                const std::vector<Job>& jobs, std::vector<TuneOutcome>& outcomes) {
  const auto array_start = Clock::now();
  const int64_t B = static_cast<int64_t>(jobs.size());
  std::vector<int64_t> ids;
  for (const Job& j : jobs) ids.push_back(j.job.trial);
  // The array's `hfta train` options: the first trial's, then every trial's per-model values.
  TrainOptions t = trial_train_options(o_, space_.sample(o_.seed, ids[0]), ids[0], to, "");
  t.first_model_id = 0;
  t.model_streams = ids;
  t.hyper.clear();
  t.clip.clear();
  t.lr_gamma.clear();
  t.lr_step_size.clear();
  for (int64_t id : ids) {
    const TrainOptions one = trial_train_options(o_, space_.sample(o_.seed, id), id, to, "");
    for (const auto& [name, v] : one.hyper) t.hyper[name].push_back(v.at(0));
    if (!one.clip.empty()) t.clip.push_back(one.clip.at(0));
    t.lr_gamma.push_back(one.lr_gamma.at(0));
    t.lr_step_size.push_back(one.lr_step_size.at(0));
  }
  // lr fixes B when the optimizer's defaults fill the rest (array_size: the longest list).
  if (!t.hyper.contains("lr")) t.hyper["lr"] = resolve_hyper(key.optimizer, t.hyper, B).at("lr");
  t.plan = o_.mode == "concurrent" ? "threads" : o_.plan;
  t.threads = o_.threads;
  t.search_trial = true;  // no test split, no per-model exports
  t.checkpoint = true;    // the array's state at `to`, split into the trials' below
  t.checkpoint_every = 0;
  t.checkpoint_interval_seconds = 0;
  t.out = fmt::format("{}/arrays/{}-to{}", dir_, fmt::join(ids, "-"), to);
  std::error_code ec;
  fs::remove_all(t.out, ec);
  fs::create_directories(t.out, ec);
  HFTA_CHECK(!ec, "cannot create {}: {}", t.out, ec.message());
  if (start > 0) {
    std::vector<std::string> paths;
    for (int64_t id : ids) paths.push_back(trial_dir(id) + "/checkpoint.bin");
    save_checkpoint(t.out + "/checkpoint.bin", stack_checkpoints(paths));
    t.resume = true;
  }
  if (!o_.quiet) {
    fmt::print("training trial{} {} ({}) from budget {} to {}: {} model{} in one array\n",
               B == 1 ? "" : "s", fmt::join(ids, ","), key.str(), start, to, B, B == 1 ? "" : "s");
    std::fflush(stdout);
  }
  TrainResult r;
  bool failed = false;
  try {
    r = run_train(t);
  } catch (const Error& e) {
    if (InterruptGuard::interrupted()) {
      const double time_s = time_offset_ + seconds_since(start_);
      for (const Job& j : jobs)
        write_row(j.job, 0, NAN, NAN, NAN, seconds_since(array_start), time_s, "stopped");
      fail("interrupted; the search is saved in {}: run the same command with --resume to continue",
           dir_);
    }
    failed = true;
    if (!o_.quiet) fmt::print("  failed: {}\n", e.what());
  }
  std::vector<double> acc(jobs.size(), NAN), loss(jobs.size(), NAN);
  int64_t step = 0;
  if (!failed) {
    // Save every trial's state (B = 1 checkpoints) before its row: a row always has its state.
    const Checkpoint all = load_checkpoint(t.out + "/checkpoint.bin");
    step = all.step;
    for (int64_t b = 0; b < B; ++b) {
      const size_t i = static_cast<size_t>(b);
      Checkpoint one = extract_model(all, b);
      one.model_ids = {0};  // as `hfta train --first-model-id <trial>` saves it
      fs::create_directories(trial_dir(ids[i]));
      save_checkpoint(trial_dir(ids[i]) + "/checkpoint.bin", one);
      std::ofstream cmd(trial_dir(ids[i]) + "/command.txt", std::ios::trunc);
      cmd << trial_command(o_, space_.sample(o_.seed, ids[i]), ids[i], to,
                           trial_dir(ids[i]) + "/reproduce")
          << "\n";
      acc[i] = r.models[i].valid_accuracy;
      loss[i] = r.models[i].valid_loss;
    }
  }
  fs::remove_all(t.out, ec);  // the trials' checkpoints hold what it had
  record_outcomes(jobs, acc, loss, failed, step, seconds_since(array_start), outcomes);
  ++arrays_trained_;
  if (o_.interrupt_after_arrays > 0 && arrays_trained_ >= o_.interrupt_after_arrays)
    fail("interrupted (test) after {} arrays; run the same command with --resume to continue",
         arrays_trained_);
}

}  // namespace hfta
