#include "sweep/plot.h"

#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"

extern char** environ;

namespace hfta {

namespace {

struct Range {
  std::vector<double> values;
  double min = INFINITY, max = -INFINITY;
  int n = 0;
  void add(double v) { values.push_back(v), min = std::min(min, v), max = std::max(max, v), ++n; }
  double median() const { return hfta::median(values); }
};

bool parse_number(const std::string& text, double& value) {
  if (text.empty()) return false;
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return *end == '\0' && std::isfinite(value);
}

// Data block names must be identifiers.
std::string block_name(const std::string& mode) {
  std::string name = "$";
  for (char c : mode) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

const char* mode_color(const std::string& mode, size_t index) {
  if (mode == "serial") return "#1f77b4";
  if (mode == "concurrent") return "#ff7f0e";
  if (mode == "fused") return "#2ca02c";
  const char* others[] = {"#d62728", "#9467bd", "#8c564b", "#e377c2"};
  return others[index % 4];
}

std::string gp_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + '"';
}

}  // namespace

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::vector<SweepPoint> summarize_sweep(const CsvTable& table) {
  const size_t mode_col = table.column("mode"), B_col = table.column("B"),
               status_col = table.column("status"), norm_col = table.column("normalized"),
               sps_col = table.column("samples_per_s"), rss_col = table.column("peak_rss_mib");
  std::vector<std::string> modes;
  struct Acc {
    Range normalized, samples, rss;
  };
  std::map<std::pair<std::string, int64_t>, Acc> acc;
  // Fused rows of several plans (sweep --plan a,b) are a line each, "fused (a)"; files from before
  // plans existed have no plan_asked column.
  const bool has_plans =
      std::find(table.header.begin(), table.header.end(), "plan_asked") != table.header.end();
  std::vector<std::string> fused_plans;
  if (has_plans)
    for (const auto& row : table.rows)
      if (row[mode_col] == "fused" &&
          std::find(fused_plans.begin(), fused_plans.end(), row[table.column("plan_asked")]) ==
              fused_plans.end())
        fused_plans.push_back(row[table.column("plan_asked")]);
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const auto& row = table.rows[r];
    if (row[status_col] != "ok") continue;
    std::string mode = row[mode_col];
    if (mode == "fused" && fused_plans.size() > 1)
      mode += " (" + row[table.column("plan_asked")] + ")";
    if (std::find(modes.begin(), modes.end(), mode) == modes.end()) modes.push_back(mode);
    const int64_t B = table.integer(r, B_col);
    HFTA_CHECK(B >= 1, "{} line {}, column B: {} models is not a measured array (B is at least 1)",
               table.path, table.line_numbers.at(r), B);
    Acc& a = acc[{mode, B}];
    double v;
    if (parse_number(row[norm_col], v)) a.normalized.add(v);
    if (parse_number(row[sps_col], v)) a.samples.add(v);
    if (parse_number(row[rss_col], v)) a.rss.add(v);
  }
  std::vector<SweepPoint> points;
  for (const std::string& mode : modes)
    for (const auto& [key, a] : acc) {  // std::map: B ascending within a mode
      if (key.first != mode) continue;
      SweepPoint p;
      p.mode = mode;
      p.B = key.second;
      p.runs = a.samples.n;
      p.has_normalized = a.normalized.n == a.samples.n && a.samples.n > 0;
      p.normalized_median = a.normalized.median(), p.normalized_min = a.normalized.min,
      p.normalized_max = a.normalized.max;
      p.samples_median = a.samples.median(), p.samples_min = a.samples.min,
      p.samples_max = a.samples.max;
      p.rss_mib_median = a.rss.median(), p.rss_mib_min = a.rss.n ? a.rss.min : 0,
      p.rss_mib_max = a.rss.n ? a.rss.max : 0;
      points.push_back(p);
    }
  return points;
}

namespace {

// The modes of a sweep's points (in order of first appearance), its B values (ascending), and
// whether every point is normalized (the serial B=1 baseline ran).
struct SweepAxes {
  std::vector<std::string> modes;
  std::vector<int64_t> Bs;
  bool normalized = false;
};

SweepAxes axes_of(const std::vector<SweepPoint>& points) {
  SweepAxes a;
  a.normalized = !points.empty();
  for (const SweepPoint& p : points) {
    if (std::find(a.modes.begin(), a.modes.end(), p.mode) == a.modes.end())
      a.modes.push_back(p.mode);
    if (std::find(a.Bs.begin(), a.Bs.end(), p.B) == a.Bs.end()) a.Bs.push_back(p.B);
    a.normalized = a.normalized && p.has_normalized;
  }
  std::sort(a.Bs.begin(), a.Bs.end());
  return a;
}

// "fused", or "fused (<plan>)" in a sweep of several plans (summarize_sweep).
bool is_fused_mode(const std::string& mode) {
  return mode == "fused" || mode.starts_with("fused (");
}

}  // namespace

