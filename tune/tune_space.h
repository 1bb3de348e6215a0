// The search space of `hfta tune`: a JSON file naming, per parameter, a distribution and whether
// it is fusible (differs between the models of one fused array) or not (splits arrays):
//
//   {"lr":         {"dist": "loguniform", "low": 1e-4, "high": 1e-1},
//    "beta1":      {"dist": "uniform", "low": 0.8, "high": 0.95, "fusible": true},
//    "batch_size": {"dist": "choice", "values": [32, 64], "fusible": false},
//    "optimizer":  {"dist": "choice", "values": ["adam", "sgd"]}}
//
// Parameters: every optimizer hyperparameter of hyper_table() (fusible by default: one value per
// model of an array), a language model's clip, lr_gamma and lr_step_size (fusible), and the
// non-fusible batch_size, optimizer, dropout and no_decay_norm_bias
// (one value per array: configurations that differ there train in different arrays, as HFHT
// partitions them). Distributions: uniform and loguniform [low, high), int (uniform integer in
// [low, high]), choice (one of values, equally likely).
//
// Sampling is seeded per configuration: configuration i is a function of (seed, i) alone, so
// every mode, every algorithm and every resume draws the same configuration i.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "run/hyper.h"

namespace hfta {

// A drawn value: a number, or text for choices of names (optimizer).
struct TuneValue {
  double number = 0.0;
  std::string text;
  bool is_text = false;
  std::string str() const;  // as written in history.csv and the reproduce command
  bool operator==(const TuneValue&) const = default;
};

struct TuneParam {
  std::string name;
  std::string dist;  // uniform, loguniform, int, choice
  double low = 0.0, high = 0.0;
  std::vector<TuneValue> values;  // choice
  bool fusible = true;
};

// One configuration: a value per parameter of the space.
using TuneConfig = std::map<std::string, TuneValue>;

class TuneSpace {
 public:
  // Parses `text` (the contents of `file`, named in errors) and checks it against the run's
  // optimizer (the --optimizer flag, used when the space has no optimizer parameter). Throws
  // hfta::Error naming the file, the parameter and the fix: malformed JSON, an unknown parameter
  // or distribution, low > high, loguniform low <= 0, an empty choice, a non-fusible parameter
  // marked fusible, a hyperparameter no optimizer of the space reads, a bad batch size, a number
  // outside float's range, an integer (int bounds, batch_size, lr_step_size) beyond 2^53.
  // load() also refuses a file over 16 MiB before reading it.
  static TuneSpace parse(const std::string& text, const std::string& file,
                         const std::string& default_optimizer);
  static TuneSpace load(const std::string& file, const std::string& default_optimizer);

  const std::vector<TuneParam>& params() const { return params_; }
  const std::string& file() const { return file_; }
  const std::string& text() const { return text_; }

  // Configuration i of seed `seed`: a function of (seed, i) alone.
  TuneConfig sample(uint64_t seed, int64_t i) const;

 private:
  std::string file_, text_, default_optimizer_;
  std::vector<TuneParam> params_;  // sorted by name
};

// What a configuration fixes for one array (the non-fusible part), with defaults from the run.
struct ArrayKey {
  std::string optimizer;
  int64_t batch_size = 64;
  float dropout = -1.0f;  // negative: the architecture's own
  bool no_decay_norm_bias = false;
  auto operator<=>(const ArrayKey&) const = default;
  std::string str() const;  // "adam, batch 64"
};
ArrayKey array_key(const TuneConfig& config, const ArrayKey& defaults);

// The configuration's optimizer hyperparameters (those its optimizer reads), one value each.
HyperValues config_hyper(const TuneConfig& config, const std::string& optimizer);

// The parameters that only split arrays.
bool is_non_fusible_param(const std::string& name);
// Per-model parameters outside the optimizer, each a model-specific flag of `hfta train`: clip,
// lr_gamma, lr_step_size (tune.cpp refuses them for a model that does not read the flag).
bool is_per_model_flag_param(const std::string& name);

}  // namespace hfta
