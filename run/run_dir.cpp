#include "run/run_dir.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

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

void prune_metrics(const std::string& path, const std::map<int64_t, int64_t>& resumed_step) {
  if (!std::filesystem::exists(path)) return;
  // A run killed while appending a row may leave it without its line break: such a row is past
  // every checkpoint (rows are written before the step's snapshot), so it goes.
  const auto size = std::filesystem::file_size(path);
  if (size > 0) {
    std::ifstream in(path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!text.empty() && text.back() != '\n') {
      const size_t keep = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
      std::filesystem::resize_file(path, keep);
      if (keep == 0) return;  // not even a whole header: the resumed run writes it again
    }
  }
  CsvTable t = read_csv(path);
  const size_t model_col = t.column("model"), step_col = t.column("step");
  CsvWriter rewrite(path, t.header);
  for (size_t r = 0; r < t.rows.size(); ++r) {
    auto it = resumed_step.find(t.integer(r, model_col));
    if (it != resumed_step.end() && t.integer(r, step_col) <= it->second) rewrite.row(t.rows[r]);
  }
}

// Keeps the rows of metrics.csv that a resumed run does not redo: the finished epochs of models
// resuming from a checkpoint (model -> epochs done). A last line cut short by a crash goes too.
void prune_metrics_by_epoch(const std::string& path,
                            const std::map<int64_t, int64_t>& epochs_done) {
  if (!std::filesystem::exists(path)) return;
  CsvTable t;
  try {
    t = read_csv(path);
  } catch (const Error&) {  // a crash mid-row: start the file again from the checkpoints' rows
    std::filesystem::remove(path);
    return;
  }
  const size_t model_col = t.column("model"), epoch_col = t.column("epoch");
  CsvWriter rewrite(path, t.header);
  for (size_t r = 0; r < t.rows.size(); ++r) {
    auto it = epochs_done.find(t.integer(r, model_col));
    if (it != epochs_done.end() && t.integer(r, epoch_col) <= it->second) rewrite.row(t.rows[r]);
  }
}

}  // namespace hfta
