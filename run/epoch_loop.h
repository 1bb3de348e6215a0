// The epoch loop of every task (`hfta train`): one array's epochs, its progress bar, periodic
// checkpoints in the background and one after every epoch, Ctrl-C (a checkpoint, then an error
// saying how to resume), and --resume from the position a checkpoint holds, mid-epoch included.
// The task's RunArray does what differs: its data, its steps, the metrics rows it writes, its
// evaluation at the end of an epoch, and what its checkpoint holds.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "run/train.h"

namespace hfta {

// How far an array is through its run (what a checkpoint records besides the tensors).
struct ArrayProgress {
  int64_t step = 0;                     // optimizer steps taken
  int64_t epochs_done = 0;              // finished epochs
  int64_t batch_in_epoch = 0;           // steps of the next epoch already taken
  std::vector<double> epoch_loss;       // per model: sum of this epoch's losses so far
  std::vector<double> last_train_loss;  // per model: mean loss of the last finished epoch
  std::vector<int64_t> skipped;         // per model: steps skipped for NaN/Inf gradients
  // Per model, when the run ends: model_state_crc32 of what a checkpoint would hold.
  std::vector<uint32_t> state_crc32;
};

// What an array says of each training step it took.
struct TrainedStepView {
  std::span<const float> losses;     // each model's training loss (the one the epoch averages)
  std::span<const uint8_t> skipped;  // per model: the update was skipped (empty: none tracked)
  // The array holds this step's result. Under a plan with K steps per visit a visit's K steps
  // are reported after it, so only the last may be checkpointed or stopped at.
  bool current = true;
  // Writes the step's rows of metrics.csv as optimizer step `step` (empty: none per step); the
  // loop calls it before a checkpoint can be taken, so that a checkpoint has every row.
  std::function<void(int64_t step)> write_rows;
};

// What `hfta tune` ranks the models of an array by: each model's score on the validation data.
struct ValidationScores {
  std::vector<double> accuracy;  // per model; NaN where the task has no accuracy
  std::vector<double> loss;      // per model: the mean loss (per sample, token or point)
};

// One array of a task's run, as the epoch loop drives it (and `hfta tune`'s search, which trains
// it epoch by epoch: an epoch is the search's budget unit). Epochs count from 0.
class RunArray {
 public:
  virtual ~RunArray() = default;
  // The progress of a fresh array.
  ArrayProgress fresh_progress() const;
  virtual int64_t models() const = 0;
  // Steps in an epoch (the progress bar's length).
  virtual int64_t steps_per_epoch() const = 0;
  // Starts epoch `epoch` with its first `done` steps taken (resuming inside it).
  virtual void begin_epoch(int64_t epoch, int64_t done) = 0;
  // Trains the rest of the epoch, calling `after_step` for every step in order.
  virtual void train_epoch(const std::function<void(const TrainedStepView&)>& after_step) = 0;
  // The epoch ended (`p.last_train_loss` holds its mean losses; `steps` of its steps ran in this
  // process, in `seconds`): evaluates, prints and writes what the task reports per epoch.
  virtual void end_epoch(int64_t epoch, const ArrayProgress& p, int64_t steps, double seconds) = 0;
  // The run ends (`trained`: at least one epoch ran in this process): its evaluation and each
  // model's results, after `wall_seconds`.
  virtual void finish(const ArrayProgress& p, bool trained, double wall_seconds,
                      std::vector<ModelResult>& results) = 0;
  // The array and `p` into `c`, reusing its tensors' vectors.
  virtual void fill_checkpoint(Checkpoint& c, const ArrayProgress& p) = 0;
  // Names and sizes `c`'s tensors without reading the array (a periodic checkpoint's buffer,
  // allocated ahead on the writer thread); a task may leave it empty.
  virtual void reserve_checkpoint(Checkpoint& c) {}
  // Copies `c` into the array and returns its progress.
  virtual ArrayProgress restore(const Checkpoint& c) = 0;

  // `hfta tune`: every model on the validation data (a classifier's test split). The default
  // throws: a task without a validation metric (a GAN) is not searched.
  virtual ValidationScores validate();
  // `hfta tune`'s live arrays (models/slots.h). keep_models: the array becomes its models
  // keep[0], keep[1], ... (each bit for bit as it was); refill_model: model `slot` becomes a fresh
  // model with the per-model values of `one`, the options of one model trained alone (its RNG
  // stream is one.first_model_id; its hyperparameters, and a language model's clip and StepLR).
  // Neither changes another model. False when the task cannot: the search then builds the array
  // anew from the models' checkpoints (the same numbers, slower).
  virtual bool keep_models(std::span<const int64_t> keep) { return false; }
  virtual bool refill_model(int64_t slot, const TrainOptions& one) { return false; }
};

struct EpochLoopOptions {
  std::string who;              // "3 models", "model 2": in every line the loop prints
  std::string checkpoint_path;  // where the array's checkpoint lives
  // Acts as a Ctrl-C arriving after this optimizer step (tests; 0: never).
  int64_t stop_after_step = 0;
  // Says when periodic checkpoints are taken (once per run: the first array's).
  bool announce_checkpoints = false;
};

// Trains `array` for options.epochs epochs, from `resume_from` when given, checkpointing as the
// options say. Fills results[id] of every model of the array.
void run_epochs(RunArray& array, const TrainOptions& options, const EpochLoopOptions& loop,
                const Checkpoint* resume_from, std::vector<ModelResult>& results);

}  // namespace hfta