std::string fusion_table(const std::vector<SweepPoint>& points) {
  // References, not a structured binding: clang before 16 cannot capture those in lambdas.
  const SweepAxes axes = axes_of(points);
  const auto& modes = axes.modes;
  const auto& Bs = axes.Bs;
  const bool normalized = axes.normalized;
  std::vector<std::string> fused, others;
  for (const std::string& m : modes) (is_fused_mode(m) ? fused : others).push_back(m);
  auto point = [&](const std::string& mode, int64_t B) -> const SweepPoint* {
    for (const SweepPoint& p : points)
      if (p.mode == mode && p.B == B) return &p;
    return nullptr;
  };
  // Columns: B, every mode, then each fused mode over the best other one.
  std::vector<std::string> headers = {"B"};
  headers.insert(headers.end(), modes.begin(), modes.end());
  if (!others.empty())
    for (const std::string& f : fused) headers.push_back(f + " / best other");
  std::vector<size_t> widths;
  for (const std::string& h : headers) widths.push_back(std::max<size_t>(h.size(), 8));
  widths[0] = 4;
  std::string s = fmt::format("medians over the repeats, {}:\n",
                              normalized ? "normalized to serial B=1" : "samples/s");
  for (size_t c = 0; c < headers.size(); ++c)
    s += fmt::format("{}{:>{}}", c ? "  " : "", headers[c], widths[c]);
  s += '\n';
  for (const int64_t B : Bs) {
    size_t c = 0;
    s += fmt::format("{:>{}}", B, widths[c++]);
    for (const std::string& m : modes) {
      const SweepPoint* p = point(m, B);
      const std::string cell = p == nullptr ? "-"
                               : normalized ? fmt::format("{:.2f}", p->normalized_median)
                                            : fmt::format("{:.0f}", p->samples_median);
      s += fmt::format("  {:>{}}", cell, widths[c++]);
    }
    double best_other = 0;
    for (const std::string& m : others)
      if (const SweepPoint* p = point(m, B)) best_other = std::max(best_other, p->samples_median);
    if (!others.empty())
      for (const std::string& f : fused) {
        const SweepPoint* p = point(f, B);
        const std::string cell = p == nullptr || best_other <= 0
                                     ? "-"
                                     : fmt::format("{:.3f}", p->samples_median / best_other);
        s += fmt::format("  {:>{}}", cell, widths[c++]);
      }
    s += '\n';
  }
  return s;
}

