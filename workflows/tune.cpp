// run_tune: the executor that trains the scheduler's jobs as arrays (tune.h), the outputs and
// --resume.
#include "workflows/tune.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "backend/cpu/runtime.h"
#include "core/error.h"
#include "models/slots.h"
#include "optim/slots.h"
#include "workflows/checkpoint.h"
#include "workflows/csv.h"
#include "workflows/data.h"
#include "workflows/evaluate.h"
#include "workflows/export.h"
#include "workflows/interrupt.h"
#include "workflows/plan_choice.h"
#include "workflows/safetensors.h"
#include "workflows/train_loop.h"
#include "workflows/tune_mpi.h"

namespace hfta {

namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string quote_arg(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789-_./=:,+") == std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// What the search state depends on: --resume must find the same.
nlohmann::json run_identity(const TuneOptions& o, const TuneSpace& space) {
  const TuneSchedule& s = o.schedule;
  return {{"space_file", o.space},
          {"space", space.text()},
          {"model", o.model},
          {"dataset", o.dataset},
          {"optimizer", o.optimizer},
          {"batch_size", o.batch_size},
          {"algorithm", s.algorithm},
          {"metric", o.metric},
          {"num_samples", s.num_samples},
          {"max_iters", s.max_iters},
          {"eta", s.eta},
          {"skip_last", s.skip_last},
          {"min_iters", s.min_iters},
          {"workers", s.workers},
          {"iters_per_epoch", o.iters_per_epoch},
          {"seed", o.seed},
          {"synthetic_size", o.synthetic_train_size},
          {"synthetic_test_size", o.synthetic_test_size}};
}

void check_resume_identity(const nlohmann::json& was, const nlohmann::json& is,
                           const std::string& path) {
  if (was.value("space", std::string()) != is["space"].get<std::string>())
    fail(
        "cannot --resume {}: it searched the space {}, this command gives {} with other contents; "
        "resume with the same space file or choose another --out",
        path, was.value("space_file", std::string("?")), is["space_file"].get<std::string>());
  for (const auto& [key, value] : is.items()) {
    if (key == "space" || key == "space_file") continue;
    if (!was.contains(key) || was[key] != value)
      fail(
          "cannot --resume {}: it was run with --{} {}, this command gives {}; resume with the "
          "same "
          "flags or choose another --out",
          path, key == "synthetic_size" ? "synthetic-size" : key,
          was.contains(key) ? was[key].dump() : "nothing", value.dump());
  }
}

std::vector<std::string> history_columns(const TuneSpace& space) {
  std::vector<std::string> c = {"trial"};
  for (const TuneParam& p : space.params()) c.push_back(p.name);
  for (const char* name : {"bracket", "rung", "from_budget", "budget", "val_acc", "val_loss",
                           "metric", "steps", "wall_s", "time_s", "status"})
    c.push_back(name);
  return c;
}

std::string number(double x) { return std::isfinite(x) ? fmt::format("{}", x) : "nan"; }

// The search: the data, the space and the outputs of one run.
class Search {
 public:
  Search(const TuneOptions& o, const TuneSpace& space, const Data& data, ModelConfig config,
         std::string dir)
      : o_(o), space_(space), data_(data), config_(std::move(config)), dir_(std::move(dir)) {}

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
    int64_t start = 0;  // the budget the trial's checkpoint holds (from, or to when only the row
                        // was lost)
  };
  void train_array(const ArrayKey& key, int64_t start, int64_t to, const std::vector<Job>& jobs,
                   std::vector<TuneOutcome>& outcomes);
  void write_row(const TuneJob& job, int64_t trial_steps, double acc, double loss, double metric,
                 double wall, double time_s, const std::string& status);
  std::string trial_dir(int64_t t) const { return fmt::format("{}/trials/{}", dir_, t); }
  int64_t max_models(const ArrayKey& key);
  // The array trained last stays alive (models/slots.h): an array of the same key that continues
  // some of its trials from the budget it reached takes it compacted to them (no checkpoint
  // read), and one of fresh trials takes its slots refilled (reinit_slot, reset_slot), instead
  // of building a new array. Either trains what a new array would (tests/workflows/
  // test_tune_live.cpp). False when the live array does not fit: build one.
  // A new array of trials `ids` at budget `start` (their checkpoints when start > 0).
  void build_array(ModelConfig& config, const ArrayKey& key, int64_t start,
                   const std::vector<int64_t>& ids, const HyperValues& values, ModelArray& array,
                   std::vector<int64_t>& skipped);
  bool take_live(const ArrayKey& key, int64_t start, const std::vector<int64_t>& ids,
                 const HyperValues& values, ModelArray& array, std::vector<int64_t>& skipped);

  const TuneOptions& o_;
  const TuneSpace& space_;
  const Data& data_;
  ModelConfig config_;
  std::string dir_;
  std::unique_ptr<CsvWriter> history_;
  std::map<std::pair<int64_t, int64_t>, Done> replay_;  // (trial, budget) -> outcome
  double time_offset_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  int64_t arrays_trained_ = 0;
  std::map<ArrayKey, int64_t> max_models_;
  std::vector<std::pair<double, TuneRecord>> timeline_;
  std::map<int64_t, TuneRecord> last_;  // each trial's latest outcome
  std::set<int64_t> stopped_, pruned_;
  TuneMpi* mpi_ = nullptr;
  std::vector<std::vector<std::string>>* capture_ = nullptr;  // rows of train_task
  struct Live {
    ArrayKey key;
    int64_t at = 0;  // the budget every slot's trial has reached
    ModelArray array;
    std::vector<int64_t> skipped;  // per slot
  };
  std::optional<Live> live_;
  TuneLiveCounts live_counts_;
};

bool Search::take_live(const ArrayKey& key, int64_t start, const std::vector<int64_t>& ids,
                       const HyperValues& values, ModelArray& array,
                       std::vector<int64_t>& skipped) {
  if (!o_.live_arrays || !live_ || live_->key != key) return false;
  Live& live = *live_;
  const std::vector<int64_t>& slots = live.array.ids;
  std::vector<int64_t> keep;
  if (start > 0) {
    // Every trial must be in the live array at budget `start`; else their checkpoints are read.
    if (live.at != start) return false;
    for (int64_t id : ids) {
      const auto it = std::find(slots.begin(), slots.end(), id);
      if (it == slots.end()) return false;
      keep.push_back(it - slots.begin());
    }
  } else {
    if (slots.size() < ids.size()) return false;
    for (size_t b = 0; b < ids.size(); ++b) keep.push_back(static_cast<int64_t>(b));
  }
  bool same_slots = keep.size() == slots.size();
  for (size_t i = 0; same_slots && i < keep.size(); ++i)
    same_slots = keep[i] == static_cast<int64_t>(i);
  if (same_slots) {
    array = std::move(live.array);
  } else {
    array.model = compact(*live.array.model, keep);
    array.optimizer = compact_optimizer(*live.array.optimizer, array.model->net(), keep);
  }
  array.ids = ids;
  if (start > 0) {
    for (size_t b = 0; b < ids.size(); ++b) skipped[b] = live.skipped[static_cast<size_t>(keep[b])];
    live_counts_.arrays_continued += 1;
  } else {
    // Fresh trials: each slot becomes model ids[b] as a new array would build it, with its
    // trial's hyperparameters and a zeroed optimizer state.
    for (size_t b = 0; b < ids.size(); ++b) {
      std::map<std::string, float> named;
      for (const auto& [name, v] : values) named[name] = v[b];
      array.model->reinit_slot(static_cast<int64_t>(b), ids[b]);
      array.optimizer->reset_slot(static_cast<int64_t>(b), SlotHyper::from_named(named));
    }
    live_counts_.slots_refilled += static_cast<int64_t>(ids.size());
  }
  if (!same_slots) live_counts_.compactions += 1;
  live_.reset();
  return true;
}

void Search::stopped(const std::vector<int64_t>& trials) {
  stopped_.insert(trials.begin(), trials.end());
  if (o_.keep_checkpoints) return;
  const bool maximize = o_.metric == "val_acc";
  const TuneRecord* best = nullptr;
  // The best of the stopped trials stays: their records are final, so it only ever improves, and
  // the search's best is it or a trial still going (a promoted trial's metric can drop, so the
  // best so far of all trials is no safe test).
  for (int64_t t : stopped_) {
    const auto it = last_.find(t);
    if (it == last_.end()) continue;
    const TuneRecord& r = it->second;
    if (!r.outcome.failed && (best == nullptr || better_outcome(r, *best, maximize))) best = &r;
  }
  std::vector<int64_t> now;
  for (int64_t t : stopped_) {
    if (pruned_.contains(t) || (best != nullptr && best->job.trial == t)) continue;
    pruned_.insert(t);
    std::error_code ec;
    // A --resume replays stopped trials whose files are gone already: only real deletions count.
    if (fs::remove(trial_dir(t) + "/checkpoint.bin", ec)) now.push_back(t);
  }
  if (now.empty()) return;
  std::ofstream log(dir_ + "/pruned.log", std::ios::app);
  log << fmt::format("deleted the checkpoints of trials {} (stopped for good; best stopped: {})\n",
                     fmt::join(now, ","), best ? std::to_string(best->job.trial) : "none");
  if (!o_.quiet)
    fmt::print("pruned the checkpoints of trials {} (stopped; --keep-checkpoints keeps them)\n",
               fmt::join(now, ","));
}

void Search::load_history(const std::string& path) {
  if (!fs::exists(path)) return;
  CsvTable t = read_csv(path);
  HFTA_CHECK(t.header == history_columns(space_),
             "cannot --resume: {} has other columns than this space gives; choose another --out",
             path);
  const size_t trial = t.column("trial"), budget = t.column("budget"), metric = t.column("metric"),
               status = t.column("status"), time = t.column("time_s");
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const std::string& s = t.rows[r][status];
    if (s != "ok" && s != "failed") continue;  // stopped: trained again
    Done d{.outcome = {.metric = t.rows[r][metric] == "nan" ? NAN : t.number(r, metric),
                       .failed = s == "failed"},
           .time_s = t.number(r, time)};
    replay_[{t.integer(r, trial), t.integer(r, budget)}] = d;
    time_offset_ = std::max(time_offset_, d.time_s);
  }
}

