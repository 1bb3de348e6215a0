// The files of a `hfta train` run's --out directory that every task writes alike: where its
// checkpoints live, one model of it on its own (`hfta extract`), and its best model.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "run/task.h"

namespace hfta {

// Where models `ids` keep their checkpoint: <out>/checkpoint.bin for a fused run,
// <out>/checkpoint-model<b>.bin per model for a serial one.
std::string checkpoint_path(const std::string& out, bool serial, const std::vector<int64_t>& ids);

// Model b of the run in `dir` (fused: from checkpoint.bin, serial: its own file) as a B = 1
// checkpoint.
Checkpoint model_from_run(const std::string& dir, int64_t b);

// The model of the run in `dir` (of architecture `model`) that is best by `metric` in
// <dir>/summary.csv. Throws hfta::Error saying why for a task without a metric (a GAN) or a
// summary without its column.
int64_t best_model_of_run(const std::string& dir, const std::string& model,
                          const std::optional<TaskMetric>& metric);

// Keeps the rows of <metrics> a resumed run does not redo: those of models resuming from a
// checkpoint, up to its step (model -> step), which may lie inside an epoch (a periodic
// checkpoint): the resumed run then writes the epoch's later steps. Rows of models that start
// over are dropped, and so is a last line cut short by a crash.
void prune_metrics(const std::string& path, const std::map<int64_t, int64_t>& resumed_step);
// The same for runs that write their rows per epoch: keeps the finished epochs of models resuming
// from a checkpoint (model -> epochs done); a last line cut short by a crash goes too.
void prune_metrics_by_epoch(const std::string& path, const std::map<int64_t, int64_t>& epochs_done);

}  // namespace hfta
