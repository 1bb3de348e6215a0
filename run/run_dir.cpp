#include "run/run_dir.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "io/csv.h"

namespace hfta {

std::string checkpoint_path(const std::string& out, bool serial, const std::vector<int64_t>& ids) {
  return serial ? fmt::format("{}/checkpoint-model{}.bin", out, ids[0]) : out + "/checkpoint.bin";
}

Checkpoint model_from_run(const std::string& dir, int64_t b) {
  const std::string fused = checkpoint_path(dir, false, {b});
  const std::string serial = checkpoint_path(dir, true, {b});
  if (std::filesystem::exists(fused)) {
    Checkpoint all = load_checkpoint(fused);
    for (int64_t i = 0; i < all.B; ++i)
      if (all.model_ids[i] == b) return extract_model(all, i);
    fail("{} holds models {}, not model {}", fused, fmt::join(all.model_ids, ","), b);
  }
  HFTA_CHECK(std::filesystem::exists(serial),
             "no checkpoint for model {} in {}: expected {} or {} (was the run started with "
             "--no-checkpoint?)",
             b, dir, fused, serial);
  return load_checkpoint(serial);
}

int64_t best_model_of_run(const std::string& dir, const std::string& model,
                          const std::optional<TaskMetric>& metric) {
  HFTA_CHECK(metric.has_value(),
             "--best: {} has no metric that ranks its models (a GAN's losses measure each "
             "generator against its own discriminator); extract one with --model N",
             model);
  const std::string path = dir + "/summary.csv";
  CsvTable summary = read_csv(path);
  HFTA_CHECK(!summary.rows.empty(), "{} has no models", path);
  HFTA_CHECK(std::find(summary.header.begin(), summary.header.end(), metric->column) !=
                 summary.header.end(),
             "--best: {} has no column {} ({} of {}, by which --best ranks it): was the run cut "
             "short before its summary? extract one with --model N",
             path, metric->column, metric->description, model);
  const size_t col = summary.column(metric->column), id = summary.column("model");
  size_t best = 0;
  for (size_t r = 1; r < summary.rows.size(); ++r) {
    const double v = summary.number(r, col), top = summary.number(best, col);
    if (metric->maximize ? v > top : v < top) best = r;
  }
  return summary.integer(best, id);
}

}  // namespace hfta
