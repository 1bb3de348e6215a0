// The one table of optimizer hyperparameters. Everything that names a hyperparameter reads it:
// the `hfta train` flags (--lr, --beta1, ...), the optimizer construction, the summary.csv
// columns, the checkpoint's hyper map and the --resume check.
//
// A row is one hyperparameter: its name (the checkpoint key and summary.csv column; the flag is
// --name with '-' for '_'), what it means, and the optimizers that read it, each with its own
// default (eps: 1e-8 for Adam, 1e-6 for Adadelta). A new optimizer adds its name, with a default,
// to the rows it reads, new rows for hyperparameters no other optimizer has, and one line to
// optimizers() in hyper.cpp that maps the per-model values onto its hyper struct. For example
// Adadelta: "adadelta" in lr, eps (1e-6) and weight_decay, a row rho {"adadelta", 0.9}, and
//   entry<FusedAdadelta>("adadelta", [](const HyperValues& v) {
//     return AdadeltaHyper{.lr = get(v, "lr"), .rho = get(v, "rho"), ...}; })
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hfta {

class Model;
class Net;
class Optimizer;

struct HyperDefault {
  std::string_view optimizer;
  float value;
};

struct HyperRow {
  std::string_view name;
  std::string_view help;
  bool is_switch = false;             // 0 or 1 (e.g. nesterov)
  std::vector<HyperDefault> used_by;  // the optimizers that read it, with their defaults

  std::string flag() const;  // "--weight-decay" for weight_decay
  // This row's default for `optimizer`; nullptr when the optimizer does not read it.
  const HyperDefault* default_for(std::string_view optimizer) const;
};

// Every hyperparameter, in the order of the flags and the summary.csv columns.
const std::vector<HyperRow>& hyper_table();

// The optimizers `hfta train` can build ("adam", "adamw", "sgd").
std::vector<std::string> optimizer_names();

// Hyperparameter values by row name. As given by the user: one list per flag given, of one value
// (shared by all models) or B values. Resolved: every row the optimizer reads, one value per model.
using HyperValues = std::map<std::string, std::vector<float>>;

// One flag's text ("0.1,0.2") as numbers. Throws hfta::Error naming the flag on an empty list,
// an empty element ("0.1,,0.2") or one that is not a number.
std::vector<float> parse_hyper_list(const HyperRow& row, const std::string& text);

// The number of models the given lists imply: the longest list's length (1 when none is given).
// Throws hfta::Error naming the flags when two lists of more than one value differ in length, or
// when a list is empty.
int64_t array_size(const HyperValues& given);

// Every row `optimizer` reads, one value per model for B models: the given lists expanded, the
// optimizer's defaults for the rest. Throws hfta::Error naming the flag for an unknown optimizer,
// a list of another length than 1 or B, a row the optimizer does not read, a value that is not
// finite or a switch other than 0 or 1; the optimizer's own range checks follow (naming the model).
HyperValues resolve_hyper(std::string_view optimizer, const HyperValues& given, int64_t B);

// The values of models `ids` (indices into the resolved lists).
HyperValues pick_models(const HyperValues& values, const std::vector<int64_t>& ids);

// The optimizer `name` over `model`'s parameters with per-model `values` (resolved for the
// model's B models).
// With `no_decay_norm_bias`, norm parameters and biases get no weight decay.
std::unique_ptr<Optimizer> make_optimizer(std::string_view name, const Model& model,
                                          const HyperValues& values,
                                          bool no_decay_norm_bias = false);

// The same over a net's parameters (a language model's, models/language_model.h).
std::unique_ptr<Optimizer> make_optimizer(std::string_view name, const Net& net,
                                          const HyperValues& values,
                                          bool no_decay_norm_bias = false);
// The values as a checkpoint records them.
std::map<std::string, std::vector<double>> hyper_record(const HyperValues& values);

}  // namespace hfta
