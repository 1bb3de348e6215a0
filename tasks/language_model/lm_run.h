// What the two language-model runs (`hfta train --model transformer`: train_lm.cpp; `--model
// bert`: train_bert.cpp) do alike around their models' own steps: the per-model clip and StepLR
// values, --resume's checkpoints, and per array (LmRun, driven by run/epoch_loop.h) the optimizer,
// clipping, learning rates and checkpoints. Internal to those two runs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/checkpoint.h"
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
  // Models `ids`' values, in that order.
  LmRunHyper pick(const std::vector<int64_t>& ids) const;
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

// --resume: throws hfta::Error naming the first flag (or the vocabulary, or a tensor) in which
// the checkpoint `c` at `path` of models `ids` differs from this run.
void check_lm_resume(const TrainOptions& options, const Checkpoint& c, const std::string& path,
                     const LmCheckpointInfo& info, const LmRunHyper& hyper,
                     const std::vector<int64_t>& ids);

// One array of a language-model run (the Transformer's, train_lm.cpp, or BERT's,
// train_bert.cpp) as the epoch loop (run/epoch_loop.h) drives it: its optimizer, each model's
// gradient clipping and StepLR, and its checkpoints. The two runs add their data, steps and
// evaluation. It keeps copies of the options and its models' values (`hyper` holds the run's,
// indexed by model id): a search's live array outlives what it was made of.
class LmRun : public RunArray {
 public:
  LmRun(const TrainOptions& options, Net& net, const std::vector<int64_t>& group,
        const LmRunHyper& hyper, const LmConfig& config, const LmCheckpointInfo& info);

  int64_t models() const override { return static_cast<int64_t>(group_.size()); }
  void fill_checkpoint(Checkpoint& c, const ArrayProgress& p) override;
  void reserve_checkpoint(Checkpoint& c) override;
  ArrayProgress restore(const Checkpoint& c) override;
  // Live arrays: the model's slots, the optimizer's, and each model's clip and StepLR. A refill
  // fails where clipping is on in `one` and off in the array or the other way round.
  bool keep_models(std::span<const int64_t> keep) final;
  bool refill_model(int64_t slot, const TrainOptions& one) final;

 protected:
  // Sets epoch `epoch`'s learning rates (each model's StepLR).
  void set_epoch_lr(int64_t epoch);
  const std::vector<float>& lr() const { return lr_; }
  // The whole step of a Transformer array on `window` (lm_train_step: forward and backward in
  // the plan's order, each model's gradient clipped and its optimizer step, under a plan each
  // group's right after its backward); returns the models' losses.
  const std::vector<float>& step(LanguageModel& model, TokenWindow& window);
  // The same for a BERT array on `batch`.
  const std::vector<float>& step(MaskedLm& model, const MlmBatch& batch);
  // The subclass's side of a live array's slots (keep_models, refill_model): its model compacted
  // to `keep` (returns the new model's net), and slot `slot` a fresh model of RNG stream
  // `stream`.
  virtual Net& compact_model(std::span<const int64_t> keep) = 0;
  virtual void reinit_model(int64_t slot, int64_t stream) = 0;

  TrainOptions o_;
  Net* net_;
  std::vector<int64_t> group_;

 private:
  LmRunHyper hyper_;  // this array's models', by position
  LmConfig config_;
  LmCheckpointInfo info_;
  std::map<std::string, std::vector<double>> record_;  // hyper_'s record
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<TensorView> grads_;
  std::vector<float> clip_, lr_;  // this array's
};

}  // namespace hfta
