// The files of a `hfta train` run's --out directory that every task writes alike: where its
// checkpoints live, one model of it on its own (`hfta extract`), and its best model.
#pragma once

#include <cstdint>
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

}  // namespace hfta
