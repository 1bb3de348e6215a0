#include "tune/tune_space.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/rng.h"

namespace hfta {

namespace {

const std::vector<std::string> kNonFusible = {"batch_size", "dropout", "no_decay_norm_bias",
                                              "optimizer"};
const std::vector<std::string> kDists = {"uniform", "loguniform", "int", "choice"};
// Per model, outside the optimizer: the --clip, --lr-gamma and --lr-step-size of the models that
// read them (run/task.h).
const std::vector<std::string> kPerModelFlagParams = {"clip", "lr_gamma", "lr_step_size"};

const HyperRow* find_row(const std::string& name) {
  for (const HyperRow& row : hyper_table())
    if (row.name == name) return &row;
  return nullptr;
}

// Drawn values train as floats (TuneSpace::sample): a number outside float's range would train
// as infinity.
bool is_float_number(double x) {
  return std::isfinite(x) && std::abs(x) <= std::numeric_limits<float>::max();
}

// Integer values (int bounds, batch sizes, step sizes) become int64_t: beyond 2^53 a double no
// longer holds every integer, and beyond 2^63 the conversion is undefined.
constexpr double kMaxInteger = 9007199254740992.0;  // 2^53

constexpr uintmax_t kMaxSpaceBytes = uintmax_t{16} << 20;

std::vector<std::string> known_params() {
  std::vector<std::string> names;
  for (const HyperRow& row : hyper_table()) names.emplace_back(row.name);
  names.insert(names.end(), kNonFusible.begin(), kNonFusible.end());
  names.insert(names.end(), kPerModelFlagParams.begin(), kPerModelFlagParams.end());
  return names;
}

}  // namespace

bool is_per_model_flag_param(const std::string& name) {
  return std::find(kPerModelFlagParams.begin(), kPerModelFlagParams.end(), name) !=
         kPerModelFlagParams.end();
}

bool is_non_fusible_param(const std::string& name) {
  return std::find(kNonFusible.begin(), kNonFusible.end(), name) != kNonFusible.end();
}

// Values are floats (sample() rounds them): the shortest text that reads back as the same float.
std::string TuneValue::str() const {
  return is_text ? text : fmt::format("{}", static_cast<float>(number));
}

TuneSpace TuneSpace::load(const std::string& file, const std::string& default_optimizer) {
  std::ifstream in(file);
  HFTA_CHECK(in.good(), "cannot read the search space {}: give an existing JSON file to --space",
             file);
  // Read whole (and copied into tune.json): a file the size of a disk image is a wrong path, not
  // a search space, and is refused before it is read into memory.
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(file, ec);
  HFTA_CHECK(!ec && size <= kMaxSpaceBytes,
             "search space {} is {} bytes: a search space is a JSON file of at most {} bytes; "
             "give it to --space",
             file, ec ? std::string("an unknown number of") : std::to_string(size), kMaxSpaceBytes);
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), file, default_optimizer);
}

