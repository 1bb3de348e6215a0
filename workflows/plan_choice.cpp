#include "workflows/plan_choice.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "workflows/hyper.h"

namespace hfta {

namespace fs = std::filesystem;

std::vector<ExecutionPlan> plan_candidates(int64_t B, int threads) {
  std::vector<ExecutionPlan> plans = {ExecutionPlan::fused()};
  if (B <= 1) return plans;
  for (int64_t c = 1; c < B; c *= 2) plans.push_back(ExecutionPlan::chunks(c));
  if (threads > 1) {
    plans.push_back(ExecutionPlan::threads());
    // Blocks of several models per thread: also one model at a time (B processes' working set).
    if (B > threads) plans.push_back(ExecutionPlan::threads(1));
  }
  return plans;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(colon + 1);
        name.erase(0, name.find_first_not_of(" \t"));
        return name;
      }
    }
  return "unknown cpu";
}

std::string plan_cache_path() {
  if (const char* p = std::getenv("HFTA_PLAN_CACHE"); p && *p) return p;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return (fs::path(x) / "hfta" / "plans.json").string();
  if (const char* h = std::getenv("HOME"); h && *h)
    return (fs::path(h) / ".cache" / "hfta" / "plans.json").string();
  return (fs::temp_directory_path() / "hfta-plans.json").string();
}

namespace {

std::string cache_key(const ModelConfig& config, int64_t B, int64_t batch_size,
                      std::string_view optimizer) {
  return fmt::format(
      "{} | {} threads | {} {} {} classes{} | B {} | batch {} | {}", cpu_model_name(),
      num_threads(), config.name, config.sample_shape.str(), config.num_classes,
      config.dropout ? fmt::format(" dropout {}", *config.dropout) : "", B, batch_size, optimizer);
}

// The cache's contents; an unreadable or malformed file counts as empty (it is only a cache).
nlohmann::json read_cache(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json::object();
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    if (j.is_object()) return j;
  } catch (const std::exception&) {
  }
  return nlohmann::json::object();
}

// Best effort: a read-only home directory must not stop a training run.
void write_cache(const std::string& path, const nlohmann::json& j,
                 const std::function<void(const std::string&)>& log) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string tmp = fmt::format("{}.tmp{}", path, getpid());
  {
    std::ofstream out(tmp);
    if (out) out << j.dump(2) << "\n";
    if (!out) {
      log(fmt::format("plan auto: could not write the plan cache {} (measuring again next time)",
                      path));
      return;
    }
  }
  fs::rename(tmp, path, ec);
}

// Median time of an optimizer step (forward, backward and update, all models) under `plan`.
PlanTiming time_plan(const ExecutionPlan& plan, const ModelConfig& config,
                     const std::vector<int64_t>& ids, int64_t batch_size, uint64_t seed,
                     std::string_view optimizer, int64_t memory_budget_bytes) {
  ModelConfig c = config;
  c.plan = plan;
  ModelArray array{.ids = ids, .model = make_model(c.name, c.spec(ids, batch_size, seed))};
  const Model& model = *array.model;
  PlanTiming t{.plan = plan, .arena_bytes = static_cast<double>(model.arena_bytes())};
  if (memory_budget_bytes > 0 && t.arena_bytes > static_cast<double>(memory_budget_bytes)) {
    t.over_budget = true;
    return t;
  }
  // Random inputs: the time of a step does not depend on the values.
  RngStream rng(seed, 0x91a7);
  std::vector<float> images(static_cast<size_t>(batch_size * config.sample_shape.numel()));
  for (float& v : images) v = rng.normal();
  // One label per sample, or per point for a segmentation model.
  const int64_t per_sample = model.labels_per_sample();
  std::vector<int32_t> labels(static_cast<size_t>(batch_size * per_sample));
  for (size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<int32_t>(i % static_cast<size_t>(config.num_classes));
  Shape shape{batch_size};
  for (int64_t d : config.sample_shape) shape.push_back(d);
  const TensorView x(images.data(), shape);
  const IndexView y(labels.data(),
                    per_sample == 1 ? Shape{batch_size} : Shape{batch_size, per_sample});
  const int64_t B = static_cast<int64_t>(ids.size());
  array.optimizer =
      make_optimizer(optimizer, model, resolve_hyper(optimizer, {}, B), config.no_decay_norm_bias);
  array_step(array, x, y);  // warm-up: primitives, caches, pages
  std::vector<double> ms;
  double total = 0.0;
  // At least 3 steps, and enough for ~0.3 s, at most 15.
  while (ms.size() < 3 || (total < 300.0 && ms.size() < 15)) {
    const auto start = std::chrono::steady_clock::now();
    array_step(array, x, y);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
    total += ms.back();
  }
  std::nth_element(ms.begin(), ms.begin() + static_cast<long>(ms.size() / 2), ms.end());
  t.step_ms = ms[ms.size() / 2];
  return t;
}

}  // namespace

PlanChoice resolve_plan(const ExecutionPlan& asked, const ModelConfig& config,
                        const std::vector<int64_t>& ids, int64_t batch_size, uint64_t seed,
                        std::string_view optimizer, int64_t memory_budget_bytes,
                        const std::function<void(const std::string&)>& log) {
  PlanChoice choice{.plan = asked};
  if (asked.kind != ExecutionPlan::Kind::kAuto) return choice;
  const int64_t B = static_cast<int64_t>(ids.size());
  const std::vector<ExecutionPlan> candidates = plan_candidates(B, num_threads());
  if (candidates.size() == 1) {
    choice.plan = candidates.front();
    return choice;
  }
  choice.cache_path = plan_cache_path();
  const std::string key = cache_key(config, B, batch_size, optimizer);
  nlohmann::json cache = read_cache(choice.cache_path);
  if (cache.contains(key) && cache[key].contains("plan")) {
    try {
      choice.plan = ExecutionPlan::parse(cache[key]["plan"].get<std::string>());
      choice.cached = true;
      log(fmt::format("plan auto: {} (measured before on this machine; cache {})",
                      choice.plan.str(), choice.cache_path));
      return choice;
    } catch (const std::exception&) {
      // A stale or hand-edited entry: measure again.
    }
  }
  const PlanTiming* best = nullptr;
  for (const ExecutionPlan& plan : candidates)
    choice.timings.push_back(
        time_plan(plan, config, ids, batch_size, seed, optimizer, memory_budget_bytes));
  std::vector<std::string> parts;
  nlohmann::json entry = {{"timings_ms", nlohmann::json::object()}};
  for (const PlanTiming& t : choice.timings) {
    if (t.over_budget) {
      parts.push_back(fmt::format("{} over the memory budget ({:.0f} MiB)", t.plan.str(),
                                  t.arena_bytes / (1 << 20)));
      continue;
    }
    parts.push_back(fmt::format("{} {:.2f} ms", t.plan.str(), t.step_ms));
    entry["timings_ms"][t.plan.str()] = t.step_ms;
    if (best == nullptr || t.step_ms < best->step_ms) best = &t;
  }
  HFTA_CHECK(best != nullptr,
             "no plan fits the memory budget of {:.0f} MiB for {} models of {}: raise the budget "
             "or train fewer models",
             static_cast<double>(memory_budget_bytes) / (1 << 20), B, config.name);
  choice.plan = best->plan;
  entry["plan"] = choice.plan.str();
  log(fmt::format("plan auto: timed a step of each plan ({}): {} -> {}", fmt::join(parts, ", "),
                  key, choice.plan.str()));
  cache[key] = entry;
  write_cache(choice.cache_path, cache, log);
  return choice;
}

}  // namespace hfta
