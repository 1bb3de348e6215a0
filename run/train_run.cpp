#include "run/train_run.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <numeric>
#include <optional>

#include "core/clock.h"
#include "core/error.h"
#include "io/interrupt.h"
#include "run/run_dir.h"

namespace hfta {

std::vector<std::vector<int64_t>> array_groups(int64_t B, bool serial) {
  std::vector<std::vector<int64_t>> groups;
  if (serial) {
    for (int64_t b = 0; b < B; ++b) groups.push_back({b});
  } else {
    groups.emplace_back(static_cast<size_t>(B));
    std::iota(groups[0].begin(), groups[0].end(), 0);
  }
  return groups;
}

std::string array_name(const TrainOptions& o, const std::vector<int64_t>& ids) {
  return o.serial ? fmt::format("model {}", ids[0]) : fmt::format("{} models", ids.size());
}

TrainResult train_arrays(const TrainOptions& o, const TrainRun& run) {
  const auto start = Clock::now();
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  HFTA_CHECK(!ec, "cannot create --out directory {}: {}", o.out, ec.message());

  const std::vector<std::vector<int64_t>> groups = array_groups(run.B, o.serial);
  std::vector<std::optional<Checkpoint>> resume(groups.size());
  const std::string metrics_path = o.out + "/metrics.csv";
  if (o.resume) {
    std::map<int64_t, int64_t> kept;  // model -> the step (or epoch) its checkpoint holds
    for (size_t g = 0; g < groups.size(); ++g) {
      const std::string path = checkpoint_path(o.out, o.serial, groups[g]);
      if (!std::filesystem::exists(path)) continue;
      resume[g] = load_checkpoint(path);
      run.check_resumable(*resume[g], path, groups[g]);
      for (int64_t id : groups[g])
        kept[id] = run.metrics_per_epoch ? resume[g]->epoch : resume[g]->step;
    }
    HFTA_CHECK(!kept.empty(),
               "--resume: no checkpoint in {} (expected {}): run without --resume to start", o.out,
               checkpoint_path(o.out, o.serial, groups[0]));
    if (run.metrics_per_epoch)
      prune_metrics_by_epoch(metrics_path, kept);
    else
      prune_metrics(metrics_path, kept);
  }
  CsvWriter metrics(metrics_path, run.metrics_columns,
                    o.resume && std::filesystem::exists(metrics_path));

  TrainResult result;
  result.B = run.B;
  result.models.resize(static_cast<size_t>(run.B));
  // Ctrl-C from here on saves a checkpoint (at the next step) instead of killing the run.
  InterruptGuard interrupt_guard;
  if (run.announce) run.announce();
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<int64_t>& ids = groups[g];
    std::unique_ptr<RunArray> array = run.make_array(ids, metrics);
    run_epochs(*array, o,
               {.who = array_name(o, ids),
                .checkpoint_path = checkpoint_path(o.out, o.serial, ids),
                .stop_after_step = run.stop_after_step,
                .announce_checkpoints = run.announce_checkpoints && g == 0},
               resume[g] ? &*resume[g] : nullptr, result.models);
  }
  result.wall_seconds = seconds_since(start);
  return result;
}

}  // namespace hfta
