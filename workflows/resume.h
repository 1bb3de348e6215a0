// Checkpoints of a `hfta train` run: where they live, what they hold besides the tensors, the
// --resume check, the metrics a resumed run keeps, and the models `hfta extract` pulls out.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "workflows/checkpoint.h"
#include "workflows/hyper.h"
#include "workflows/train.h"
#include "workflows/train_loop.h"

namespace hfta {

// Where models `ids` keep their checkpoint: <out>/checkpoint.bin for a fused run,
// <out>/checkpoint-model<b>.bin per model for a serial one.
std::string checkpoint_path(const std::string& out, bool serial, const std::vector<int64_t>& ids);

// How far an array is through its run.
struct ArrayProgress {
  int64_t step = 0;                     // optimizer steps taken
  int64_t epochs_done = 0;              // finished epochs
  int64_t batch_in_epoch = 0;           // batches of the next epoch already taken
  std::vector<double> epoch_loss;       // per model: sum of this epoch's losses so far
  std::vector<double> last_train_loss;  // per model: mean loss of the last finished epoch
  std::vector<int64_t> skipped;         // per model: steps skipped for NaN/Inf gradients
};

// The array, its optimizer state and its progress, as a checkpoint. `values`: the array's own
// hyperparameters (pick_models of the run's).
Checkpoint make_checkpoint(const TrainOptions& options, const ModelConfig& config,
                           const HyperValues& values, const ArrayProgress& progress,
                           const ModelArray& array);
// The same into `checkpoint`, reusing its tensors' vectors: how a periodic snapshot is taken
// while training waits (one copy of the parameters, buffers and optimizer state; no allocation
// after the first).
void fill_checkpoint(Checkpoint& checkpoint, const TrainOptions& options, const ModelConfig& config,
                     const HyperValues& values, const ArrayProgress& progress,
                     const ModelArray& array);
// Copies the checkpoint's tensors and optimizer state into `array`; returns its progress.
ArrayProgress restore_checkpoint(const Checkpoint& checkpoint, ModelArray& array);

// Throws hfta::Error naming the first flag whose value differs between the checkpoint at `path`
// and this run (`values`: the array's own hyperparameters).
void check_resumable(const Checkpoint& checkpoint, const TrainOptions& options,
                     const ModelConfig& config, const HyperValues& values,
                     const std::vector<int64_t>& ids, const std::string& path);

// Keeps the rows of <metrics> a resumed run does not redo: those of models resuming from a
// checkpoint, up to its step (model -> step), which may lie inside an epoch (a periodic
// checkpoint): the resumed run then writes the epoch's later steps. Rows of models that start
// over are dropped, and so is a last line cut short by a crash.
void prune_metrics(const std::string& path, const std::map<int64_t, int64_t>& resumed_step);

// Model b of the run in `dir` (fused: from checkpoint.bin, serial: its own file) as a B = 1
// checkpoint.
Checkpoint model_from_run(const std::string& dir, int64_t b);
// The model with the highest test accuracy in <dir>/summary.csv.
int64_t best_model_of_run(const std::string& dir);

}  // namespace hfta