int64_t Search::max_models(const ArrayKey& key) {
  if (o_.mode == "serial") return 1;
  auto it = max_models_.find(key);
  if (it != max_models_.end()) return it->second;
  int64_t n = o_.max_fused > 0 ? o_.max_fused : INT64_MAX;
  if (o_.memory_budget_bytes > 0) {
    // Arenas grow linearly in B: one model's bytes at this batch size bound the array.
    ModelConfig c = config_;
    if (key.dropout >= 0) c.dropout = key.dropout;
    // One model's arenas: every plan runs B = 1 the same way (auto is not buildable).
    c.plan = ExecutionPlan{};
    auto one = make_model(c.name, c.spec({0}, key.batch_size, o_.seed));
    const int64_t per_model = static_cast<int64_t>(one->arena_bytes());
    n = std::min(n, std::max<int64_t>(1, o_.memory_budget_bytes / std::max<int64_t>(1, per_model)));
    if (!o_.quiet)
      fmt::print("arrays of {}: at most {} models within --memory-budget ({} bytes per model)\n",
                 key.str(), n, per_model);
  }
  max_models_[key] = n;
  return n;
}

std::vector<TuneOutcome> Search::execute(const std::vector<TuneJob>& jobs) {
  std::vector<TuneOutcome> outcomes(jobs.size());
  // Arrays: jobs of one non-fusible key and the same budgets, in order of first appearance.
  std::vector<std::tuple<ArrayKey, int64_t, int64_t>> order;
  std::map<std::tuple<ArrayKey, int64_t, int64_t>, std::vector<Job>> arrays;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const TuneJob& j = jobs[i];
    if (auto it = replay_.find({j.trial, j.to}); it != replay_.end()) {
      outcomes[i] = it->second.outcome;
      last_[j.trial] = {j, outcomes[i]};
      if (!outcomes[i].failed) timeline_.push_back({it->second.time_s, {j, outcomes[i]}});
      continue;
    }
    int64_t start = j.from;
    if (j.from > 0 || fs::exists(trial_dir(j.trial) + "/checkpoint.bin")) {
      // A crash after the checkpoint but before the row: the checkpoint is already at `to`.
      const std::string path = trial_dir(j.trial) + "/checkpoint.bin";
      if (fs::exists(path)) {
        const int64_t at = load_checkpoint(path).epoch;
        if (at == j.to)
          start = j.to;
        else if (j.from == 0)
          start = 0;  // an interrupted first rung: start over
        else
          HFTA_CHECK(at == j.from,
                     "{} holds trial {} at budget {}, the search needs {}: was "
                     "{} edited? choose another --out",
                     path, j.trial, at, j.from, dir_);
      } else {
        fail("trial {} continues from budget {} but {} is missing; choose another --out", j.trial,
             j.from, path);
      }
    }
    const ArrayKey key = array_key(space_.sample(o_.seed, j.trial),
                                   {.optimizer = o_.optimizer, .batch_size = o_.batch_size});
    auto k = std::make_tuple(key, start, j.to);
    if (!arrays.contains(k)) order.push_back(k);
    arrays[k].push_back({.job = j, .index = i, .start = start});
  }
  if (mpi_ != nullptr) {
    // The same arrays as one process trains, sharded over the ranks (tune_mpi.h).
    std::vector<TuneArrayTask> tasks;
    std::vector<std::vector<size_t>> indices;
    for (const auto& k : order) {
      const std::vector<Job>& all = arrays[k];
      const auto n = static_cast<size_t>(max_models(std::get<0>(k)));
      for (size_t first = 0; first < all.size(); first += n) {
        tasks.push_back({.start = std::get<1>(k), .to = std::get<2>(k)});
        indices.emplace_back();
        for (size_t i = first; i < std::min(all.size(), first + n); ++i) {
          tasks.back().jobs.push_back(all[i].job);
          indices.back().push_back(all[i].index);
        }
      }
    }
    const size_t time_column = history_columns(space_).size() - 2;
    // Rows as each array's result arrives (a crash keeps what finished, for --resume).
    auto done = [&](size_t a, const TuneArrayResult& r) {
      const double time_s = time_offset_ + seconds_since(start_);
      if (!o_.quiet && r.lost) {
        std::vector<int64_t> ids;
        for (const TuneJob& j : tasks[a].jobs) ids.push_back(j.trial);
        fmt::print("  array of trials {} on rank {} failed: {}\n", fmt::join(ids, ","), r.rank,
                   r.error);
        std::fflush(stdout);
      }
      if (r.lost) {
        for (const TuneJob& j : tasks[a].jobs)
          write_row(j, 0, NAN, NAN, NAN, r.wall_s, time_s, "failed");
      } else {
        for (std::vector<std::string> row : r.rows) {
          row[time_column] = fmt::format("{:.3f}", time_s);
          history_->row(row);
        }
      }
      for (size_t b = 0; b < tasks[a].jobs.size(); ++b) {
        outcomes[indices[a][b]] = r.outcomes[b];
        last_[tasks[a].jobs[b].trial] = {tasks[a].jobs[b], r.outcomes[b]};
        if (!r.outcomes[b].failed) timeline_.push_back({time_s, {tasks[a].jobs[b], r.outcomes[b]}});
      }
      ++arrays_trained_;
    };
    mpi_->run(
        tasks, [this](const TuneArrayTask& t) { return train_task(t); }, done);
    return outcomes;
  }
  for (const auto& k : order) {
    const auto& [key, start, to] = k;
    const std::vector<Job>& all = arrays[k];
    const auto n = static_cast<size_t>(max_models(key));
    for (size_t first = 0; first < all.size(); first += n) {
      std::vector<Job> chunk(all.begin() + static_cast<long>(first),
                             all.begin() + static_cast<long>(std::min(all.size(), first + n)));
      train_array(key, start, to, chunk, outcomes);
    }
  }
  return outcomes;
}

