// An array of B masked language models (BERT) over the same masked token windows: a Net recorded
// by the model's definition from four shared index inputs [T] (token ids with some replaced by
// the mask token, position ids, segment ids, targets) to per-model logits [T, V], plus a
// per-token cross-entropy that skips every position whose target is kIgnoreTarget. Each model's
// loss is its own mean over the masked positions of the window (F.nll_loss(ignore_index=-100)).
//
// A sibling of LanguageModel (models/language_model.h) rather than a generalisation of it: a
// next-token LM reads one input, BERT reads three, and its windows always have the full length
// (the data source drops a short tail), so no nets for shorter windows are needed. The vocabulary
// V counts the mask token (the corpus's words + 1). Execution plans (models/plan.h) run as
// LanguageModel's: a state-only net for all B models, and per (group size, worker) a net bound to
// the group's slices of it, each group clipped and updated by its worker after its backward.
//
// Masked-only output: with predicted_per_stream K >= 1 the predicted positions of each window
// are packed (in window order) into n*K rows by Net::gather_tokens before the output layer, so
// the [., V] logits, their softmax and their gradient cost n*K rows instead of n*T: the same
// losses and gradients as all positions (ignored rows contribute nothing to either), for a
// window with at most n*K predicted positions (more throws hfta::Error; the data source caps
// its masks at that, datasets/bert_data.h). K = 0 computes logits at every position.
//
// Equivalence: as models/model.h, model b draws its weights and dropout from its model id, so a
// B = 1 array with model_ids = {b} computes exactly what model b of any array computes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/device_memory.h"
#include "core/tensor.h"
#include "datasets/mlm_batch.h"
#include "models/language_model.h"
#include "models/net.h"
#include "models/plan.h"

namespace hfta {

// The shared inputs a definition reads.
struct MlmInputs {
  Value tokens, positions, segments;
  Value predicted;  // valid: gather these rows (gather_tokens) before the output layer
};

// Records logits [T, V] ([K, V] with inputs.predicted) from the shared inputs.
using MlmDefinition = Value (*)(Net& net, const MlmInputs& inputs, const LmConfig& config);

class MaskedLm {
 public:
  // spec.config.vocab counts the mask token. Throws hfta::Error for sizes out of range (naming
  // the flag), e.g. bptt above kBertMaxPositions.
  MaskedLm(std::string name, LanguageModelSpec spec, MlmDefinition definition,
           int64_t predicted_per_stream = 0);
  MaskedLm(const MaskedLm&) = delete;
  MaskedLm& operator=(const MaskedLm&) = delete;

  // Runs all B models on one window; losses() holds each model's mean loss over the predicted
  // positions. The window must stay alive until backward(). Ids out of range throw hfta::Error.
  // Under a plan other than fused, a training forward runs in train_step() only.
  void forward(const MlmBatch& batch, bool training);
  // Zeroes and writes every parameter gradient for the last forward (fused plan only).
  void backward();
  // As LanguageModel::AfterBackward: models [first, first + count) have their gradients.
  using AfterBackward = LanguageModel::AfterBackward;
  // A training forward and backward of every model on one window, in the plan's order.
  void train_step(const MlmBatch& batch, const AfterBackward& after_backward = {});
  const std::vector<float>& losses() const { return losses_; }
  // Per model: predicted positions of the last forward whose argmax logit is the target (under a
  // plan other than fused: of the last evaluation forward, counted as each group ran).
  std::vector<int64_t> correct() const;
  const ExecutionPlan& plan() const { return spec_.plan; }
  const PlanLayout& layout() const { return layout_; }
  // Forward + backward FLOPs of one model on one stream of bptt tokens, whatever the plan (under
  // a plan after the first training step, which records the groups' nets).
  double train_flops_per_sample() const;
  // Predicted positions of the last forward (the same for every model).
  int64_t predicted() const { return predicted_; }

  const std::string& name() const { return name_; }
  int64_t B() const { return spec_.B; }
  const LanguageModelSpec& spec() const { return spec_; }
  const LmConfig& config() const { return spec_.config; }
  // The net holding all B models' parameters, gradients and buffers (the optimizer's, the
  // checkpoints'); under a plan it holds nothing else.
  Net& net() { return *main_.net; }
  const Net& net() const { return *main_.net; }
  const std::vector<Param>& params() const { return net().params(); }
  // K: output rows per stream (0: every position).
  int64_t predicted_per_stream() const { return K_; }
  int64_t params_per_model() const { return net().params_per_model(); }
  std::string describe() const { return net().describe(); }
  // As Model::reinit_slot (models/slots.h): slot b becomes a fresh model `model_id`.
  void reinit_slot(int64_t b, int64_t model_id);
  MlmDefinition definition() const { return definition_; }
  // Bytes of the nets recorded so far (under a plan the groups' nets are recorded by their first
  // step).
  size_t arena_bytes() const;

 private:
  struct Runner {
    std::unique_ptr<Net> net;
    Value tokens, positions, segments, targets, rows, logits, loss;
  };
  // The main net (all B models; `state_only` under a plan), or one bound to the main one's state
  // for `models` models (external).
  Runner record(int64_t models, bool external, bool state_only) const;
  Runner& group_runner(int64_t models, int worker);
  // Checks the window, packs its predicted positions and binds the inputs of `r`.
  void set_inputs(Runner& r, const MlmBatch& batch);
  void check_window(const MlmBatch& batch) const;
  void pack_predicted(const MlmBatch& batch);
  std::vector<int64_t> count_correct(const Runner& r, int64_t models) const;
  void run_groups(const MlmBatch& batch, bool training, const AfterBackward& after_backward);

  std::string name_;
  LanguageModelSpec spec_;
  MlmDefinition definition_;
  Runner main_;
  PlanLayout layout_;
  std::map<std::pair<int64_t, int>, Runner> groups_;  // (models, worker)
  std::vector<int64_t> group_correct_;                // per model, under a plan
  bool forwarded_ = false;
  const int32_t* last_targets_ = nullptr;
  int64_t K_ = 0, last_rows_ = 0;
  std::vector<int32_t> rows_buffer_, targets_buffer_;  // packed predicted positions (K >= 1)
  int64_t predicted_ = 0;
  std::vector<float> losses_;
  // On a device (LanguageModelSpec::device, plan fused): where a window's five index inputs are
  // uploaded to (through one staging, its two pinned buffers taken in turn), and a host copy of
  // the logits for counting correct predictions.
  Arena window_arena_;
  IndexView device_tokens_, device_positions_, device_segments_, device_targets_, device_rows_;
  StagedUpload upload_;
  mutable std::vector<float> host_logits_;
};

std::vector<std::string> masked_lm_names();
bool is_masked_lm(const std::string& name);
// Throws hfta::Error naming the choices for an unknown name.
// predicted_per_stream as MaskedLm's (0: logits at every position).
std::unique_ptr<MaskedLm> make_masked_lm(const std::string& name, const LanguageModelSpec& spec,
                                         int64_t predicted_per_stream = 0);

// Output rows per stream for a masked-only BERT whose data selects each token with probability
// `select` (BERT's 15%), over windows of `streams` x T tokens: the mean plus 6 standard
// deviations of a window's predicted count, per stream, at most T. A window exceeds it with
// probability below 1e-9.
int64_t mlm_predicted_per_stream(int64_t T, int64_t streams, double select = 0.15);

// HFTA's examples/bert BERT (models/zoo_bert.cpp): hidden = emsize, feed-forward = nhid.
Value define_bert(Net& net, const MlmInputs& inputs, const LmConfig& config);

}  // namespace hfta
