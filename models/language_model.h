// An array of B word-level language models of one architecture over the same token windows: a
// Net recorded by the model's definition from shared tokens [T] to per-model logits [T, V], plus
// a per-token cross-entropy against the shared next tokens. Each model's loss is its own mean over
// every token of the window (word_language_model's criterion on the flattened output).
//
// Windows are [S, T'] token ids (S streams, T' <= bptt). The net is recorded for T = bptt; a
// shorter window (the last of a pass) runs on a net recorded for T' that shares the main net's
// parameters, gradients and streams (Net::bind_state), recorded once per length.
//
// Execution plans (models/plan.h) as models/model.h runs them: under chunk:C or threads the main
// net only holds the state (parameters, gradients) of all B models, and nets recorded for one
// group size run each group of the plan, rebound to its models; a training step then runs in
// train_step() (forward and backward of a group before the next group's).
//
// Equivalence: as models/model.h, model b draws its weights and dropout from its model id, so a
// B = 1 array with model_ids = {b} computes exactly what model b of any array computes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/arena.h"
#include "core/device_memory.h"
#include "core/tensor.h"
#include "models/net.h"
#include "models/plan.h"

namespace hfta {

// The sizes of a language model (--emsize --nhid --nlayers --nhead --bptt --dropout).
struct LmConfig {
  int64_t vocab = 2;
  int64_t emsize = 128;
  int64_t nhid = 128;
  int64_t nlayers = 2;
  int64_t nhead = 2;
  int64_t bptt = 32;
  float dropout = 0.2f;
};

struct LanguageModelSpec {
  int64_t B = 1;
  int64_t streams = 20;  // S: token streams per window (--batch-size)
  uint64_t seed = 0;
  std::vector<int64_t> model_ids;  // empty = 0..B-1
  LmConfig config;
  // The order the models run a step in (not kAuto), and the threads it spreads workers over
  // (0 = OpenMP's count).
  ExecutionPlan plan = {};
  int threads = 0;
  // Where the nets live and run (NetSpec::device). kCuda runs plan fused only; host windows are
  // uploaded once per forward for all models, the losses copied back.
  Device device = Device::kCpu;
};

// Records logits [T, V] from the shared tokens [T].
using LmDefinition = Value (*)(Net& net, Value tokens, const LmConfig& config);

// Milliseconds per step of a profiled net (HFTA_PROFILE=1, models/net.h): in its attention
// nodes, and in all its nodes (forward + backward).
struct AttentionShare {
  double attention_ms = 0.0, total_ms = 0.0;
};
AttentionShare attention_share(const Net& net);
// `name`, the net's node-by-node profile, and the attention nodes' share of it.
std::string attention_profile_report(const std::string& name, const Net& net);

class LanguageModel {
 public:
  // Throws hfta::Error for sizes out of range (naming the flag).
  LanguageModel(std::string name, LanguageModelSpec spec, LmDefinition definition);
  LanguageModel(const LanguageModel&) = delete;
  LanguageModel& operator=(const LanguageModel&) = delete;

  // Runs all B models on one window, inputs and targets [S, T'] with T' <= bptt; losses() holds
  // each model's mean loss over the S*T' tokens. The window must stay alive until backward().
  // Token ids outside [0, V) throw hfta::Error.
  // Under a plan other than fused, a training forward runs in train_step() only.
  void forward(const IndexView& inputs, const IndexView& targets, bool training);
  // Zeroes and writes every parameter gradient for the last forward (fused plan only).
  void backward();
  // Called with each group of models [first, first + count) as soon as its gradients are
  // written, on the worker that wrote them (all B at once under fused): the caller clips and
  // updates the group while its gradients are in cache (Optimizer::step_models).
  using AfterBackward = std::function<void(int64_t first, int64_t count)>;
  // A training forward and backward of every model on one window, in the plan's order.
  void train_step(const IndexView& inputs, const IndexView& targets,
                  const AfterBackward& after_backward = {});
  const ExecutionPlan& plan() const { return spec_.plan; }
  const PlanLayout& layout() const { return layout_; }
  const std::vector<float>& losses() const { return losses_; }

  const std::string& name() const { return name_; }
  int64_t B() const { return spec_.B; }
  const LanguageModelSpec& spec() const { return spec_; }
  const LmConfig& config() const { return spec_.config; }
  Net& net() { return *main_.net; }
  const Net& net() const { return *main_.net; }
  const std::vector<Param>& params() const { return net().params(); }
  int64_t params_per_model() const { return net().params_per_model(); }
  // Bytes of the nets recorded so far (parameters, gradients, activations): under a plan the
  // groups' nets are recorded by their first step.
  size_t arena_bytes() const;
  std::string describe() const { return net().describe(); }
  // Forward + backward FLOPs of one model on one token stream of bptt tokens, whatever the plan
  // (under a plan after the first training step, which records the groups' nets).
  double train_flops_per_sample() const;
  // As Model::reinit_slot (models/slots.h): slot b becomes a fresh model `model_id`.
  void reinit_slot(int64_t b, int64_t model_id);
  LmDefinition definition() const { return definition_; }

  // Per-node timing with HFTA_PROFILE=1 (models/net.h), over the nets of every window length.
  bool profiling() const { return net().profiling(); }
  void reset_profile();
  // The full-length windows' net, node by node (ms per step), then the attention nodes' share.
  std::string profile_report() const;
  // attention_share of the full-length windows' net.
  using ProfileShare = AttentionShare;
  ProfileShare attention_profile() const;

 private:
  struct Runner {
    std::unique_ptr<Net> net;
    Value tokens, targets, logits, loss;
  };
  // A net for windows of T tokens: the main one (all B models, `state_only` under a plan), or
  // one bound to the main one's state for `models` models (external).
  Runner record(int64_t T, bool external, int64_t models = 0, bool state_only = false) const;
  Runner& runner_for(int64_t T);
  void check_window(const IndexView& inputs, const IndexView& targets) const;
  // The net that trains full-length windows: the main one under fused, else a group's.
  const Net& full_window_net() const;
  // Other plans: the runner of (T, group size, worker), recorded on first use.
  Runner& group_runner(int64_t T, int64_t models, int worker);
  void run_groups(const IndexView& inputs, const IndexView& targets, bool training,
                  bool with_backward, const AfterBackward& after_backward = {});

  std::string name_;
  LanguageModelSpec spec_;
  LmDefinition definition_;
  Runner main_;
  std::map<int64_t, Runner> short_;  // nets for windows shorter than bptt
  PlanLayout layout_;
  std::map<std::tuple<int64_t, int64_t, int>, Runner> groups_;  // (T, models, worker)
  Runner* last_ = nullptr;
  std::vector<float> losses_;
  // On a device: where a window's inputs and targets are uploaded to.
  Arena window_arena_;
  IndexView device_inputs_, device_targets_;
  StagedUpload input_upload_, target_upload_;
};

std::vector<std::string> language_model_names();
bool is_language_model(const std::string& name);
// Throws hfta::Error naming the choices for an unknown name.
std::unique_ptr<LanguageModel> make_language_model(const std::string& name,
                                                   const LanguageModelSpec& spec);

// The architectures (models/zoo_transformer.cpp).
Value define_transformer(Net& net, Value tokens, const LmConfig& config);

}  // namespace hfta
