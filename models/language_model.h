// An array of B word-level language models of one architecture over the same token windows: a
// Net recorded by the model's definition from shared tokens [T] to per-model logits [T, V], plus
// a per-token cross-entropy against the shared next tokens. Each model's loss is its own mean over
// every token of the window (word_language_model's criterion on the flattened output).
//
// Windows are [S, T'] token ids (S streams, T' <= bptt). The net is recorded for T = bptt; a
// shorter window (the last of a pass) runs on a net recorded for T' that shares the main net's
// parameters, gradients and streams (Net::bind_state), recorded once per length. Only the fused
// execution plan exists here.
//
// Equivalence: as models/model.h, model b draws its weights and dropout from its model id, so a
// B = 1 array with model_ids = {b} computes exactly what model b of any array computes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "models/net.h"

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
};

// Records logits [T, V] from the shared tokens [T].
using LmDefinition = Value (*)(Net& net, Value tokens, const LmConfig& config);

class LanguageModel {
 public:
  // Throws hfta::Error for sizes out of range (naming the flag).
  LanguageModel(std::string name, LanguageModelSpec spec, LmDefinition definition);
  LanguageModel(const LanguageModel&) = delete;
  LanguageModel& operator=(const LanguageModel&) = delete;

  // Runs all B models on one window, inputs and targets [S, T'] with T' <= bptt; losses() holds
  // each model's mean loss over the S*T' tokens. The window must stay alive until backward().
  // Token ids outside [0, V) throw hfta::Error.
  void forward(const IndexView& inputs, const IndexView& targets, bool training);
  // Zeroes and writes every parameter gradient for the last forward.
  void backward();
  void train_step(const IndexView& inputs, const IndexView& targets) {
    forward(inputs, targets, true);
    backward();
  }
  const std::vector<float>& losses() const { return losses_; }

  const std::string& name() const { return name_; }
  int64_t B() const { return spec_.B; }
  const LanguageModelSpec& spec() const { return spec_; }
  const LmConfig& config() const { return spec_.config; }
  Net& net() { return *main_.net; }
  const Net& net() const { return *main_.net; }
  const std::vector<Param>& params() const { return net().params(); }
  int64_t params_per_model() const { return net().params_per_model(); }
  std::string describe() const { return net().describe(); }

 private:
  struct Runner {
    std::unique_ptr<Net> net;
    Value tokens, targets, logits, loss;
  };
  Runner record(int64_t T, bool external) const;
  Runner& runner_for(int64_t T);

  std::string name_;
  LanguageModelSpec spec_;
  LmDefinition definition_;
  Runner main_;
  std::map<int64_t, Runner> short_;  // nets for windows shorter than bptt
  Runner* last_ = nullptr;
  std::vector<float> losses_;
};

std::vector<std::string> language_model_names();
bool is_language_model(const std::string& name);
// Throws hfta::Error naming the choices for an unknown name.
std::unique_ptr<LanguageModel> make_language_model(const std::string& name,
                                                   const LanguageModelSpec& spec);

// The architectures (models/zoo_transformer.cpp).
Value define_transformer(Net& net, Value tokens, const LmConfig& config);

}  // namespace hfta
