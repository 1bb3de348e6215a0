#include "run/hyper.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>

#include "core/error.h"
#include "models/model.h"
#include "optim/adadelta.h"
#include "optim/adam.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"

namespace hfta {

namespace {

// The adam and adamw defaults of a row they both read.
std::vector<HyperDefault> adams(float value) { return {{"adam", value}, {"adamw", value}}; }

std::vector<HyperDefault> plus(std::vector<HyperDefault> a, const std::vector<HyperDefault>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const std::vector<float>& get(const HyperValues& v, const char* name) {
  auto it = v.find(name);
  HFTA_CHECK(it != v.end(), "internal: hyperparameter {} is not resolved", name);
  return it->second;
}

std::vector<uint8_t> switches(const std::vector<float>& values) {
  return {values.begin(), values.end()};
}

// How one optimizer is built from resolved values.
struct OptimizerEntry {
  std::string_view name;
  std::function<void(const HyperValues&)> check;  // throws hfta::Error naming the model
  std::function<std::unique_ptr<Optimizer>(ParamTable, const HyperValues&)> make;
};

// `to_hyper(values)` gives the optimizer's hyper struct (with check()); Opt(ParamTable, Hyper).
template <typename Opt, typename ToHyper>
OptimizerEntry entry(std::string_view name, ToHyper to_hyper) {
  return {name, [to_hyper](const HyperValues& v) { to_hyper(v).check(); },
          [to_hyper](ParamTable table, const HyperValues& v) -> std::unique_ptr<Optimizer> {
            return std::make_unique<Opt>(std::move(table), to_hyper(v));
          }};
}

AdamHyper adam_hyper(const HyperValues& v) {
  return {.lr = get(v, "lr"),
          .beta1 = get(v, "beta1"),
          .beta2 = get(v, "beta2"),
          .eps = get(v, "eps"),
          .weight_decay = get(v, "weight_decay")};
}

const std::vector<OptimizerEntry>& optimizers() {
  static const std::vector<OptimizerEntry> list = {
      entry<FusedAdam>("adam", adam_hyper),
      entry<FusedAdamW>("adamw", adam_hyper),
      entry<FusedSgd>("sgd",
                      [](const HyperValues& v) {
                        return SgdHyper{.lr = get(v, "lr"),
                                        .momentum = get(v, "momentum"),
                                        .weight_decay = get(v, "weight_decay"),
                                        .nesterov = switches(get(v, "nesterov"))};
                      }),
      entry<FusedAdadelta>("adadelta",
                           [](const HyperValues& v) {
                             return AdadeltaHyper{.lr = get(v, "lr"),
                                                  .rho = get(v, "rho"),
                                                  .eps = get(v, "eps"),
                                                  .weight_decay = get(v, "weight_decay")};
                           }),
      entry<FusedRmsprop>("rmsprop",
                          [](const HyperValues& v) {
                            return RmspropHyper{.lr = get(v, "lr"),
                                                .alpha = get(v, "alpha"),
                                                .eps = get(v, "eps"),
                                                .weight_decay = get(v, "weight_decay"),
                                                .momentum = get(v, "momentum"),
                                                .centered = switches(get(v, "centered"))};
                          }),
  };
  return list;
}

const OptimizerEntry& optimizer_entry(std::string_view name) {
  for (const OptimizerEntry& e : optimizers())
    if (e.name == name) return e;
  fail("--optimizer {} is not known: choose {}", name, fmt::join(optimizer_names(), ", "));
}

}  // namespace

const std::vector<HyperRow>& hyper_table() {
  static const std::vector<HyperRow> rows = {
      {"lr", "Learning rate", false,
       plus(adams(1e-3f), {{"sgd", 1e-3f}, {"adadelta", 1.0f}, {"rmsprop", 1e-2f}})},
      {"beta1", "Adam beta1", false, adams(0.9f)},
      {"beta2", "Adam beta2", false, adams(0.999f)},
      {"rho", "Adadelta's decay of its running averages", false, {{"adadelta", 0.9f}}},
      {"alpha", "RMSprop's decay of its squared-gradient average", false, {{"rmsprop", 0.99f}}},
      {"eps", "Term added to the denominator", false,
       plus(adams(1e-8f), {{"adadelta", 1e-6f}, {"rmsprop", 1e-8f}})},
      {"weight_decay", "Weight decay", false,
       plus(adams(0.0f), {{"sgd", 0.0f}, {"adadelta", 0.0f}, {"rmsprop", 0.0f}})},
      {"momentum", "SGD / RMSprop momentum", false, {{"sgd", 0.0f}, {"rmsprop", 0.0f}}},
      {"nesterov", "SGD Nesterov momentum (0 or 1)", true, {{"sgd", 0.0f}}},
      {"centered",
       "RMSprop centered (0 or 1): normalize by the gradient's variance",
       true,
       {{"rmsprop", 0.0f}}},
  };
  return rows;
}

std::string HyperRow::flag() const {
  std::string f = "--" + std::string(name);
  std::replace(f.begin(), f.end(), '_', '-');
  return f;
}

const HyperDefault* HyperRow::default_for(std::string_view optimizer) const {
  for (const HyperDefault& d : used_by)
    if (d.optimizer == optimizer) return &d;
  return nullptr;
}

std::vector<std::string> optimizer_names() {
  std::vector<std::string> names;
  for (const OptimizerEntry& e : optimizers()) names.emplace_back(e.name);
  return names;
}

std::vector<float> parse_hyper_list(const HyperRow& row, const std::string& text) {
  const std::string flag = row.flag();
  HFTA_CHECK(!text.empty(), "{} is empty: give one number (shared by all models) or one per model",
             flag);
  std::vector<float> values;
  size_t begin = 0;
  while (true) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    HFTA_CHECK(!item.empty(),
               "{} '{}' has an empty value at position {}: give numbers like 0.1,0.2", flag, text,
               values.size() + 1);
    float v = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    HFTA_CHECK(ec == std::errc() && ptr == item.data() + item.size(),
               "{}: '{}' is not a number (in '{}')", flag, item, text);
    values.push_back(v);
    if (end == text.size()) break;
    begin = end + 1;
  }
  return values;
}

int64_t array_size(const HyperValues& given) {
  const HyperRow* longest = nullptr;
  size_t B = 1;
  for (const HyperRow& row : hyper_table()) {
    auto it = given.find(std::string(row.name));
    if (it == given.end()) continue;
    HFTA_CHECK(!it->second.empty(), "{} needs at least one value", row.flag());
    if (it->second.size() > B) B = it->second.size(), longest = &row;
  }
  for (const HyperRow& row : hyper_table()) {
    auto it = given.find(std::string(row.name));
    if (it == given.end()) continue;
    HFTA_CHECK(it->second.size() == 1 || it->second.size() == B,
               "{} has {} values but {} has {}: give each hyperparameter one value (shared by "
               "all models) or one value per model",
               row.flag(), it->second.size(), longest->flag(), B);
  }
  return static_cast<int64_t>(B);
}

HyperValues resolve_hyper(std::string_view optimizer, const HyperValues& given, int64_t B) {
  const OptimizerEntry& entry = optimizer_entry(optimizer);
  for (const auto& [name, values] : given) {
    // An init-capture: clang 14 (HFTA_FUZZ builds) cannot capture a structured binding.
    auto row = std::find_if(hyper_table().begin(), hyper_table().end(),
                            [&name = name](const HyperRow& r) { return r.name == name; });
    HFTA_CHECK(row != hyper_table().end(), "internal: no hyperparameter {}", name);
    std::vector<std::string_view> users;
    for (const HyperDefault& d : row->used_by) users.push_back(d.optimizer);
    HFTA_CHECK(row->default_for(optimizer) != nullptr,
               "{} is not a hyperparameter of --optimizer {} (only {} read it)", row->flag(),
               optimizer, fmt::join(users, ", "));
  }
  HyperValues resolved;
  for (const HyperRow& row : hyper_table()) {
    const HyperDefault* d = row.default_for(optimizer);
    if (d == nullptr) continue;
    auto it = given.find(std::string(row.name));
    std::vector<float> values = expand_per_model(
        it == given.end() ? std::vector<float>{d->value} : it->second, B, row.flag());
    for (size_t b = 0; b < values.size(); ++b) {
      HFTA_CHECK(std::isfinite(values[b]), "{}: model {} has {}: hyperparameters must be finite",
                 row.flag(), b, values[b]);
      HFTA_CHECK(!row.is_switch || values[b] == 0.0f || values[b] == 1.0f,
                 "{}: model {} has {}: expected 0 or 1", row.flag(), b, values[b]);
    }
    resolved[std::string(row.name)] = std::move(values);
  }
  entry.check(resolved);
  return resolved;
}

HyperValues pick_models(const HyperValues& values, const std::vector<int64_t>& ids) {
  HyperValues out;
  for (const auto& [name, all] : values)
    for (int64_t id : ids) out[name].push_back(all.at(static_cast<size_t>(id)));
  return out;
}

std::unique_ptr<Optimizer> make_optimizer(std::string_view name, const Model& model,
                                          const HyperValues& values, bool no_decay_norm_bias) {
  std::vector<TensorView> views;
  std::vector<uint8_t> decay;
  for (const Param& p : model.params()) {
    views.push_back(p.value);
    decay.push_back(!no_decay_norm_bias || p.kind == ParamKind::kWeight);
  }
  return optimizer_entry(name).make(ParamTable::from_arena(model.param_arena(), views, decay),
                                    values);
}

std::unique_ptr<Optimizer> make_optimizer(std::string_view name, const Net& net,
                                          const HyperValues& values, bool no_decay_norm_bias) {
  std::vector<TensorView> views;
  std::vector<uint8_t> decay;
  for (const Param& p : net.params()) {
    views.push_back(p.value);
    decay.push_back(!no_decay_norm_bias || p.kind == ParamKind::kWeight);
  }
  return optimizer_entry(name).make(ParamTable::from_arena(net.param_arena(), views, decay),
                                    values);
}

std::map<std::string, std::vector<double>> hyper_record(const HyperValues& values) {
  std::map<std::string, std::vector<double>> out;
  for (const auto& [name, v] : values) out[name].assign(v.begin(), v.end());
  return out;
}

}  // namespace hfta