void Search::write_row(const TuneJob& job, int64_t trial_steps, double acc, double loss,
                       double metric, double wall, double time_s, const std::string& status) {
  std::vector<std::string> row = {std::to_string(job.trial)};
  const TuneConfig config = space_.sample(o_.seed, job.trial);
  for (const TuneParam& p : space_.params()) row.push_back(config.at(p.name).str());
  for (const std::string& v : {std::to_string(job.bracket), std::to_string(job.rung),
                               std::to_string(job.from), std::to_string(job.to), number(acc),
                               number(loss), number(metric), std::to_string(trial_steps),
                               fmt::format("{:.3f}", wall), fmt::format("{:.3f}", time_s), status})
    row.push_back(v);
  if (capture_ != nullptr)
    capture_->push_back(row);
  else
    history_->row(row);
}

TuneArrayResult Search::train_task(const TuneArrayTask& task) {
  TuneArrayResult r;
  std::vector<Job> jobs;
  for (size_t i = 0; i < task.jobs.size(); ++i)
    jobs.push_back({.job = task.jobs[i], .index = i, .start = task.start});
  const ArrayKey key = array_key(space_.sample(o_.seed, task.jobs.at(0).trial),
                                 {.optimizer = o_.optimizer, .batch_size = o_.batch_size});
  r.outcomes.resize(jobs.size());
  // Rank 0 writes the rows and the timeline when the result reaches it.
  const size_t timeline = timeline_.size();
  const int64_t arrays = arrays_trained_;
  const auto start = std::chrono::steady_clock::now();
  capture_ = &r.rows;
  try {
    train_array(key, task.start, task.to, jobs, r.outcomes);
  } catch (...) {
    capture_ = nullptr;
    throw;
  }
  capture_ = nullptr;
  timeline_.erase(timeline_.begin() + static_cast<long>(timeline), timeline_.end());
  arrays_trained_ = arrays;
  r.wall_s = seconds_since(start);
  return r;
}

