// Plots of a sweep, drawn by Debian's gnuplot from a script the program writes next to the CSV:
// throughput.png (normalized throughput against B, one line per mode, min/max band over the
// repeats) and memory.png (peak RSS against B per mode). Only measured (mode, B) points appear.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "io/csv.h"

namespace hfta {

// The successful repeats of one (mode, B) of a throughput.csv.
struct SweepPoint {
  std::string mode;
  int64_t B = 0;
  int runs = 0;
  bool has_normalized = false;  // false when the baseline failed: plot samples/s instead
  // Medians: on a shared machine one disturbed repeat out of three does not move them.
  double normalized_median = 0, normalized_min = 0, normalized_max = 0;
  double samples_median = 0, samples_min = 0, samples_max = 0;
  double rss_mib_median = 0, rss_mib_min = 0, rss_mib_max = 0;
};

// The median of `values` (the mean of the middle two for an even count); 0 when empty.
double median(std::vector<double> values);
// Groups the rows with status "ok" by (mode, B): modes in order of first appearance, B ascending.
std::vector<SweepPoint> summarize_sweep(const CsvTable& table);

// The table a sweep ends with: per B (rows), each mode's median throughput, normalized to serial
// B=1 (samples/s when the baseline failed), and each fused mode's over the best other mode that
// ran at that B: what fusion gains over training the B models one after another or as B
// processes. "-" where a mode did not run.
std::string fusion_table(const std::vector<SweepPoint>& points);

// The gnuplot script (self-contained: the points are inline data blocks) writing throughput.png
// and memory.png into the directory gnuplot runs in. A budget > 0 draws a line on memory.png.
std::string gnuplot_script(const std::vector<SweepPoint>& points, const std::string& title,
                           int64_t memory_budget_bytes);

// Reads <dir>/throughput.csv, writes <dir>/sweep.gp and runs gnuplot in <dir>. Returns false
// (after one line to `warn`) when gnuplot is missing or fails; the CSV is untouched either way.
bool plot_sweep(const std::string& dir, const std::string& title, int64_t memory_budget_bytes,
                const std::function<void(const std::string&)>& warn);

// What a plot says that throughput.csv does not: its title (model, dataset, batch size, CPU) and
// the memory budget line. The sweep saves them as <dir>/plot.json when it starts, so that
// `hfta sweep --plot-only` redraws a sweep as it was measured, whatever flags it is given.
struct PlotSettings {
  std::string title;
  int64_t memory_budget_bytes = 0;
};
void save_plot_settings(const std::string& dir, const PlotSettings& settings);
// std::nullopt when <dir>/plot.json does not exist (a sweep from before it was written); throws
// hfta::Error naming the file and the problem when it exists but is not such a file.
std::optional<PlotSettings> load_plot_settings(const std::string& dir);

}  // namespace hfta
