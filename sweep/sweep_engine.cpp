// The sweep engine: parsing --modes/--B/--memory-budget, the plan, the --B max search, and the
// loop that measures and writes throughput.csv. No processes here (see sweep_process.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <sstream>

#include "core/arena.h"
#include "io/csv.h"
#include "sweep/plot.h"
#include "sweep/sweep.h"

namespace hfta {

namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) items.push_back(item);
  if (!text.empty() && text.back() == ',') items.push_back("");
  return items;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string fixed(double value, int digits) {
  return std::isfinite(value) ? fmt::format("{:.{}f}", value, digits) : std::string();
}

}  // namespace

const char* mode_name(SweepMode mode) {
  switch (mode) {
    case SweepMode::kSerial:
      return "serial";
    case SweepMode::kConcurrent:
      return "concurrent";
    case SweepMode::kFused:
      return "fused";
  }
  return "?";
}

std::vector<SweepMode> parse_modes(const std::string& list) {
  std::vector<SweepMode> modes;
  for (const std::string& raw : split_list(list)) {
    std::string item = trim(raw);
    SweepMode mode;
    if (item == "serial")
      mode = SweepMode::kSerial;
    else if (item == "concurrent")
      mode = SweepMode::kConcurrent;
    else if (item == "fused")
      mode = SweepMode::kFused;
    else
      fail(
          "--modes: '{}' is not a mode: use serial, concurrent and/or fused, e.g. --modes "
          "serial,fused",
          item);
    HFTA_CHECK(std::find(modes.begin(), modes.end(), mode) == modes.end(),
               "--modes: '{}' is listed twice in '{}'", item, list);
    modes.push_back(mode);
  }
  HFTA_CHECK(!modes.empty(), "--modes is empty: use e.g. --modes serial,concurrent,fused");
  return modes;
}