void Search::build_array(ModelConfig& config, const ArrayKey& key, int64_t start,
                         const std::vector<int64_t>& ids, const HyperValues& values,
                         ModelArray& array, std::vector<int64_t>& skipped) {
  const int64_t B = static_cast<int64_t>(ids.size());
  array.ids = ids;
  // --plan auto: timed (or read from the plan cache) for this array's B and batch size.
  config.plan = resolve_plan(config.plan, config, ids, key.batch_size, o_.seed, key.optimizer,
                             o_.memory_budget_bytes,
                             [&](const std::string& line) {
                               if (!o_.quiet) fmt::print("{}\n", line);
                             })
                    .plan;
  array.model = make_model(config.name, config.spec(ids, key.batch_size, o_.seed));
  array.optimizer = make_optimizer(key.optimizer, *array.model, values, key.no_decay_norm_bias);
  Checkpoint c;
  if (start > 0) {
    // The trials' own states, stacked into one array (each replica-major slice is one trial).
    for (size_t b = 0; b < ids.size(); ++b) {
      Checkpoint one = load_checkpoint(trial_dir(ids[b]) + "/checkpoint.bin");
      if (b == 0) {
        c = one;
        c.B = B;
        c.model_ids = ids;
        c.forward_origins = {one.forward_origins.empty() ? 0 : one.forward_origins[0]};
        continue;
      }
      for (size_t i = 0; i < c.tensors.size(); ++i)
        c.tensors[i].values.insert(c.tensors[i].values.end(), one.tensors[i].values.begin(),
                                   one.tensors[i].values.end());
      c.optimizer_steps.push_back(one.optimizer_steps[0]);
      c.skipped_steps.push_back(one.skipped_steps[0]);
      c.forward_origins.push_back(one.forward_origins.empty() ? 0 : one.forward_origins[0]);
    }
    for (CheckpointTensor& t : c.tensors) t.shape[0] = B;
    restore_tensors(c, *array.model, array.optimizer.get());
    skipped = c.skipped_steps;
  }
}

