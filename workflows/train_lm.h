// `hfta train --model transformer --dataset text|wikitext2`: trains an array of word-level
// language models (models/language_model.h) as PyTorch's examples/word_language_model does:
// the training split batchified into --batch-size streams and read in --bptt windows, each step
// clipping every model's gradient by its own global norm (--clip) before the optimizer; per-model
// StepLR (--lr-gamma, --lr-step-size) stepped once per epoch.
//
// Per epoch and model, <out>/metrics.csv gets the mean training loss, the validation loss and
// perplexity (exp of the mean per-token loss over the whole split) and the tokens/s of the
// array (training tokens of all its models per second of training); <out>/summary.csv gets each
// model's hyperparameters, last training loss and validation and test perplexity.
#pragma once

#include "workflows/train.h"

namespace hfta {

// Throws hfta::Error on bad options or unreadable text (see datasets/text_corpus.h).
TrainResult run_train_lm(const TrainOptions& options);

}  // namespace hfta
