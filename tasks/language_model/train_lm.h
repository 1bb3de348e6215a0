// `hfta train --model transformer --dataset text|wikitext2|synthetic-text`: trains an array of
// word-level language models (models/language_model.h) as PyTorch's examples/word_language_model
// does: the training split batchified into --batch-size streams and read in --bptt windows, each
// step clipping every model's gradient by its own global norm (--clip) before the optimizer;
// per-model StepLR (--lr-gamma, --lr-step-size) stepped once per epoch.
//
// Per epoch and model, <out>/metrics.csv gets the mean training loss, the validation loss and
// perplexity (exp of the mean per-token loss over the whole split) and the tokens/s of the
// array (training tokens of all its models per second of training); <out>/summary.csv gets each
// model's hyperparameters, last training loss and validation and test perplexity.
//
// Checkpoints (as a classifier run's, tasks/classifier/resume.h): <out>/checkpoint.bin (serial:
// checkpoint-model<b>.bin) after every epoch, on Ctrl-C, and with --checkpoint-every /
// --checkpoint-interval in the background. They hold the parameters, Adadelta's state, the
// window position inside the epoch (the LR schedule follows from the epoch), the partial
// epoch's loss sums, the sizes, and the vocabulary's size and hash; `--resume` continues exactly
// (the same windows, dropout draws and updates as an uninterrupted run).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "datasets/text_corpus.h"
#include "io/checkpoint.h"
#include "models/language_model.h"
#include "optim/optimizer.h"
#include "run/epoch_loop.h"
#include "run/hyper.h"
#include "run/task.h"
#include "run/train.h"
#include "run/trial.h"

