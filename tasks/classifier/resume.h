// Checkpoints of a `hfta train` run: where they live, what they hold besides the tensors, the
// --resume check, the metrics a resumed run keeps, and the models `hfta extract` pulls out.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "run/epoch_loop.h"
#include "run/hyper.h"
#include "run/run_dir.h"
#include "run/train.h"
#include "tasks/classifier/train_loop.h"

namespace hfta {

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

}  // namespace hfta