void Search::train_array(const ArrayKey& key, int64_t start, int64_t to,
                         const std::vector<Job>& jobs, std::vector<TuneOutcome>& outcomes) {
  if (InterruptGuard::interrupted())
    fail("interrupted; the search is saved in {}: run the same command with --resume to continue",
         dir_);
  const auto array_start = std::chrono::steady_clock::now();
  const int64_t B = static_cast<int64_t>(jobs.size());
  std::vector<int64_t> ids;
  for (const Job& j : jobs) ids.push_back(j.job.trial);
  // Per-trial hyperparameters, then the optimizer's defaults for the rest.
  HyperValues given;
  for (const Job& j : jobs)
    for (const auto& [name, v] : config_hyper(space_.sample(o_.seed, j.job.trial), key.optimizer))
      given[name].push_back(v[0]);
  const HyperValues values = resolve_hyper(key.optimizer, given, B);
  ModelConfig config = config_;
  if (key.dropout >= 0) config.dropout = key.dropout;
  config.no_decay_norm_bias = key.no_decay_norm_bias;
  ModelArray array;
  std::vector<int64_t> skipped(jobs.size(), 0);
  const bool live = take_live(key, start, ids, values, array, skipped);
  if (!live) build_array(config, key, start, ids, values, array, skipped);
  Loader loader(data_.train, {.batch_size = key.batch_size,
                              .shuffle = true,
                              .seed = o_.seed,
                              .drop_last = true,
                              .iters_per_epoch = o_.iters_per_epoch});
  Batch batch = loader.make_batch();
  const int64_t steps_per_unit = loader.batches_per_epoch();
  if (!o_.quiet) {
    fmt::print("training trial{} {} ({}) from budget {} to {}: {} model{} in one array{}\n",
               B == 1 ? "" : "s", fmt::join(ids, ","), key.str(), start, to, B, B == 1 ? "" : "s",
               !live       ? ""
               : start > 0 ? " (the live array, continued)"
                           : " (live slots refilled)");
    std::fflush(stdout);
  }
  int64_t step = start * steps_per_unit;
  bool failed = false;
  std::string failure;
  try {
    for (int64_t u = start; u < to; ++u) {
      loader.start_epoch(u);
      train_steps(array, loader, batch, kUntilEpochEnds, [&](const StepReport& report) {
        ++step;
        for (int64_t b = 0; b < B; ++b)
          if (report.any_skipped() && report.skipped[b]) ++skipped[b];
        if (InterruptGuard::interrupted()) {
          const double time_s = time_offset_ + seconds_since(start_);
          for (const Job& j : jobs)
            write_row(j.job, step, NAN, NAN, NAN, seconds_since(array_start), time_s, "stopped");
          fail(
              "interrupted; the search is saved in {}: run the same command with --resume to "
              "continue",
              dir_);
        }
        return true;
      });
    }
  } catch (const Error& e) {
    if (InterruptGuard::interrupted()) throw;
    failed = true;
    failure = e.what();
  }
  Evaluation eval;
  if (!failed) eval = evaluate(*array.model, data_.test);
  // Save every trial's state (B = 1 checkpoints) before its row: a row always has its state.
  if (!failed) {
    Checkpoint all;
    all.model = config.name;
    all.sample_shape.assign(config.sample_shape.begin(), config.sample_shape.end());
    all.num_classes = config.num_classes;
    all.dropout = config.dropout.value_or(-1.0f);
    all.no_decay_norm_bias = config.no_decay_norm_bias;
    all.B = B;
    all.seed = o_.seed;
    all.batch_size = key.batch_size;
    all.model_ids = ids;
    all.optimizer = key.optimizer;
    all.hyper = hyper_record(values);
    all.epoch = to;
    all.step = step;
    all.epoch_loss_sum.assign(jobs.size(), 0.0);
    for (int64_t b = 0; b < B; ++b) all.last_train_loss.push_back(array.model->losses()[b]);
    auto steps = array.optimizer->steps();
    all.optimizer_steps.assign(steps.begin(), steps.end());
    all.skipped_steps = skipped;
    all.forward_origins = array.model->net().forward_origins();
    capture_tensors(*array.model, array.optimizer.get(), all.tensors);
    for (int64_t b = 0; b < B; ++b) {
      fs::create_directories(trial_dir(ids[b]));
      save_checkpoint(trial_dir(ids[b]) + "/checkpoint.bin", extract_model(all, b));
      std::ofstream cmd(trial_dir(ids[b]) + "/command.txt", std::ios::trunc);
      cmd << trial_command(o_, space_.sample(o_.seed, ids[b]), ids[b], to,
                           trial_dir(ids[b]) + "/reproduce")
          << "\n";
    }
  }
  const double wall = seconds_since(array_start);
  const double time_s = time_offset_ + seconds_since(start_);
  for (int64_t b = 0; b < B; ++b) {
    const Job& j = jobs[static_cast<size_t>(b)];
    TuneOutcome& out = outcomes[j.index];
    const double acc = failed ? NAN : eval.accuracy[b], loss = failed ? NAN : eval.loss[b];
    out.failed = failed;
    out.metric = o_.metric == "val_acc" ? acc : loss;
    if (std::isnan(out.metric)) out.metric = NAN;
    write_row(j.job, step, acc, loss, out.metric, wall, time_s, failed ? "failed" : "ok");
    last_[j.job.trial] = {j.job, out};
    if (!failed) timeline_.push_back({time_s, {j.job, out}});
  }
  if (!o_.quiet) {
    if (failed)
      fmt::print("  failed: {}\n", failure);
    else
      for (int64_t b = 0; b < B; ++b)
        fmt::print("  trial {:>3} budget {:>3}: val_acc {:.4f} val_loss {:.4f}\n", ids[b], to,
                   eval.accuracy[b], eval.loss[b]);
    std::fflush(stdout);
  }
  ++arrays_trained_;
  if (!failed && o_.live_arrays)
    live_ = Live{.key = key, .at = to, .array = std::move(array), .skipped = skipped};
  if (o_.interrupt_after_arrays > 0 && arrays_trained_ >= o_.interrupt_after_arrays)
    fail("interrupted (test) after {} arrays; run the same command with --resume to continue",
         arrays_trained_);
}