TuneSpace TuneSpace::parse(const std::string& text, const std::string& file,
                           const std::string& default_optimizer) {
  TuneSpace space;
  space.file_ = file;
  space.text_ = text;
  space.default_optimizer_ = default_optimizer;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("search space {} is not valid JSON: {}", file, e.what());
  }
  HFTA_CHECK(j.is_object() && !j.empty(),
             "search space {} must be a non-empty JSON object of parameters, e.g. {{\"lr\": "
             "{{\"dist\": \"loguniform\", \"low\": 1e-4, \"high\": 0.1}}}}",
             file);
  for (const auto& [name, spec] : j.items()) {
    // An init-capture: clang 14 (HFTA_FUZZ builds) cannot capture a structured binding.
    auto bad = [&, &name = name](const std::string& why) {
      fail("search space {}, parameter \"{}\": {}", file, name, why);
    };
    const bool non_fusible = is_non_fusible_param(name);
    if (!non_fusible && !is_per_model_flag_param(name) && find_row(name) == nullptr)
      bad(fmt::format("unknown parameter; the known ones are {}", fmt::join(known_params(), ", ")));
    if (!spec.is_object()) bad("must be an object with \"dist\" and its bounds or values");
    TuneParam p{.name = name};
    for (const auto& [key, v] : spec.items())
      if (key != "dist" && key != "low" && key != "high" && key != "values" && key != "fusible")
        bad(fmt::format("unknown key \"{}\" (dist, low, high, values, fusible)", key));
    if (!spec.contains("dist") || !spec["dist"].is_string())
      bad(fmt::format("needs \"dist\": one of {}", fmt::join(kDists, ", ")));
    p.dist = spec["dist"].get<std::string>();
    if (std::find(kDists.begin(), kDists.end(), p.dist) == kDists.end())
      bad(fmt::format("unknown dist \"{}\": use one of {}", p.dist, fmt::join(kDists, ", ")));
    p.fusible = !non_fusible;
    if (spec.contains("fusible")) {
      if (!spec["fusible"].is_boolean()) bad("\"fusible\" must be true or false");
      p.fusible = spec["fusible"].get<bool>();
      if (p.fusible && non_fusible)
        bad("cannot differ between the models of one array (it is one value per array): set "
            "\"fusible\": false");
    }
    if (p.dist == "choice") {
      if (spec.contains("low") || spec.contains("high"))
        bad("a choice takes \"values\", not low/high");
      if (!spec.contains("values") || !spec["values"].is_array() || spec["values"].empty())
        bad("an empty choice: give \"values\": [a, b, ...] with at least one value");
      for (const auto& v : spec["values"]) {
        if (v.is_number()) {
          const double x = v.get<double>();
          if (!is_float_number(x))
            bad(
                fmt::format("choice value {} is not a finite number in float's range (about "
                            "+-3.4e38)",
                            v.dump()));
          p.values.push_back({.number = x});
        } else if (v.is_string() && name == "optimizer") {
          p.values.push_back({.text = v.get<std::string>(), .is_text = true});
        } else {
          bad(fmt::format("choice value {} is not a number{}", v.dump(),
                          name == "optimizer" ? " or optimizer name" : ""));
        }
      }
    } else {
      if (spec.contains("values"))
        bad(fmt::format("dist {} takes low and high, not values", p.dist));
      if (!spec.contains("low") || !spec["low"].is_number() || !spec.contains("high") ||
          !spec["high"].is_number())
        bad(fmt::format("dist {} needs numbers \"low\" and \"high\"", p.dist));
      p.low = spec["low"].get<double>();
      p.high = spec["high"].get<double>();
      if (!is_float_number(p.low) || !is_float_number(p.high))
        bad("low and high must be finite numbers in float's range (about +-3.4e38)");
      if (p.low > p.high) bad(fmt::format("low {:g} > high {:g}: swap them", p.low, p.high));
      if (p.dist == "loguniform" && p.low <= 0)
        bad(fmt::format("loguniform needs low > 0, got {:g}: use uniform, or a positive low",
                        p.low));
      if (p.dist == "int" && (p.low != std::floor(p.low) || p.high != std::floor(p.high)))
        bad("int needs integer low and high");
      if (p.dist == "int" && (std::abs(p.low) > kMaxInteger || std::abs(p.high) > kMaxInteger))
        bad(fmt::format("int bounds {:g} and {:g} must lie within +-2^53", p.low, p.high));
    }
    // Per-parameter value checks.
    auto each_number = [&](auto&& check) {
      if (p.dist == "choice") {
        for (const TuneValue& v : p.values) check(v.number);
      } else {
        check(p.low);
        check(p.high);
      }
    };
    if (name == "optimizer") {
      if (p.dist != "choice") bad("optimizer must be a choice of names");
      const auto names = optimizer_names();
      for (const TuneValue& v : p.values)
        if (!v.is_text || std::find(names.begin(), names.end(), v.text) == names.end())
          bad(fmt::format("unknown optimizer {}: use {}", v.str(), fmt::join(names, ", ")));
    } else if (name == "batch_size") {
      if (p.dist != "choice" && p.dist != "int") bad("batch_size must be an int or a choice");
      each_number([&](double x) {
        if (x < 1 || x != std::floor(x) || x > kMaxInteger)
          bad(fmt::format("batch size {:g} is not a positive integer up to 2^53", x));
      });
    } else if (name == "dropout") {
      each_number([&](double x) {
        if (x < 0 || x >= 1) bad(fmt::format("dropout {:g} is outside [0, 1)", x));
      });
    } else if (name == "no_decay_norm_bias") {
      if (p.dist != "choice") bad("no_decay_norm_bias must be a choice of 0 and 1");
      each_number([&](double x) {
        if (x != 0 && x != 1) bad(fmt::format("no_decay_norm_bias {:g} is not 0 or 1", x));
      });
    } else if (name == "clip") {
      each_number([&](double x) {
        if (x <= 0) bad(fmt::format("clip {:g} is not positive", x));
      });
    } else if (name == "lr_gamma") {
      each_number([&](double x) {
        if (x <= 0 || x > 1) bad(fmt::format("lr_gamma {:g} is outside (0, 1]", x));
      });
    } else if (name == "lr_step_size") {
      if (p.dist != "choice" && p.dist != "int") bad("lr_step_size must be an int or a choice");
      each_number([&](double x) {
        if (x < 1 || x != std::floor(x) || x > kMaxInteger)
          bad(fmt::format("lr_step_size {:g} is not a positive integer up to 2^53", x));
      });
    } else if (find_row(name)->is_switch) {
      if (p.dist != "choice") bad("a switch must be a choice of 0 and 1");
      each_number([&](double x) {
        if (x != 0 && x != 1) bad(fmt::format("switch value {:g} is not 0 or 1", x));
      });
    }
    space.params_.push_back(std::move(p));
  }
  // A hyperparameter must be read by an optimizer this space can pick (else it would silently
  // do nothing).
  std::vector<std::string> optimizers = {default_optimizer};
  for (const TuneParam& p : space.params_)
    if (p.name == "optimizer") {
      optimizers.clear();
      for (const TuneValue& v : p.values) optimizers.push_back(v.text);
    }
  for (const TuneParam& p : space.params_) {
    const HyperRow* row = find_row(p.name);
    if (row == nullptr) continue;
    const bool read = std::any_of(optimizers.begin(), optimizers.end(), [&](const std::string& o) {
      return row->default_for(o) != nullptr;
    });
    HFTA_CHECK(read,
               "search space {}, parameter \"{}\": conflicts with the optimizer ({}), which does "
               "not read it: remove it, or pick an optimizer that does (--optimizer or an "
               "\"optimizer\" choice)",
               file, p.name, fmt::join(optimizers, ", "));
  }
  return space;
}