std::string gnuplot_script(const std::vector<SweepPoint>& points, const std::string& title,
                           int64_t memory_budget_bytes) {
  // References, not a structured binding: clang before 16 cannot capture those in lambdas.
  const SweepAxes axes = axes_of(points);
  const auto& modes = axes.modes;
  const auto& Bs = axes.Bs;
  const bool normalized = axes.normalized;
  std::string s;
  s +=
      "# Plots of an hfta sweep, written by `hfta sweep`; rerun with `gnuplot sweep.gp` in this\n"
      "# directory. Each point is the median of the successful repeats of one measured (mode, B);\n"
      "# bands span their min and max.\n";
  s += "if (strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0) {\n"
       "  set terminal pngcairo size 960,600 font \",11\"\n"
       "} else {\n"
       "  set terminal png truecolor size 960,600\n"
       "}\n"
       // Titles are literal: in gnuplot's default enhanced text, pointnet_seg's '_' would make
       // "seg" a subscript.
       "set termoption noenhanced\n";
  for (const std::string& mode : modes) {
    s += fmt::format("# mode {}: B, throughput median/min/max ({}), peak RSS MiB median/min/max\n",
                     mode, normalized ? "normalized to serial B=1" : "samples/s");
    s += block_name(mode) + " << EOD\n";
    for (const SweepPoint& p : points) {
      if (p.mode != mode) continue;
      double mid = normalized ? p.normalized_median : p.samples_median;
      double lo = normalized ? p.normalized_min : p.samples_min;
      double hi = normalized ? p.normalized_max : p.samples_max;
      s += fmt::format("{} {:.6g} {:.6g} {:.6g} {:.6g} {:.6g} {:.6g}\n", p.B, mid, lo, hi,
                       p.rss_mib_median, p.rss_mib_min, p.rss_mib_max);
    }
    s += "EOD\n";
  }
  s += "set logscale x 2\nset grid\nset xlabel \"B (models trained at once)\"\n";
  if (!Bs.empty()) {
    s += fmt::format("set xrange [{:.6g}:{:.6g}]\n", Bs.front() / 1.3, Bs.back() * 1.3);
    s += "set xtics (";
    for (size_t i = 0; i < Bs.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", Bs[i]);
    s += ")\n";
  }
  auto plot = [&](int mid_col, int lo_col, int hi_col) {
    std::string cmd = "plot ";
    for (size_t i = 0; i < modes.size(); ++i) {
      const std::string block = block_name(modes[i]);
      const char* color = mode_color(modes[i], i);
      cmd += fmt::format(
          "{}{} using 1:{}:{} with filledcurves fc rgb \"{}\" fs transparent solid 0.2 noborder "
          "notitle, \\\n     {} using 1:{} with linespoints lc rgb \"{}\" lw 2 pt 7 title {}",
          i ? ", \\\n     " : "", block, lo_col, hi_col, color, block, mid_col, color,
          gp_string(modes[i]));
    }
    return cmd;
  };
  s += "set output \"throughput.png\"\nset key bottom right\n";
  s += fmt::format("set title {}\n",
                   gp_string(title + (normalized ? ": throughput normalized to serial B=1"
                                                 : ": throughput (samples/s)")));
  s += fmt::format("set ylabel {}\nset yrange [0:*]\n",
                   gp_string(normalized ? "throughput / serial B=1 throughput" : "samples/s"));
  s += modes.empty() ? "plot 1/0 notitle\n" : plot(2, 3, 4) + "\n";
  s += "set output \"memory.png\"\nset key top left\n";
  s += fmt::format("set title {}\nset ylabel \"peak RSS (MiB), summed over processes\"\n",
                   gp_string(title + ": peak memory"));
  std::string memory = modes.empty() ? "plot 1/0 notitle" : plot(5, 6, 7);
  if (memory_budget_bytes > 0)
    memory += fmt::format(
        ", \\\n     {:.6g} with lines dt 2 lc rgb \"#555555\" title "
        "\"memory budget\"",
        memory_budget_bytes / 1048576.0);
  s += memory + "\nset output\n";
  return s;
}

bool plot_sweep(const std::string& dir, const std::string& title, int64_t memory_budget_bytes,
                const std::function<void(const std::string&)>& warn) {
  namespace fs = std::filesystem;
  const fs::path csv = fs::path(dir) / "throughput.csv", script = fs::path(dir) / "sweep.gp";
  {
    std::ofstream out(script, std::ios::trunc);
    HFTA_CHECK(out.good(), "cannot write {}: {}", script.string(), std::strerror(errno));
    out << gnuplot_script(summarize_sweep(read_csv(csv.string())), title, memory_budget_bytes);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addchdir_np(&actions, dir.c_str());
  char* argv[] = {const_cast<char*>("gnuplot"), const_cast<char*>("sweep.gp"), nullptr};
  pid_t pid;
  int rc = posix_spawnp(&pid, "gnuplot", &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    if (warn)
      warn(
          fmt::format("warning: cannot run gnuplot ({}): no plots. Install it with `apt-get "
                      "install gnuplot-nox`, then run `gnuplot sweep.gp` in {}; the CSV is {}",
                      std::strerror(rc), dir, csv.string()));
    return false;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (warn)
      warn(fmt::format("warning: gnuplot failed on {} (its messages are above); the CSV is {}",
                       script.string(), csv.string()));
    return false;
  }
  return true;
}

void save_plot_settings(const std::string& dir, const PlotSettings& settings) {
  const std::filesystem::path path = std::filesystem::path(dir) / "plot.json";
  const nlohmann::json j = {{"title", settings.title},
                            {"memory_budget_bytes", settings.memory_budget_bytes}};
  std::ofstream out(path, std::ios::trunc);
  out << j.dump(2) << "\n";
  HFTA_CHECK(out.good(), "cannot write {}: {}", path.string(), std::strerror(errno));
}

std::optional<PlotSettings> load_plot_settings(const std::string& dir) {
  const std::filesystem::path path = std::filesystem::path(dir) / "plot.json";
  std::ifstream in(path);
  if (!in) return std::nullopt;
  PlotSettings settings;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    settings.title = j.at("title").get<std::string>();
    // get<int64_t>() would convert a fraction or 1e300 (undefined behaviour) and wrap 2^64-1 to
    // -1: only a whole number in int64_t's range is a byte count.
    const nlohmann::json& budget = j.at("memory_budget_bytes");
    HFTA_CHECK(
        budget.is_number_integer() && (!budget.is_number_unsigned() ||
                                       budget.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)),
        "{}: memory_budget_bytes {} is not a whole number of bytes from 0 to 2^63-1", path.string(),
        budget.dump());
    settings.memory_budget_bytes = budget.get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    fail(
        "{} is not a sweep's plot settings ({}): delete it to plot with the title the flags "
        "give",
        path.string(), e.what());
  }
  HFTA_CHECK(settings.memory_budget_bytes >= 0, "{}: memory_budget_bytes {} is negative",
             path.string(), settings.memory_budget_bytes);
  return settings;
}

}  // namespace hfta
