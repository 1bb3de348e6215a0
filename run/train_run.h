// `hfta train`'s run around the epoch loop, one for every task: --out, --resume's checkpoints
// (each checked by the task against this command, metrics.csv cut back to what they hold), the
// arrays the run trains (all B models at once, or with --serial each alone), each through
// run_epochs (epoch_loop.h), and Ctrl-C's guard. The task prepares its data, says what its
// arrays, checks and metrics are (TrainRun), and writes its summary from the results.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "io/csv.h"
#include "run/epoch_loop.h"
#include "run/train.h"

namespace hfta {

struct TrainRun {
  int64_t B = 0;  // models of the run
  std::vector<std::string> metrics_columns;
  // metrics.csv has rows per epoch (a resumed run keeps the finished epochs), else per optimizer
  // step (it keeps the steps up to the checkpoint's).
  bool metrics_per_epoch = false;
  // Throws hfta::Error naming the first flag in which `checkpoint` (read from `path`) of models
  // `ids` differs from this run.
  std::function<void(const Checkpoint& checkpoint, const std::string& path,
                     const std::vector<int64_t>& ids)>
      check_resumable;
  // The array of models `ids`, writing its rows to `metrics`.
  std::function<std::unique_ptr<RunArray>(const std::vector<int64_t>& ids, CsvWriter& metrics)>
      make_array;
  // Prints the run's "training ..." line: called once metrics.csv is ready and Ctrl-C saves a
  // checkpoint (tests wait for it before they interrupt a run).
  std::function<void()> announce;
  // Acts as a Ctrl-C after this optimizer step (tests; 0: never).
  int64_t stop_after_step = 0;
  // Say when periodic checkpoints are taken (once, for the first array).
  bool announce_checkpoints = false;
};

// The arrays of one array per group: {0..B-1}, or with `serial` {0}, {1}, ...
std::vector<std::vector<int64_t>> array_groups(int64_t B, bool serial);

// How the run's lines name the array of models `ids`: "model 2" in a serial run, else "3 models".
std::string array_name(const TrainOptions& options, const std::vector<int64_t>& ids);

// Trains the run's arrays; returns each model's results and the run's wall time.
TrainResult train_arrays(const TrainOptions& options, const TrainRun& run);

}  // namespace hfta