// A rank > 0 under mpirun: trains the arrays rank 0 sends until it says stop; writes no outputs
// but the trials' checkpoints (in the shared --out).
TuneRunResult serve_rank(const TuneOptions& o, const TuneSpace& space, TuneMpi& mpi) {
  const ModelInfo& info = model_info(o.model);
  Data data = load_data(o.dataset, o.data_dir, info.default_sample_shape, info.default_num_classes,
                        o.synthetic_train_size, o.synthetic_test_size, o.seed);
  ModelConfig config = model_config(o.model, data);
  config.plan = ExecutionPlan::parse(o.mode == "concurrent" ? "threads" : o.plan);
  Search search(o, space, data, config, fmt::format("{}/{}", o.out, o.mode));
  mpi.serve([&](const TuneArrayTask& t) { return search.train_task(t); });
  return {.dir = fmt::format("{}/{}", o.out, o.mode)};
}

// trajectory.csv from the timeline; the plot of every mode's trajectory in the parent --out.
void write_trajectory(const std::string& dir, const std::string& mode,
                      std::vector<std::pair<double, TuneRecord>> timeline, bool maximize,
                      const std::string& metric) {
  std::stable_sort(timeline.begin(), timeline.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  CsvWriter t(dir + "/trajectory.csv", {"time_s", "best_" + metric, "trial", "budget"});
  const TuneRecord* best = nullptr;
  double best_time = 0;
  for (const auto& [time, r] : timeline)
    if (best == nullptr || better_outcome(r, *best, maximize)) {
      best = &r;
      best_time = time;
      t.row({fmt::format("{:.3f}", time), number(r.outcome.metric), std::to_string(r.job.trial),
             std::to_string(r.job.to)});
    }
  // The best held until the search ended: the line runs to the end.
  if (best != nullptr && timeline.back().first > best_time)
    t.row({fmt::format("{:.3f}", timeline.back().first), number(best->outcome.metric),
           std::to_string(best->job.trial), std::to_string(best->job.to)});
  (void)mode;
}

void plot_trajectories(const std::string& out, const std::string& metric, bool quiet) {
  std::string plots;
  for (const char* mode : {"serial", "concurrent", "fused"}) {
    const std::string csv = fmt::format("{}/{}/trajectory.csv", out, mode);
    if (!fs::exists(csv)) continue;
    plots += fmt::format("{}'{}/trajectory.csv' using 1:2 with steps lw 2 title '{}'",
                         plots.empty() ? "plot " : ", ", mode, mode);
  }
  if (plots.empty()) return;
  std::ofstream gp(out + "/trajectory.gp", std::ios::trunc);
  gp << "set terminal pngcairo size 800,500 noenhanced\nset output 'trajectory.png'\n"
     << "set datafile separator ','\nset key autotitle columnhead bottom right\n"
     << "set xlabel 'search time (s)'\nset ylabel 'best " << metric << "'\nset grid\n"
     << plots << "\n";
  gp.close();
  const std::string cmd =
      fmt::format("cd {} && gnuplot trajectory.gp > /dev/null 2>&1", quote_arg(out));
  if (std::system(cmd.c_str()) != 0 && !quiet)
    fmt::print(stderr,
               "warning: gnuplot failed or is missing (apt-get install gnuplot-nox): no "
               "trajectory.png; run `gnuplot trajectory.gp` in {}\n",
               out);
}

}  // namespace