namespace hfta {

class LanguageModel;
struct Checkpoint;

// How far one array is through its run (run/epoch_loop.h's ArrayProgress; the optimizer holds
// the skipped steps).
using LmProgress = ArrayProgress;

// The checkpoint header of a run on `corpus` with `config` (whose vocab the model's rows count).
LmCheckpointInfo lm_info(const TrainOptions& options, const LmConfig& config,
                         const TextCorpus& corpus);
// A language-model array's checkpoint (train_lm and train_bert): the run's header for models
// `group` with the recorded `hyper`, progress `p`, the optimizer's counts and the tensors.
void fill_lm_checkpoint(Checkpoint& c, const TrainOptions& o, const LmConfig& config,
                        const std::vector<int64_t>& group,
                        const std::map<std::string, std::vector<double>>& hyper,
                        const LmProgress& p, const Net& net, const Optimizer& optimizer,
                        const LmCheckpointInfo& info);
// Restores a checkpoint's tensors into `net` and `optimizer` and returns its progress.
LmProgress restore_lm_checkpoint(const Checkpoint& c, Net& net, Optimizer& optimizer);
// Throws hfta::Error naming the first flag (or the vocabulary) in which the checkpoint at `path`
// differs from this run.
void check_lm_resumable(const Checkpoint& checkpoint, const std::string& path,
                        const TrainOptions& options, const LmCheckpointInfo& now,
                        const std::map<std::string, std::vector<double>>& hyper,
                        const std::vector<int64_t>& ids);

// Throws hfta::Error on bad options, unreadable text (see datasets/text_corpus.h), or a --resume
// whose checkpoint came from other flags or another corpus.
TrainResult run_train_lm(const TrainOptions& options);
// `hfta tune`'s data of a Transformer search (run/task.h): the corpus of `options`.
std::unique_ptr<SearchData> load_transformer_search_data(const TrainOptions& options);

// Where a language model's corpus comes from.
struct LmCorpusSource {
  std::string dataset;                 // text, wikitext2, synthetic-text (or synthetic)
  std::string text_files, data_dir;    // text / wikitext2
  uint64_t seed = 0;                   // text: the line split; synthetic-text: the tokens
  int64_t vocab = 10000;               // synthetic-text: words
  int64_t synthetic_tokens = 1 << 17;  // synthetic-text: training tokens
};
TextCorpus load_lm_corpus(const LmCorpusSource& source);

// A seeded stream of words drawn uniformly from "<eos>", "w1", ..., "w<V-1>" (the dictionary
// numbers them in that order): `train_tokens` for training, 16384 each for validation and test
// (fixed, so `hfta eval` rebuilds the test split from the seed and V alone). Measures throughput
// without files; nothing in it can be learned.
TextCorpus synthetic_text_corpus(int64_t vocab, int64_t train_tokens, uint64_t seed);

// FNV-1a over the words in id order: equal for two dictionaries that number the same words
// alike, so a checkpoint can tell that it is resumed or evaluated on its own vocabulary.
uint64_t vocabulary_hash(const Dictionary& dictionary);

// Per-model mean loss per token over one pass of `reader` (PyTorch's evaluate(): each window's
// mean loss weighted by its length).
std::vector<double> evaluate_lm(LanguageModel& model, BpttReader& reader);

// The sizes a checkpoint's header records.
LmConfig lm_config_of(const LmCheckpointInfo& info);
// Whether `flag` (run/task.h's kModelSpecificFlags) is one that every text model (the language
// models and BERT) reads: the sizes, the corpus, --dropout, clipping and StepLR.
bool reads_text_model_flag(std::string_view flag);

// Throws hfta::Error ("token ids out of range in checkpoint ...") when the checkpoint's embedding
// or decoder tensors have another vocabulary than its header: token ids of its corpus would
// index past them.
void check_lm_checkpoint(const Checkpoint& checkpoint, const std::string& path);

// `hfta eval --checkpoint FILE` of a language model: every model's test loss and perplexity on
// the corpus it was trained on (or `dataset`/`text_files`/`data_dir` when given: it must have
// the same vocabulary).
struct LmEvalOptions {
  std::string dataset, text_files, data_dir;  // empty: the checkpoint's
};
struct LmEvaluation {
  std::string corpus;
  int64_t tokens = 0;  // test tokens scored per model
  std::vector<double> loss, perplexity;
};
LmEvaluation evaluate_lm_checkpoint(const Checkpoint& checkpoint, const std::string& path,
                                    const LmEvalOptions& options);

// One optimizer step of a language-model array on `window`: forward and backward in the plan's
// order, each group's models clipped by `clip` (B values, or empty: no clipping) and updated
// right after the group's backward on its worker (Optimizer::step_models), as the classifiers'
// array_step; under fused all B models at once. Each model as in a plain clip-and-step.
const StepReport& lm_train_step(LanguageModel& model, Optimizer& optimizer,
                                std::span<const TensorView> grads, std::span<const float> clip,
                                TokenWindow& window);
// The same for any array of B models whose parameters and gradients `net` holds: `run` does
// the array's forward and backward, calling its argument after each group's backward (fused
// when `fused`: one call for all B models, after which the update runs here).
using LmArrayForwardBackward = std::function<void(const LanguageModel::AfterBackward&)>;
const StepReport& lm_array_step(Net& net, bool fused, Optimizer& optimizer,
                                std::span<const TensorView> grads, std::span<const float> clip,
                                const LmArrayForwardBackward& run);

// --plan of a language-model array: `asked` parsed, or for auto the fastest plan for `spec`'s
// models on this machine (run/plan_choice.h: timed interleaved, cached per machine and
// configuration, said on stderr), each candidate timing whole training steps on `window`:
// forward and backward in the plan's order, per-model clipping, `optimizer`'s step.
// `memory_budget_bytes` (0 = any) bounds the candidates' arenas.
ExecutionPlan resolve_lm_plan(const std::string& asked, const std::string& model,
                              const LanguageModelSpec& spec, const std::string& optimizer,
                              TokenWindow window, int64_t memory_budget_bytes);

// `hfta trial` of a language model (trial.h): timed steps of forward, backward, clip (0.25) and
// Adadelta with per-model learning rates; samples_per_second counts tokens. With HFTA_PROFILE=1
// it prints the per-node profile and the attention nodes' share of a step on stderr.
TrialResult run_trial_lm(const TrialOptions& options);
// HFTA_PROFILE=1's closing lines of a language model's trial (run_trial_lm, run_trial_bert): the
// net's node-by-node `report` and the attention nodes' share of a whole step of `step_ms`.
void print_attention_profile(const std::string& report, const AttentionShare& share,
                             double step_ms);

}  // namespace hfta
