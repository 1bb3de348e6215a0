// The executor behind `hfta tune` (tune.h): the arrays a batch of the scheduler's jobs trains
// as, their history rows and checkpoints, live arrays (models/slots.h) and --resume's replay.
// Internal to run_tune (tune.cpp) and the MPI ranks it serves (tune_mpi.h).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "io/csv.h"
#include "run/epoch_loop.h"
#include "run/task.h"
#include "tune/tune.h"
#include "tune/tune_mpi.h"

namespace hfta {

// history.csv's columns for `space`: trial, one per parameter, then the outcome's.
std::vector<std::string> history_columns(const TuneSpace& space);
// A metric as a CSV cell ("nan" when not finite).
std::string csv_metric(double x);

// A finished row (status ok or failed) of an earlier run's history.csv.
struct TuneHistoryRow {
  int64_t trial = 0, budget = 0;
  TuneOutcome outcome;
  double time_s = 0;  // since the search started
};
// --resume's reading of history.csv: its finished rows, in file order (stopped rows train again).
// Throws hfta::Error naming the file, and the line and column where one is at fault, when its
// columns are not history_columns(space) or a trial, budget, metric or time is malformed.
std::vector<TuneHistoryRow> read_tune_history(const std::string& path, const TuneSpace& space);

// The executor of one search (run_tune): trains the scheduler's batches of jobs as arrays (fused,
// or one model each in serial mode) of the model's task (run/task.h: arrays made by `data`,
// trained budget unit by unit, an epoch each), writes history.csv and the trials' checkpoints,
// replays an earlier run's rows on --resume and prunes the checkpoints of stopped trials.
class TuneSearch {
 public:
  TuneSearch(const TuneOptions& o, const TuneSpace& space, SearchData& data, std::string dir)
      : o_(o), space_(space), data_(data), dir_(std::move(dir)) {}

  // Rows of an earlier run (--resume): their outcomes are replayed, not trained again.
  void load_history(const std::string& path);
  void open_history(const std::string& path, bool append) {
    history_ = std::make_unique<CsvWriter>(path, history_columns(space_), append);
  }
  std::vector<TuneOutcome> execute(const std::vector<TuneJob>& jobs);
  int64_t arrays_trained() const { return arrays_trained_; }
  const TuneLiveCounts& live_counts() const { return live_counts_; }
  // The scheduler's word that `trials` will not train again: deletes their checkpoints, except
  // the best stopped trial's (deleted later if another stopped trial overtakes it).
  void stopped(const std::vector<int64_t>& trials);
  // Under mpirun (tune_mpi.h): rank 0 shards each batch's arrays over the ranks.
  void set_mpi(TuneMpi* mpi) { mpi_ = mpi; }
  // Trains one array without writing history.csv: its outcomes and rows go back to rank 0.
  TuneArrayResult train_task(const TuneArrayTask& task);
  // (time_s, record) of every ok row so far, in order of completion.
  const std::vector<std::pair<double, TuneRecord>>& timeline() const { return timeline_; }

 private:
  struct Done {
    TuneOutcome outcome;
    double time_s = 0;
  };
  struct Job {
    TuneJob job;
    size_t index = 0;   // in the batch
    int64_t start = 0;  // the budget the trial's checkpoint holds: from, a unit in between when
                        // its array was interrupted, or to when only the row was lost
  };
  void train_array(const ArrayKey& key, int64_t start, int64_t to, const std::vector<Job>& jobs,
                   std::vector<TuneOutcome>& outcomes);
  // The `hfta train` options of the array of trials `ids` to budget `to`: the first trial's, then
  // every trial's per-model values; model b's RNG stream is trial ids[b]'s.
  TrainOptions array_options(const std::vector<int64_t>& ids, int64_t to) const;
  // The outcome and history row of each of `jobs` after its array: `acc` and `loss` per job
  // (NaN when failed or not measured).
  void record_outcomes(const std::vector<Job>& jobs, const std::vector<double>& acc,
                       const std::vector<double>& loss, bool failed, int64_t step, double wall,
                       std::vector<TuneOutcome>& outcomes);
  void write_row(const TuneJob& job, int64_t trial_steps, double acc, double loss, double metric,
                 double wall, double time_s, const std::string& status);
  std::string trial_dir(int64_t t) const { return fmt::format("{}/trials/{}", dir_, t); }
  int64_t max_models(const ArrayKey& key);
  // Each trial's state at budget `at` in trials/<id>/checkpoint.bin (B = 1 checkpoints, as `hfta
  // train --first-model-id <trial>` saves it), after the array's last unit (with_commands: also
  // the command.txt that retrains it alone) and after every unit before it.
  void save_trial_states(RunArray& array, const ArrayProgress& progress,
                         const std::vector<int64_t>& ids, int64_t at, bool with_commands);
  // A new array of trials `ids` at budget `start` (their checkpoints stacked into one when
  // start > 0); returns its progress.
  ArrayProgress build_array(const TrainOptions& options, int64_t start,
                            const std::vector<int64_t>& ids, std::unique_ptr<RunArray>& array);
  // The array trained last stays alive (models/slots.h): an array of the same key that continues
  // some of its trials from the budget it reached takes it compacted to them (no checkpoint
  // read), and one of fresh trials takes its slots refilled (RunArray::keep_models,
  // refill_model), instead of building a new array. Either trains what a new array would
  // (tests/tune/test_tune_live.cpp). False when the live array does not fit or its task cannot:
  // build one.
  bool take_live(const ArrayKey& key, int64_t start, const std::vector<int64_t>& ids,
                 std::unique_ptr<RunArray>& array, ArrayProgress& progress);

  const TuneOptions& o_;
  const TuneSpace& space_;
  SearchData& data_;
  std::string dir_;
  std::unique_ptr<CsvWriter> history_;
  std::map<std::pair<int64_t, int64_t>, Done> replay_;  // (trial, budget) -> outcome
  double time_offset_ = 0;
  Clock::time_point start_ = Clock::now();
  int64_t arrays_trained_ = 0;
  int64_t units_saved_ = 0;  // budget units saved short of their arrays' ends (a test's interrupt)
  std::map<ArrayKey, int64_t> max_models_;
  std::vector<std::pair<double, TuneRecord>> timeline_;
  std::map<int64_t, TuneRecord> last_;  // each trial's latest outcome
  std::set<int64_t> stopped_, pruned_;
  TuneMpi* mpi_ = nullptr;
  std::vector<std::vector<std::string>>* capture_ = nullptr;  // rows of train_task
  struct Live {
    ArrayKey key;
    int64_t at = 0;            // the budget every slot's trial has reached
    std::vector<int64_t> ids;  // the trial in each slot
    std::unique_ptr<RunArray> array;
    ArrayProgress progress;
  };
  std::optional<Live> live_;
  TuneLiveCounts live_counts_;
};

}  // namespace hfta