TrainOptions trial_train_options(const TuneOptions& o, const TuneConfig& config, int64_t trial,
                                 int64_t budget, const std::string& out) {
  const ArrayKey key = array_key(config, {.optimizer = o.optimizer, .batch_size = o.batch_size});
  TrainOptions t;
  t.model = o.model;
  t.dataset = o.dataset;
  t.data_dir = o.data_dir;
  t.optimizer = key.optimizer;
  if (key.dropout >= 0) t.dropout = key.dropout;
  t.no_decay_norm_bias = key.no_decay_norm_bias;
  t.hyper = config_hyper(config, key.optimizer);
  t.epochs = budget;
  t.batch_size = key.batch_size;
  t.iters_per_epoch = o.iters_per_epoch;
  t.seed = o.seed;
  t.first_model_id = trial;
  t.plan = "fused";
  t.out = out;
  t.synthetic_train_size = o.synthetic_train_size;
  t.synthetic_test_size = o.synthetic_test_size;
  t.progress = false;
  return t;
}

std::string trial_command(const TuneOptions& o, const TuneConfig& config, int64_t trial,
                          int64_t budget, const std::string& out) {
  const TrainOptions t = trial_train_options(o, config, trial, budget, out);
  std::string s = fmt::format("hfta train --model {} --dataset {}", t.model, t.dataset);
  if (!t.data_dir.empty()) s += " --data-dir " + quote_arg(t.data_dir);
  if (t.dataset == "synthetic" || t.dataset == "shapes")
    s += fmt::format(" --synthetic-size {}", t.synthetic_train_size);
  s += fmt::format(" --optimizer {}", t.optimizer);
  for (const auto& [name, v] : t.hyper) {
    std::string flag = "--" + name;
    std::replace(flag.begin(), flag.end(), '_', '-');
    s += fmt::format(" {} {}", flag, v[0]);
  }
  if (t.dropout) s += fmt::format(" --dropout {}", *t.dropout);
  if (t.no_decay_norm_bias) s += " --no-decay-norm-bias";
  s += fmt::format(" --batch-size {} --epochs {}", t.batch_size, t.epochs);
  if (t.iters_per_epoch > 0) s += fmt::format(" --iters-per-epoch {}", t.iters_per_epoch);
  if (t.first_epoch > 0) s += fmt::format(" --first-epoch {}", t.first_epoch);
  s += fmt::format(" --seed {} --first-model-id {} --plan fused --out {}", t.seed, trial,
                   quote_arg(out));
  return s;
}