BList parse_B_list(const std::string& text) {
  BList list;
  if (lower(trim(text)) == "max") {
    list.max = true;
    return list;
  }
  for (const std::string& raw : split_list(text)) {
    std::string item = trim(raw);
    HFTA_CHECK(!item.empty(), "--B '{}' has an empty item: use a list like 1,2,4,8 or 'max'", text);
    HFTA_CHECK(lower(item) != "max", "--B '{}': 'max' stands alone (--B max), not in a list", text);
    bool digits = std::all_of(item.begin(), item.end(),
                              [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    HFTA_CHECK(digits && item.size() <= 9,
               "--B: '{}' is not a model count: use positive integers like 1,2,4,8 or 'max'", item);
    int64_t B = std::stoll(item);
    HFTA_CHECK(B >= 1, "--B: {} is not a model count: B must be at least 1", item);
    HFTA_CHECK(std::find(list.values.begin(), list.values.end(), B) == list.values.end(),
               "--B: {} is listed twice in '{}'", B, text);
    list.values.push_back(B);
  }
  HFTA_CHECK(!list.values.empty(), "--B is empty: use a list like 1,2,4,8 or 'max'");
  std::sort(list.values.begin(), list.values.end());
  return list;
}

int64_t parse_memory_size(const std::string& text) {
  std::string s = trim(text);
  size_t unit_at = 0;
  while (unit_at < s.size() &&
         (std::isdigit(static_cast<unsigned char>(s[unit_at])) || s[unit_at] == '.'))
    ++unit_at;
  std::string number = s.substr(0, unit_at), unit = lower(trim(s.substr(unit_at)));
  auto bad = [&] {
    fail("--memory-budget '{}' is not a memory size: use e.g. 8GiB, 512MiB, 1.5G or 300MB", text);
  };
  if (number.empty() || std::count(number.begin(), number.end(), '.') > 1) bad();
  double value = std::strtod(number.c_str(), nullptr);
  double scale = 0;
  const std::pair<const char*, double> units[] = {
      {"", 1},        {"b", 1},        {"k", 0x1p10},   {"ki", 0x1p10},  {"kib", 0x1p10},
      {"kb", 1e3},    {"m", 0x1p20},   {"mi", 0x1p20},  {"mib", 0x1p20}, {"mb", 1e6},
      {"g", 0x1p30},  {"gi", 0x1p30},  {"gib", 0x1p30}, {"gb", 1e9},     {"t", 0x1p40},
      {"ti", 0x1p40}, {"tib", 0x1p40}, {"tb", 1e12}};
  for (const auto& [name, factor] : units)
    if (unit == name) scale = factor;
  if (scale == 0) bad();
  double bytes = std::floor(value * scale);
  HFTA_CHECK(bytes >= 1 && bytes < 0x1p62, "--memory-budget '{}' must be between 1 byte and 4 EiB",
             text);
  return static_cast<int64_t>(bytes);
}

std::string format_memory_size(int64_t bytes) {
  const char* names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) value /= 1024, ++unit;
  return value == std::floor(value) ? fmt::format("{} {}", value, names[unit])
                                    : fmt::format("{:.3g} {}", value, names[unit]);
}

int threads_per_process(SweepMode mode, int64_t B, int threads) {
  if (mode != SweepMode::kConcurrent) return threads;
  return static_cast<int>(std::max<int64_t>(1, threads / B));
}

std::vector<PlannedTrial> plan_sweep(const SweepOptions& o) {
  HFTA_CHECK(o.repeats >= 1, "--repeats {} must be at least 1", o.repeats);
  HFTA_CHECK(!o.Bs.empty() && !o.modes.empty(), "nothing to sweep: --B and --modes are empty");
  const bool baseline_requested =
      std::find(o.modes.begin(), o.modes.end(), SweepMode::kSerial) != o.modes.end() &&
      std::find(o.Bs.begin(), o.Bs.end(), int64_t{1}) != o.Bs.end();
  std::vector<PlannedTrial> plan;
  for (int r = 1; r <= o.repeats; ++r) {
    if (!baseline_requested) plan.push_back({SweepMode::kSerial, 1, r, true});
    for (size_t i = 0; i < o.Bs.size(); ++i) {
      const int64_t B = o.Bs[i];
      std::vector<PlannedTrial> group;
      for (SweepMode mode : o.modes)
        if (mode == SweepMode::kFused) {
          for (const std::string& p : o.plans) group.push_back({mode, B, r, false, p});
        } else {
          group.push_back({mode, B, r, false});
        }
      // The modes of one (B, repeat) run back to back, and each repeat and B starts at another
      // mode: a machine that slows down or speeds up during the sweep then favours no mode.
      std::rotate(
          group.begin(),
          group.begin() + static_cast<long>((static_cast<size_t>(r - 1) + i) % group.size()),
          group.end());
      plan.insert(plan.end(), group.begin(), group.end());
    }
  }
  return plan;
}

const std::vector<std::string>& throughput_columns() {
  static const std::vector<std::string> columns = {"model",
                                                   "mode",
                                                   "plan_asked",
                                                   "plan",
                                                   "B",
                                                   "repeat",
                                                   "status",
                                                   "samples_per_s",
                                                   "normalized",
                                                   "step_ms",
                                                   "gflops",
                                                   "percent_of_peak",
                                                   "peak_rss_mib",
                                                   "processes",
                                                   "threads_per_process",
                                                   "window_overlap",
                                                   "foreign_load",
                                                   "attempts",
                                                   "error"};
  return columns;
}

namespace {

std::string log_name(const PlannedTrial& p) {
  std::string plan;  // fused mode: the plan, in a file-name-safe form
  if (p.mode == SweepMode::kFused)
    for (char c : p.plan) plan += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return fmt::format("{}{}-B{}-r{}.log", mode_name(p.mode), plan.empty() ? "" : "-" + plan, p.B,
                     p.repeat);
}

std::vector<std::string> csv_fields(const SweepOptions& o, const SweepRow& row) {
  const Measurement& m = row.measurement;
  const bool ok = row.status == "ok";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double pct = ok && o.peak_gflops > 0 ? 100.0 * m.gflops / o.peak_gflops : nan;
  const int64_t processes = row.planned.mode == SweepMode::kConcurrent ? row.planned.B : 1;
  const bool fused = row.planned.mode == SweepMode::kFused;
  return {o.trial.model,
          mode_name(row.planned.mode),
          fused ? row.planned.plan : "",
          ok ? (m.plan.empty() ? "fused" : m.plan) : "",
          std::to_string(row.planned.B),
          std::to_string(row.planned.repeat),
          row.status,
          fixed(ok ? m.samples_per_second : nan, 1),
          fixed(ok ? row.normalized : nan, 4),
          fixed(ok ? m.step_ms : nan, 3),
          fixed(ok ? m.gflops : nan, 3),
          fixed(pct, 2),
          fixed(m.peak_rss_bytes > 0 ? m.peak_rss_bytes / 1048576.0 : nan, 1),
          std::to_string(processes),
          std::to_string(row.threads_per_process),
          fixed(ok ? m.window_overlap : nan, 3),
          fixed(ok ? m.foreign_load : nan, 3),
          std::to_string(row.attempts),
          m.error};
}

std::string progress_line(const SweepOptions& o, const SweepRow& row, size_t index, size_t total) {
  const PlannedTrial& p = row.planned;
  std::string head =
      fmt::format("[{}/{}] {}{} B={} repeat {}", index, total, mode_name(p.mode),
                  p.mode == SweepMode::kFused ? " (plan " + p.plan + ")" : "", p.B, p.repeat);
  if (row.status != "ok") return fmt::format("{}: {}: {}", head, row.status, row.measurement.error);
  const Measurement& m = row.measurement;
  std::string line = fmt::format("{}: {:.0f} samples/s", head, m.samples_per_second);
  if (std::isfinite(row.normalized)) line += fmt::format(" ({:.2f}x serial B=1)", row.normalized);
  line += fmt::format(", {:.2f} ms/step, {:.1f} GFLOP/s", m.step_ms, m.gflops);
  if (o.peak_gflops > 0)
    line += fmt::format(" ({:.1f}% of peak)", 100.0 * m.gflops / o.peak_gflops);
  line += fmt::format(", {:.0f} MiB", m.peak_rss_bytes / 1048576.0);
  if (p.mode == SweepMode::kFused && p.plan != m.plan) line += fmt::format(", ran {}", m.plan);
  if (m.foreign_load > o.busy_threshold)
    line += fmt::format("; warning: other processes took {:.0f}% of the CPU time",
                        100.0 * m.foreign_load);
  if (m.window_overlap < 0.5)
    line += fmt::format("; warning: the processes' timed windows overlap only {:.0f}%",
                        100.0 * m.window_overlap);
  return line;
}

// Why B concurrent processes cannot run here, "" if they can (or nothing tells yet): B times
// the peak RSS of one model alone (serial B=1's, the baseline, measured first) against the
// memory available.
std::string concurrent_would_not_fit(const SweepOptions& o, int64_t B,
                                     const std::vector<SweepRow>& rows) {
  int64_t one = 0;
  for (const SweepRow& r : rows)
    if (r.status == "ok" && r.planned.mode == SweepMode::kSerial && r.planned.B == 1)
      one = std::max(one, r.measurement.peak_rss_bytes);
  if (one == 0) return "";
  const int64_t available =
      o.available_memory_bytes > 0
          ? o.available_memory_bytes
          : static_cast<int64_t>(std::min<size_t>(available_memory_bytes(), INT64_MAX));
  if (B * one <= available) return "";
  return fmt::format(
      "concurrent B={} would need about {} ({} processes of serial B=1's peak RSS, {}), more than "
      "the {} this machine has available",
      B, format_memory_size(B * one), B, format_memory_size(one), format_memory_size(available));
}

}  // namespace

std::vector<SweepRow> run_sweep(const SweepOptions& o, const TrialRunner& runner,
                                const std::function<void(const std::string&)>& progress) {
  HFTA_CHECK(o.threads >= 1, "the sweep needs at least one thread, got {}", o.threads);
  const std::vector<PlannedTrial> plan = plan_sweep(o);
  std::filesystem::create_directories(std::filesystem::path(o.out_dir) / "logs");
  CsvWriter csv((std::filesystem::path(o.out_dir) / "throughput.csv").string(),
                throughput_columns());
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  if (plan.front().baseline_only)
    say(
        fmt::format("serial B=1 is the baseline of the normalized throughput: measuring it "
                    "({} repeats) although --modes/--B do not ask for it",
                    o.repeats));

  std::vector<SweepRow> rows;
  // Rows wait until every serial B=1 repeat (the baseline) is in: their normalized throughput
  // divides by its median.
  std::vector<size_t> pending;
  std::vector<double> baseline_ok;
  int baseline_repeats_done = 0;
  double baseline = std::numeric_limits<double>::quiet_NaN();
  auto write = [&](SweepRow& row) {
    if (row.status == "ok")
      row.normalized = row.measurement.samples_per_second / baseline;  // NaN if unknown
    csv.row(csv_fields(o, row));
  };
  auto settle_baseline = [&] {
    if (!baseline_ok.empty()) baseline = median(baseline_ok);
    for (size_t i : pending) write(rows[i]);
    pending.clear();
  };

  for (size_t k = 0; k < plan.size(); ++k) {
    const PlannedTrial& p = plan[k];
    SweepRow row;
    row.planned = p;
    row.threads_per_process = threads_per_process(p.mode, p.B, o.threads);
    row.normalized = std::numeric_limits<double>::quiet_NaN();
    const std::string unfit =
        p.mode == SweepMode::kConcurrent ? concurrent_would_not_fit(o, p.B, rows) : "";
    if (p.mode == SweepMode::kConcurrent && p.B > o.max_processes) {
      row.status = "skipped";
      row.measurement.error =
          fmt::format("concurrent B={} would start {} processes, more than --max-processes {}", p.B,
                      p.B, o.max_processes);
    } else if (!unfit.empty()) {
      row.status = "skipped";
      row.measurement.error = unfit;
    } else {
      TrialRequest request;
      request.mode = p.mode;
      request.B = p.B;
      request.repeat = p.repeat;
      request.processes = p.mode == SweepMode::kConcurrent ? p.B : 1;
      request.trial = o.trial;
      request.trial.B = p.mode == SweepMode::kConcurrent ? 1 : p.B;
      request.trial.serial = p.mode == SweepMode::kSerial;
      request.trial.threads = row.threads_per_process;
      request.trial.plan = p.mode == SweepMode::kFused ? p.plan : "fused";
      request.memory_limit_bytes = o.memory_budget_bytes;
      request.log_path = (std::filesystem::path(o.out_dir) / "logs" / log_name(p)).string();
      try {
        // On a shared machine another process may take CPU time mid-measurement: measure again
        // (up to o.retries times) and keep the least disturbed result.
        while (true) {
          Measurement m = runner(request);
          ++row.attempts;
          const Measurement& best = row.measurement;
          if (row.attempts == 1 || (m.ok && (!best.ok || m.foreign_load < best.foreign_load)))
            row.measurement = m;
          if (!m.ok || m.foreign_load <= o.busy_threshold || row.attempts > o.retries) break;
          say(fmt::format(
              "[{}/{}] {} B={} repeat {}: other processes took {:.0f}% of the CPU "
              "time; measuring again",
              k + 1, plan.size(), mode_name(p.mode), p.B, p.repeat, 100.0 * m.foreign_load));
        }
      } catch (const Interrupted&) {
        settle_baseline();
        throw;
      }
      row.status = row.measurement.ok ? "ok" : "failed";
    }
    rows.push_back(row);
    const bool is_baseline = p.mode == SweepMode::kSerial && p.B == 1;
    if (baseline_repeats_done == o.repeats) {
      write(rows.back());
    } else {
      pending.push_back(rows.size() - 1);
      if (is_baseline) {
        if (row.status == "ok") baseline_ok.push_back(row.measurement.samples_per_second);
        const bool nothing_worked = std::none_of(
            rows.begin(), rows.end(), [](const SweepRow& r) { return r.status == "ok"; });
        if (nothing_worked) {  // a bad --model or --dataset: stop before measuring the rest
          settle_baseline();
          fail(
              "serial B=1, the baseline, failed (error: {}) and no measurement has worked; "
              "stopping. The processes' messages are in {}/logs",
              rows.back().measurement.error, o.out_dir);
        }
        if (++baseline_repeats_done == o.repeats) {
          settle_baseline();
          if (!std::isfinite(baseline))
            fail(
                "serial B=1, the baseline, failed in all {} repeats (last error: {}); stopping. "
                "The processes' messages are in {}/logs",
                o.repeats, rows.back().measurement.error, o.out_dir);
        }
      }
    }
    say(progress_line(o, rows.back(), k + 1, plan.size()));
  }
  return rows;
}

int64_t find_max_B(const std::function<Measurement(int64_t B)>& fits_trial, int64_t budget_bytes,
                   int64_t cap, const std::function<void(const std::string&)>& progress) {
  HFTA_CHECK(cap >= 1, "the --B max search limit must be at least 1, got {}", cap);
  std::string last_failure;
  auto fits = [&](int64_t B) {
    Measurement m = fits_trial(B);
    bool ok = m.ok && m.peak_rss_bytes <= budget_bytes;
    std::string verdict =
        !m.ok ? fmt::format("does not fit: {}", m.error)
              : fmt::format("peak RSS {} {} the budget {}", format_memory_size(m.peak_rss_bytes),
                            ok ? "fits in" : "exceeds", format_memory_size(budget_bytes));
    if (!ok) last_failure = verdict;
    if (progress) progress(fmt::format("[B max] fused B={}: {}", B, verdict));
    return ok;
  };
  HFTA_CHECK(fits(1), "--B max: even one model does not fit in --memory-budget {} ({})",
             format_memory_size(budget_bytes), last_failure);
  int64_t lo = 1, hi = 0;  // lo fits; hi (when > 0) does not
  while (lo < cap) {
    int64_t next = std::min(2 * lo, cap);
    if (!fits(next)) {
      hi = next;
      break;
    }
    lo = next;
  }
  if (hi == 0) return lo;  // the cap fits
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

std::vector<int64_t> Bs_up_to(int64_t max_B) {
  std::vector<int64_t> Bs;
  for (int64_t B = 1; B < max_B; B *= 2) Bs.push_back(B);
  Bs.push_back(max_B);
  return Bs;
}

}  // namespace hfta
