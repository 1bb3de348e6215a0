#include "run/plan_cache.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/cpu/gemm_timing.h"
#include "core/determinism.h"
#include "core/error.h"
#include "core/parallel.h"
#include "io/temp_file.h"

namespace hfta {

namespace fs = std::filesystem;

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

// Which build measured an entry: the executable's size and modification time. A rebuilt hfta
// (other kernels, other plans) measures again instead of trusting its predecessor's choice.
std::string build_stamp() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "unknown build";
  const auto size = fs::file_size(exe, ec);
  const auto mtime = fs::last_write_time(exe, ec);
  if (ec) return "unknown build";
  const uint64_t stamp = static_cast<uint64_t>(size) * 1000003u ^
                         static_cast<uint64_t>(mtime.time_since_epoch().count());
  return fmt::format("build {:016x}", stamp);
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
// The file is read again just before the rename and only `key` is set: another process (a
// sweep's trials, tests running side by side) may have added entries since this one read it,
// and writing the stale copy would drop them, so a later run would time its plan again and
// might pick another one (plans agree only to rounding).
void write_cache(const std::string& path, const std::string& key, const nlohmann::json& entry,
                 const std::function<void(const std::string&)>& log) {
  nlohmann::json j = read_cache(path);
  j[key] = entry;
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  TempFile tmp(fmt::format("{}.tmp{}", path, getpid()));
  {
    std::ofstream out(tmp.path());
    if (out) out << j.dump(2) << "\n";
    if (!out) {
      log(fmt::format("could not write the plan cache {} (measuring again next time)", path));
      return;
    }
  }
  fs::rename(tmp.path(), path, ec);
  if (!ec) tmp.renamed();
}

}  // namespace

// Deterministic mode runs other kernels (core/determinism.h), so its timings are its own.
std::string plan_cache_key(const std::string& configuration) {
  return fmt::format("{} | {} threads{} | {} | {}", cpu_model_name(), num_threads(),
                     deterministic() ? " | deterministic" : "", configuration, build_stamp());
}

std::optional<ExecutionPlan> cached_plan(const std::string& path, const std::string& key) {
  const nlohmann::json cache = read_cache(path);
  const auto it = cache.find(key);
  if (it == cache.end() || !it->is_object() || !it->contains("plan")) return std::nullopt;
  try {
    return ExecutionPlan::parse(it->at("plan").get<std::string>());
  } catch (const std::exception&) {
    return std::nullopt;  // a stale or hand-edited entry: measure again
  }
}

std::optional<cpu::GemmRouting> cached_gemm_routing(const std::string& path,
                                                    const std::string& key) {
  const nlohmann::json cache = read_cache(path);
  const auto it = cache.find(key);
  if (it == cache.end() || !it->is_object() || !it->contains("routing")) return std::nullopt;
  cpu::GemmRouting routing;
  routing.fill(cpu::GemmBackend::kOneDnn);
  try {
    for (size_t c : cpu::kTimedGemmCases)
      routing[c] =
          cpu::parse_gemm_backend(it->at("routing").at(cpu::gemm_case_name(c)).get<std::string>());
    return routing;
  } catch (const std::exception&) {
    return std::nullopt;  // a stale or hand-edited entry: measure again
  }
}

void cache_plan(const std::string& path, const std::string& key, const ExecutionPlan& plan,
                const std::vector<std::pair<std::string, double>>& timings_ms,
                const std::function<void(const std::string&)>& log) {
  nlohmann::json entry = {{"timings_ms", nlohmann::json::object()}, {"plan", plan.str()}};
  for (const auto& [name, ms] : timings_ms) entry["timings_ms"][name] = ms;
  write_cache(path, key, entry, log);
}

cpu::GemmRouting choose_gemm_library(const std::function<void(const std::string&)>& log) {
  static const cpu::GemmRouting chosen = [&] {
    const char* env = std::getenv("HFTA_GEMM");
    if (env != nullptr && *env != '\0' && std::string(env) != "auto") {
      cpu::GemmBackend all;
      try {
        all = cpu::parse_gemm_backend(env);
      } catch (const Error& e) {
        throw Error(
            fmt::format("HFTA_GEMM: {} (or auto, the default: the faster one here)", e.what()));
      }
      return cpu::GemmRouting{all, all, all, all};
    }
    const std::string path = plan_cache_path();
    // Not the build: hfta and the test programs, and every rebuild, share the measurement, as
    // long as they time the same shapes the same way.
    const std::string key =
        fmt::format("{} | sgemm libraries | {} | {}", cpu_model_name(),
                    cpu::describe_gemm_libraries(), cpu::describe_gemm_timing());
    cpu::GemmRouting routing;
    routing.fill(cpu::GemmBackend::kOneDnn);
    if (const std::optional<cpu::GemmRouting> cached = cached_gemm_routing(path, key))
      return *cached;
    const std::vector<cpu::GemmCaseTiming> timings = cpu::time_gemm_libraries();
    routing = cpu::faster_gemm_routing(timings);
    nlohmann::json entry = {{"routing", nlohmann::json::object()},
                            {"openblas_time_over_onednn", nlohmann::json::object()},
                            {"timings_ms", nlohmann::json::object()}};
    std::vector<std::string> ratios, parts;
    for (size_t c : cpu::kTimedGemmCases) {
      const double ratio = cpu::openblas_time_ratio(timings, c);
      entry["routing"][cpu::gemm_case_name(c)] = cpu::gemm_backend_name(routing[c]);
      entry["openblas_time_over_onednn"][cpu::gemm_case_name(c)] = ratio;
      ratios.push_back(fmt::format("{} {:.2f}x", cpu::gemm_case_name(c), ratio));
    }
    for (const cpu::GemmCaseTiming& t : timings) {
      entry["timings_ms"][t.shape] = {{"onednn", t.onednn_ms}, {"openblas", t.openblas_ms}};
      parts.push_back(fmt::format("{} {:.3f}/{:.3f} ms", t.shape, t.onednn_ms, t.openblas_ms));
    }
    log(fmt::format(
        "sgemm libraries: timed oneDNN/OpenBLAS on one thread ({}): OpenBLAS takes {} of "
        "oneDNN's time -> {} (cached in {}; HFTA_GEMM=onednn|openblas names one)",
        fmt::join(parts, ", "), fmt::join(ratios, ", "), cpu::describe_gemm_routing(routing),
        path));
    write_cache(path, key, entry, log);
    return routing;
  }();
  cpu::set_gemm_routing(chosen);
  return chosen;
}

void prepare_runtime(int threads, bool deterministic) {
  set_deterministic(deterministic);
  if (threads > 0) cpu::set_num_threads(threads);
  choose_gemm_library([](const std::string& line) { fmt::print("{}\n", line); });
}

}  // namespace hfta
