// `hfta train --model bert --dataset text|wikitext2`: trains an array of BERT masked language
// models (models/masked_lm.h) as HFTA's examples/bert trains its BERT: the training split
// batchified into --batch-size streams and read in --bptt windows, here masked for the masked-LM
// objective (datasets/bert_data.h; the draws depend on --seed and the step only, so every model
// of the array sees the same examples), Adadelta with per-model --lr, StepLR (--lr-gamma,
// --lr-step-size) stepped once per epoch, no gradient clipping unless --clip is given.
//
// The example's defaults apply to flags left out: --emsize 512 (hidden), --nhid 2048 (4 x
// hidden), --nlayers 8, --nhead 8, --bptt 32, --batch-size 32, --dropout 0.1, --optimizer
// adadelta, --lr-step-size 3, --lr-gamma 0.25.
//
// Per epoch and model, <out>/metrics.csv gets the mean training loss, the validation masked-LM
// loss and accuracy (argmax = the original word, over the masked positions of the whole split,
// masked the same way every epoch) and the tokens/s of the array (training tokens of all its
// models per second of training); <out>/summary.csv gets each model's hyperparameters, last
// training loss, validation and test loss and accuracy; <out>/model<b>.safetensors each model's
// trained weights with the example's state_dict names (as `hfta export`), <out>/vocab.txt the
// vocabulary (one word per line in id order, "[MASK]" last).
//
// Checkpoints as the Transformer LM's (tasks/language_model/train_lm.h, whose header block and
// --resume checks they share): <out>/checkpoint.bin (serial: checkpoint-model<b>.bin) after every
// epoch, on Ctrl-C, and with --checkpoint-every / --checkpoint-interval in the background;
// `--resume` continues exactly (a window's tokens and mask follow from the epoch and step, dropout
// from the net's count of training forwards, which the checkpoint restores), and refuses a
// checkpoint of other sizes, flags or vocabulary.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "datasets/bert_data.h"
#include "models/language_model.h"
#include "models/plan.h"
#include "run/task.h"
#include "run/train.h"
#include "run/trial.h"
#include "tasks/language_model/train_lm.h"

namespace hfta {

// Throws hfta::Error on bad options or unreadable text (see datasets/text_corpus.h).
TrainResult run_train_bert(const TrainOptions& options);
// `hfta tune`'s data of a BERT search (run/task.h): the corpus of `options`.
std::unique_ptr<SearchData> load_bert_search_data(const TrainOptions& options);

// --plan of a BERT array, as resolve_lm_plan (tasks/language_model/train_lm.h): `asked` parsed, or
// for auto the fastest plan for `spec`'s models on this machine, each candidate timing whole
// training steps (forward, backward, `optimizer`'s step) on `window`.
ExecutionPlan resolve_mlm_plan(const std::string& asked, const std::string& model,
                               const LanguageModelSpec& spec, int64_t predicted_per_stream,
                               const std::string& optimizer, MlmWindow window,
                               int64_t memory_budget_bytes);

// `hfta eval` of a BERT checkpoint: every model's masked-LM loss and accuracy on the test split
// of the corpus it was trained on (or the one `options` names: it must have the same
// vocabulary), masked as a run's test evaluation is.
struct BertEvaluation {
  std::string corpus;
  int64_t windows = 0;
  std::vector<double> loss, accuracy;
};
BertEvaluation evaluate_bert_checkpoint(const Checkpoint& checkpoint, const std::string& path,
                                        const LmEvalOptions& options);
// `hfta export` of model 0 of a B = 1 BERT checkpoint (export_bert.h), its vocabulary from the
// corpus it was trained on; returns what was written.
std::string export_bert_checkpoint(const Checkpoint& one, const std::string& out,
                                   const std::string& source);

// Sets the example's defaults (above) for the flags `given` says were left out.
void apply_bert_defaults(TrainOptions& options, const std::function<bool(const char*)>& given);

// `hfta trial --model bert` (trial.h): timed steps of forward, backward and Adadelta with
// per-model learning rates at the example's sizes; samples_per_second counts tokens
// (--batch-size streams x 32 tokens per step and model). --dataset synthetic-text (--vocab) or
// text (--text-files).
TrialResult run_trial_bert(const TrialOptions& options);

}  // namespace hfta