TuneRunResult run_tune(const TuneOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  HFTA_CHECK(!o.space.empty(), "--space is required: a JSON file such as workflows/spaces/{}.json",
             o.model);
  HFTA_CHECK(o.mode == "serial" || o.mode == "fused" || o.mode == "concurrent",
             "--mode must be serial, concurrent or fused, got {}", o.mode);
  HFTA_CHECK(o.metric == "val_acc" || o.metric == "val_loss",
             "--metric must be val_acc or val_loss, got {}", o.metric);
  HFTA_CHECK(o.batch_size >= 1, "--batch-size must be at least 1, got {}", o.batch_size);
  HFTA_CHECK(o.iters_per_epoch >= 0, "--iters-per-epoch must be >= 0, got {}", o.iters_per_epoch);
  TuneSchedule schedule = o.schedule;
  schedule.maximize = o.metric == "val_acc";
  check_schedule(schedule);
  const TuneSpace space = TuneSpace::load(o.space, o.optimizer);
  if (o.threads > 0) cpu::set_num_threads(o.threads);
  const ModelInfo& info = model_info(o.model);
  // Under mpirun (tune_mpi.h): rank 0 searches and writes, the other ranks train its arrays.
  std::unique_ptr<TuneMpi> mpi;
  int rank_threads = o.threads;
  if (tune_mpi_launched()) {
    mpi = std::make_unique<TuneMpi>();
    if (o.rank_timeout_s > 0) mpi->rank_timeout_s = o.rank_timeout_s;
    if (o.threads == 0) cpu::set_num_threads(rank_threads = mpi->default_threads());
    if (mpi->rank() > 0) return serve_rank(o, space, *mpi);
  }

  const std::string dir = fmt::format("{}/{}", o.out, o.mode);
  const std::string state = dir + "/tune.json", history = dir + "/history.csv";
  const nlohmann::json identity = run_identity(o, space);
  if (o.resume) {
    HFTA_CHECK(fs::exists(state), "--resume: no search in {} (expected {}): run without --resume",
               dir, state);
    std::ifstream in(state);
    nlohmann::json was;
    try {
      was = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      fail("{} is malformed ({}): choose another --out", state, e.what());
    }
    check_resume_identity(was, identity, state);
  } else {
    HFTA_CHECK(!fs::exists(history),
               "{} already holds a search ({}): continue it with --resume, or choose another --out",
               dir, history);
  }
  Data data = load_data(o.dataset, o.data_dir, info.default_sample_shape, info.default_num_classes,
                        o.synthetic_train_size, o.synthetic_test_size, o.seed);
  ModelConfig config = model_config(o.model, data);
  // Concurrent: the same arrays, but their models run side by side on threads of their own
  // (plan threads), unfused: on CPU cores what HFHT's concurrent processes are on one GPU.
  config.plan = ExecutionPlan::parse(o.mode == "concurrent" ? "threads" : o.plan);
  // --plan auto is resolved per array (train_array), as make_array does: arrays differ in B and
  // batch size, and the plan cache remembers each choice.
  // Batch sizes the data cannot fill fail now, not in the middle of the search.
  int64_t largest_batch = o.batch_size;
  for (const TuneParam& p : space.params())
    if (p.name == "batch_size") {
      largest_batch = static_cast<int64_t>(p.high);
      for (const TuneValue& v : p.values)
        largest_batch = std::max(largest_batch, static_cast<int64_t>(v.number));
    }
  HFTA_CHECK(largest_batch <= data.train.size,
             "batch size {} (--batch-size or the space's batch_size) exceeds the {} training "
             "samples of {}",
             largest_batch, data.train.size, o.dataset);
  std::error_code ec;
  fs::create_directories(dir, ec);
  HFTA_CHECK(!ec, "cannot create {}: {}", dir, ec.message());
  {
    std::ofstream out(state, std::ios::trunc);
    out << identity.dump(2) << "\n";
  }

  Search search(o, space, data, config, dir);
  if (mpi) search.set_mpi(mpi.get());
  if (o.resume) search.load_history(history);
  search.open_history(history, o.resume);
  if (!o.quiet) {
    fmt::print("{}\n", cpu::describe_runtime());
    fmt::print(
        "tuning {} on {} ({} train samples): {} over {} ({} parameters), mode {}, metric {}\n",
        o.model, o.dataset, data.train.size, schedule.algorithm, o.space, space.params().size(),
        o.mode, o.metric);
    if (mpi)
      fmt::print("arrays sharded over {} MPI ranks (rank 0 {}), {} threads per rank\n", mpi->size(),
                 mpi->size() <= kRank0TrainsUpTo ? "trains too" : "coordinates", rank_threads);
    std::fflush(stdout);
  }
  TuneRunResult result;
  result.dir = dir;
  {
    InterruptGuard guard;
    result.records = run_schedule(
        schedule, [&](const std::vector<TuneJob>& jobs) { return search.execute(jobs); },
        [&](const std::vector<int64_t>& trials) { search.stopped(trials); });
  }
  if (mpi) mpi->finish();
  result.arrays_trained = search.arrays_trained();
  result.live = search.live_counts();
  write_trajectory(dir, o.mode, search.timeline(), schedule.maximize, o.metric);
  plot_trajectories(o.out, o.metric, o.quiet);

  // The best: each trial's last record (its checkpoint holds that budget).
  std::map<int64_t, TuneRecord> last;
  for (const TuneRecord& r : result.records) last[r.job.trial] = r;
  const TuneRecord* best = nullptr;
  for (const auto& [t, r] : last)
    if (!r.outcome.failed && (best == nullptr || better_outcome(r, *best, schedule.maximize)))
      best = &r;
  result.wall_seconds = seconds_since(start);
  if (best == nullptr) {
    fmt::print("every trial failed; see {}\n", history);
    return result;
  }
  result.best_trial = best->job.trial;
  result.best_metric = best->outcome.metric;
  result.best_budget = best->job.to;
  const std::string best_ckpt = fmt::format("{}/trials/{}/checkpoint.bin", dir, best->job.trial);
  Checkpoint c = load_checkpoint(best_ckpt);
  save_checkpoint(dir + "/best.bin", c);
  auto model = make_model(c.model, model_spec(c, 1));
  restore_tensors(c, *model, nullptr);
  write_safetensors(dir + "/best.safetensors", state_dict(*model, 0),
                    {{"format", "pt"},
                     {"hfta_model", model->name()},
                     {"sample_shape", model->sample_shape().str()},
                     {"num_classes", std::to_string(model->num_classes())},
                     {"source", best_ckpt}});
  if (!o.quiet)
    fmt::print(
        "done in {:.1f} s ({} arrays trained; live arrays: {} continued, {} compactions, {} slots "
        "refilled): best trial {} with {} {:.4f} at budget {}; {}/history.csv, "
        "{}/best.safetensors; retrain it alone with:\n  {}\n",
        result.wall_seconds, result.arrays_trained, result.live.arrays_continued,
        result.live.compactions, result.live.slots_refilled, best->job.trial, o.metric,
        best->outcome.metric, best->job.to, dir, dir,
        trial_command(o, space.sample(o.seed, best->job.trial), best->job.trial, best->job.to,
                      dir + "/reproduce"));
  return result;
}

}  // namespace hfta
