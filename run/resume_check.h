// `--resume`'s check, one for every task: a run continues from a checkpoint only when the
// checkpoint was written by the same command. The task says what its command decides (the
// fields every checkpoint has, its per-model hyperparameters, and its own settings as text);
// the first difference is an error naming the flag, what the checkpoint holds and what the
// command gives.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/checkpoint.h"

namespace hfta {

struct ResumeExpectation {
  std::string model;
  std::string optimizer;  // empty: not checked (a task with one optimizer)
  uint64_t seed = 0;
  int64_t batch_size = 0;
  std::vector<int64_t> model_ids;
  int64_t epochs = 0;  // the checkpoint may hold at most this many finished epochs
  // A task's own settings, checked in order before the hyperparameters: flag, the checkpoint's
  // value and this command's, as text (equal text: the same setting).
  struct Setting {
    std::string flag, was, is;
  };
  std::vector<Setting> settings;
  // Per-model hyperparameters by name (the flag is --name, '_' as '-'), compared as floats.
  // With `hyper_exactly`, a name the checkpoint holds and `hyper` lacks differs too.
  std::map<std::string, std::vector<float>> hyper;
  bool hyper_exactly = false;
};

// Throws hfta::Error naming the first flag in which the checkpoint at `path` differs.
void check_resumable(const Checkpoint& checkpoint, const std::string& path,
                     const ResumeExpectation& now);

}  // namespace hfta
