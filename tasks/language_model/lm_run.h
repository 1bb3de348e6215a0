// What the two language-model runs (`hfta train --model transformer`: train_lm.cpp; `--model
// bert`: train_bert.cpp) do alike around their models' own steps: the per-model clip and StepLR
// values, --resume's checkpoints, and per array the optimizer, clipping, learning rates, progress
// and checkpoints of an epoch loop. Internal to those two runs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "io/checkpoint_writer.h"
#include "io/progress.h"
#include "models/masked_lm.h"
#include "models/net.h"
#include "optim/optimizer.h"
#include "run/hyper.h"
#include "run/train.h"
#include "tasks/language_model/train_lm.h"

namespace hfta {

// A run's per-model values: the optimizer's hyperparameters and --clip, --lr-gamma,
// --lr-step-size, expanded to B models.
struct LmRunHyper {
  HyperValues optimizer;
  std::vector<float> clip;  // empty: no clipping
  std::vector<float> gamma;
  std::vector<int64_t> step_size;

  // What a checkpoint of models `ids` records and --resume compares: the optimizer's
  // hyperparameters and the clip and StepLR values.
  std::map<std::string, std::vector<double>> record(const std::vector<int64_t>& ids) const;
  // summary.csv's first columns (model, the optimizer's hyperparameters, clip, lr_gamma,
  // lr_step_size) and model b's values in them.
  std::vector<std::string> summary_header() const;
  std::vector<std::string> summary_row(int64_t b) const;
};

// Throws hfta::Error naming the flag and model for a bad value (a clip that is not positive, a
// StepLR that is not a schedule).
LmRunHyper lm_run_hyper(const TrainOptions& options, int64_t B);

// The RNG streams of models `group` (their initial weights and dropout): options.model_streams
// when given (hfta tune's trial ids), else first_model_id + each id.
std::vector<int64_t> lm_model_streams(const TrainOptions& options,
                                      const std::vector<int64_t>& group);
// The first window of epoch `epoch` when an epoch trains `steps_per_epoch` of a pass's
// `windows`: 0 for whole epochs, else where the previous epoch stopped (wrapping around).
int64_t lm_epoch_first_window(int64_t epoch, int64_t steps_per_epoch, int64_t windows);

// --resume: the checkpoint of each group of `groups` (none where a group has none yet), each
// checked against this run (flags, vocabulary, tensor shapes), with <out>/metrics.csv cut back to
// the epochs the checkpoints hold. Without --resume, no checkpoints.
std::vector<std::optional<Checkpoint>> load_lm_resume(
    const TrainOptions& options, const std::vector<std::vector<int64_t>>& groups,
    const LmCheckpointInfo& info, const LmRunHyper& hyper);

// One array of a language-model run: its optimizer, each model's gradient clipping and StepLR,
// its progress through the epochs, and its checkpoints (after every epoch, on Ctrl-C, and
// periodically in the background). The run's loop:
//
//   LmArrayRun run(o, net, group, hyper, config, info, resume[g], who);
//   for (epoch = run.progress().epochs_done; epoch < o.epochs; ++epoch) {
//     run.begin_epoch(epoch, windows);
//     for (each window after the progress' batch_in_epoch) {
//       run.train_step(model, window, windows done in this epoch);
//     }
//     train_loss = run.train_losses(windows); ... metrics ...; run.end_epoch(epoch);
//   }
//   run.wait();
class LmArrayRun {
 public:
  // Restores `resume` into `net` and the optimizer when given. `who` names the array in logs.
  LmArrayRun(const TrainOptions& options, Net& net, const std::vector<int64_t>& group,
             const LmRunHyper& hyper, const LmConfig& config, const LmCheckpointInfo& info,
             const std::optional<Checkpoint>& resume, std::string who);
  LmArrayRun(const LmArrayRun&) = delete;
  LmArrayRun& operator=(const LmArrayRun&) = delete;

  LmProgress& progress() { return progress_; }
  const std::vector<float>& lr() const { return lr_; }
  // Sets epoch `epoch`'s learning rates (each model's StepLR), zeroes the loss sums unless the
  // run resumes inside this epoch, and starts its progress bar over `windows` steps (on a
  // terminal, unless --no-progress).
  void begin_epoch(int64_t epoch, int64_t windows);
  // The whole step of a Transformer array on `window` (lm_train_step: forward and backward in
  // the plan's order, each model's gradient clipped and its optimizer step, under a plan each
  // group's right after its backward); then adds the models' losses, counts the step
  // (`windows_done` of this epoch so far), takes a periodic checkpoint when one is due, and on
  // Ctrl-C saves one and throws.
  void train_step(LanguageModel& model, TokenWindow& window, int64_t windows_done);
  // The same for a BERT array on `batch`.
  void train_step(MaskedLm& model, const MlmBatch& batch, int64_t windows_done);
  // Each model's mean training loss over the epoch's `windows`, kept as its last; clears the
  // progress bar for the epoch's lines.
  std::vector<double> train_losses(int64_t windows);
  // Epoch `epoch` is finished: a checkpoint of it.
  void end_epoch(int64_t epoch);
  // Waits for the background write in flight (an error of it fails the run).
  void wait() { periodic_.wait(); }

 private:
  void save();
  // train_step()'s part after the update.
  void count_step(const std::vector<float>& losses, int64_t windows_done);

  const TrainOptions& o_;
  Net& net_;
  std::vector<int64_t> group_;
  const LmRunHyper& hyper_;
  const LmConfig& config_;
  const LmCheckpointInfo& info_;
  std::map<std::string, std::vector<double>> record_;  // hyper_.record(group_)
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<TensorView> grads_;
  std::vector<float> clip_, lr_;  // this array's
  LmProgress progress_;
  std::string path_, who_;
  std::optional<ProgressBar> bar_;  // the epoch's
  PeriodicCheckpoints periodic_;
};

}  // namespace hfta