TuneConfig TuneSpace::sample(uint64_t seed, int64_t i) const {
  // One stream per (seed, configuration); parameters draw in name order, one draw each.
  RngStream rng(seed ^ 0x7475'6e65'7370'6163ull, static_cast<uint64_t>(i));
  TuneConfig config;
  for (const TuneParam& p : params_) {
    const double u = static_cast<double>(rng.next_u64() >> 11) * (1.0 / 9007199254740992.0);
    TuneValue v;
    if (p.dist == "uniform") {
      v.number = p.low + (p.high - p.low) * u;
    } else if (p.dist == "loguniform") {
      v.number = std::exp(std::log(p.low) + (std::log(p.high) - std::log(p.low)) * u);
    } else if (p.dist == "int") {
      const auto n = static_cast<uint64_t>(p.high - p.low) + 1;
      v.number = p.low + static_cast<double>(std::min<uint64_t>(
                             n - 1, static_cast<uint64_t>(u * static_cast<double>(n))));
    } else {
      const auto n = p.values.size();
      v = p.values[std::min(n - 1, static_cast<size_t>(u * static_cast<double>(n)))];
    }
    // Hyperparameters train as floats: store the float, so history.csv and the reproduce
    // command give exactly what trained.
    if (!v.is_text) v.number = static_cast<double>(static_cast<float>(v.number));
    config[p.name] = v;
  }
  return config;
}

std::string ArrayKey::str() const {
  std::string s = fmt::format("{}, batch {}", optimizer, batch_size);
  if (dropout >= 0) s += fmt::format(", dropout {:g}", dropout);
  if (no_decay_norm_bias) s += ", no decay on norm/bias";
  return s;
}

ArrayKey array_key(const TuneConfig& config, const ArrayKey& defaults) {
  ArrayKey k = defaults;
  if (auto it = config.find("optimizer"); it != config.end()) k.optimizer = it->second.text;
  if (auto it = config.find("batch_size"); it != config.end())
    k.batch_size = static_cast<int64_t>(it->second.number);
  if (auto it = config.find("dropout"); it != config.end())
    k.dropout = static_cast<float>(it->second.number);
  if (auto it = config.find("no_decay_norm_bias"); it != config.end())
    k.no_decay_norm_bias = it->second.number != 0;
  return k;
}

HyperValues config_hyper(const TuneConfig& config, const std::string& optimizer) {
  HyperValues h;
  for (const auto& [name, v] : config) {
    const HyperRow* row = find_row(name);
    if (row != nullptr && row->default_for(optimizer) != nullptr)
      h[name] = {static_cast<float>(v.number)};
  }
  return h;
}

}  // namespace hfta
