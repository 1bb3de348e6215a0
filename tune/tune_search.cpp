// TuneSearch (tune_search.h): arrays of trials, their rows and checkpoints, live arrays.
#include "tune/tune_search.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/interrupt.h"

namespace hfta {

namespace fs = std::filesystem;

std::vector<std::string> history_columns(const TuneSpace& space) {
  std::vector<std::string> c = {"trial"};
  for (const TuneParam& p : space.params()) c.push_back(p.name);
  for (const char* name : {"bracket", "rung", "from_budget", "budget", "val_acc", "val_loss",
                           "metric", "steps", "wall_s", "time_s", "status"})
    c.push_back(name);
  return c;
}

std::string csv_metric(double x) { return std::isfinite(x) ? fmt::format("{}", x) : "nan"; }

bool TuneSearch::take_live(const ArrayKey& key, int64_t start, const std::vector<int64_t>& ids,
                           std::unique_ptr<RunArray>& array, ArrayProgress& progress) {
  if (!o_.live_arrays || !live_ || live_->key != key) return false;
  Live live = std::move(*live_);
  live_.reset();
  std::vector<int64_t> keep;
  if (start > 0) {
    // Every trial must be in the live array at budget `start`; else their checkpoints are read.
    if (live.at != start) return false;
    for (int64_t id : ids) {
      const auto it = std::find(live.ids.begin(), live.ids.end(), id);
      if (it == live.ids.end()) return false;
      keep.push_back(it - live.ids.begin());
    }
  } else {
    if (live.ids.size() < ids.size()) return false;
    for (size_t b = 0; b < ids.size(); ++b) keep.push_back(static_cast<int64_t>(b));
  }
  bool same_slots = keep.size() == live.ids.size();
  for (size_t i = 0; same_slots && i < keep.size(); ++i)
    same_slots = keep[i] == static_cast<int64_t>(i);
  if (!same_slots && !live.array->keep_models(keep)) return false;
  progress = live.progress;
  progress.skipped.resize(live.ids.size(), 0);  // a task may count them in its optimizer alone
  if (!same_slots) {
    std::vector<int64_t> skipped;
    for (int64_t k : keep) skipped.push_back(progress.skipped.at(static_cast<size_t>(k)));
    progress.skipped = skipped;
  }
  progress.epoch_loss.assign(ids.size(), 0.0);
  progress.last_train_loss.resize(ids.size(), 0.0);
  if (start == 0) {
    // Fresh trials: each slot becomes trial ids[b] as a new array would build it, with its
    // hyperparameters and a zeroed optimizer state.
    for (size_t b = 0; b < ids.size(); ++b) {
      const TrainOptions one =
          trial_train_options(o_, space_.sample(o_.seed, ids[b]), ids[b], 1, "");
      if (!live.array->refill_model(static_cast<int64_t>(b), one)) return false;
      progress.skipped[b] = 0;
    }
    progress.step = 0;
    live_counts_.slots_refilled += static_cast<int64_t>(ids.size());
  } else {
    live_counts_.arrays_continued += 1;
  }
  if (!same_slots) live_counts_.compactions += 1;
  array = std::move(live.array);
  return true;
}

void TuneSearch::stopped(const std::vector<int64_t>& trials) {
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

std::vector<TuneHistoryRow> read_tune_history(const std::string& path, const TuneSpace& space) {
  const CsvTable t = read_csv(path);
  HFTA_CHECK(t.header == history_columns(space),
             "cannot --resume: {} has other columns than this space gives; choose another --out",
             path);
  const size_t trial = t.column("trial"), budget = t.column("budget"), metric = t.column("metric"),
               status = t.column("status"), time = t.column("time_s");
  std::vector<TuneHistoryRow> rows;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const std::string& s = t.rows[r][status];
    if (s != "ok" && s != "failed") continue;  // stopped: trained again
    TuneHistoryRow row{.trial = t.integer(r, trial),
                       .budget = t.integer(r, budget),
                       .outcome = {.metric = t.rows[r][metric] == "nan" ? NAN : t.number(r, metric),
                                   .failed = s == "failed"},
                       .time_s = t.number(r, time)};
    // The scheduler numbers trials from 0 and budgets from 1; times count up from 0.
    const auto bad = [&](const char* column, const std::string& value, const char* expected) {
      fail("cannot --resume: {} line {}, column {}: '{}' is not {}; choose another --out", path,
           t.line_numbers.at(r), column, value, expected);
    };
    if (row.trial < 0) bad("trial", t.rows[r][trial], "a trial number (0 or more)");
    if (row.budget < 1) bad("budget", t.rows[r][budget], "a budget (1 or more)");
    if (row.time_s < 0) bad("time_s", t.rows[r][time], "a time in seconds (0 or more)");
    rows.push_back(row);
  }
  return rows;
}

void TuneSearch::load_history(const std::string& path) {
  if (!fs::exists(path)) return;
  for (const TuneHistoryRow& row : read_tune_history(path, space_)) {
    replay_[{row.trial, row.budget}] = Done{.outcome = row.outcome, .time_s = row.time_s};
    time_offset_ = std::max(time_offset_, row.time_s);
  }
}

int64_t TuneSearch::max_models(const ArrayKey& key) {
  if (o_.mode == "serial") return 1;
  auto it = max_models_.find(key);
  if (it != max_models_.end()) return it->second;
  int64_t n = o_.max_fused > 0 ? o_.max_fused : INT64_MAX;
  if (o_.memory_budget_bytes > 0) {
    // Arenas grow linearly in B: one model's bytes at this batch size bound the array.
    TrainOptions one = trial_train_options(o_, {}, 0, 1, "");
    one.optimizer = key.optimizer;
    one.batch_size = key.batch_size;
    if (key.dropout >= 0) one.dropout = key.dropout;
    one.no_decay_norm_bias = key.no_decay_norm_bias;
    const int64_t per_model = data_.bytes_per_model(one);
    n = std::min(n, std::max<int64_t>(1, o_.memory_budget_bytes / std::max<int64_t>(1, per_model)));
    if (!o_.quiet)
      fmt::print("arrays of {}: at most {} models within --memory-budget ({} bytes per model)\n",
                 key.str(), n, per_model);
  }
  max_models_[key] = n;
  return n;
}

std::vector<TuneOutcome> TuneSearch::execute(const std::vector<TuneJob>& jobs) {
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
      // An interrupted array saved its trials after each whole unit: they go on from there (a
      // crash after the last checkpoint but before the row: it is already at `to`).
      const std::string path = trial_dir(j.trial) + "/checkpoint.bin";
      if (fs::exists(path)) {
        const int64_t at = load_checkpoint(path).epoch;
        if (at > j.from && at <= j.to)
          start = at;
        else if (j.from == 0)
          start = 0;  // a checkpoint this search did not write for the rung: start over
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
    const ArrayKey key = trial_array_key(o_, space_.sample(o_.seed, j.trial));
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

void TuneSearch::write_row(const TuneJob& job, int64_t trial_steps, double acc, double loss,
                           double metric, double wall, double time_s, const std::string& status) {
  std::vector<std::string> row = {std::to_string(job.trial)};
  const TuneConfig config = space_.sample(o_.seed, job.trial);
  for (const TuneParam& p : space_.params()) row.push_back(config.at(p.name).str());
  for (const std::string& v : {std::to_string(job.bracket), std::to_string(job.rung),
                               std::to_string(job.from), std::to_string(job.to), csv_metric(acc),
                               csv_metric(loss), csv_metric(metric), std::to_string(trial_steps),
                               fmt::format("{:.3f}", wall), fmt::format("{:.3f}", time_s), status})
    row.push_back(v);
  if (capture_ != nullptr)
    capture_->push_back(row);
  else
    history_->row(row);
}

void TuneSearch::record_outcomes(const std::vector<Job>& jobs, const std::vector<double>& acc,
                                 const std::vector<double>& loss, bool failed, int64_t step,
                                 double wall, std::vector<TuneOutcome>& outcomes) {
  const double time_s = time_offset_ + seconds_since(start_);
  for (size_t b = 0; b < jobs.size(); ++b) {
    const Job& j = jobs[b];
    TuneOutcome& out = outcomes[j.index];
    out.failed = failed;
    out.metric = o_.metric == "val_acc" ? acc[b] : loss[b];
    if (std::isnan(out.metric)) out.metric = NAN;
    write_row(j.job, step, acc[b], loss[b], out.metric, wall, time_s, failed ? "failed" : "ok");
    last_[j.job.trial] = {j.job, out};
    if (!failed) timeline_.push_back({time_s, {j.job, out}});
    if (!failed && !o_.quiet)
      fmt::print("  trial {:>3} budget {:>3}: {}val_loss {:.4f}\n", j.job.trial, j.job.to,
                 std::isnan(acc[b]) ? "" : fmt::format("val_acc {:.4f} ", acc[b]), loss[b]);
  }
  std::fflush(stdout);
}

TuneArrayResult TuneSearch::train_task(const TuneArrayTask& task) {
  TuneArrayResult r;
  std::vector<Job> jobs;
  for (size_t i = 0; i < task.jobs.size(); ++i)
    jobs.push_back({.job = task.jobs[i], .index = i, .start = task.start});
  const ArrayKey key = trial_array_key(o_, space_.sample(o_.seed, task.jobs.at(0).trial));
  r.outcomes.resize(jobs.size());
  // Rank 0 writes the rows and the timeline when the result reaches it.
  const size_t timeline = timeline_.size();
  const int64_t arrays = arrays_trained_;
  const auto start = Clock::now();
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

namespace {

// Trials' B = 1 checkpoints at one budget as one checkpoint of models 0..B-1 (each replica-major
// slice is one trial), their per-model values side by side.
Checkpoint stack_checkpoints(const std::vector<std::string>& paths) {
  Checkpoint c;
  for (size_t b = 0; b < paths.size(); ++b) {
    Checkpoint one = load_checkpoint(paths[b]);
    HFTA_CHECK(one.B == 1, "{} holds {} models, not one trial's: choose another --out", paths[b],
               one.B);
    // One dropout origin per model (a net without dropout may record none).
    const int64_t origin = one.forward_origins.empty() ? 0 : one.forward_origins[0];
    if (b == 0) {
      c = std::move(one);
      c.forward_origins = {origin};
      continue;
    }
    HFTA_CHECK(one.epoch == c.epoch && one.tensors.size() == c.tensors.size(),
               "{} is at budget {}, {} at {}: the trials of one array must have trained alike; "
               "choose another --out",
               paths[b], one.epoch, paths[0], c.epoch);
    for (size_t i = 0; i < c.tensors.size(); ++i)
      c.tensors[i].values.insert(c.tensors[i].values.end(), one.tensors[i].values.begin(),
                                 one.tensors[i].values.end());
    for (auto& [name, values] : c.hyper) values.push_back(one.hyper.at(name).at(0));
    c.epoch_loss_sum.push_back(one.epoch_loss_sum.at(0));
    c.last_train_loss.push_back(one.last_train_loss.at(0));
    c.optimizer_steps.push_back(one.optimizer_steps.at(0));
    c.skipped_steps.push_back(one.skipped_steps.at(0));
    c.forward_origins.push_back(origin);
  }
  c.B = static_cast<int64_t>(paths.size());
  c.model_ids.resize(paths.size());
  std::iota(c.model_ids.begin(), c.model_ids.end(), 0);
  for (CheckpointTensor& t : c.tensors) t.shape[0] = c.B;
  return c;
}

}  // namespace

TrainOptions TuneSearch::array_options(const std::vector<int64_t>& ids, int64_t to) const {
  TrainOptions t = trial_train_options(o_, space_.sample(o_.seed, ids[0]), ids[0], to, "");
  t.first_model_id = 0;
  t.model_streams = ids;
  t.hyper.clear();
  t.clip.clear();
  t.lr_gamma.clear();
  t.lr_step_size.clear();
  for (int64_t id : ids) {
    const TrainOptions one = trial_train_options(o_, space_.sample(o_.seed, id), id, to, "");
    for (const auto& [name, v] : one.hyper) t.hyper[name].push_back(v.at(0));
    if (!one.clip.empty()) t.clip.push_back(one.clip.at(0));
    t.lr_gamma.push_back(one.lr_gamma.at(0));
    t.lr_step_size.push_back(one.lr_step_size.at(0));
  }
  // lr fixes B when the optimizer's defaults fill the rest (array_size: the longest list).
  const int64_t B = static_cast<int64_t>(ids.size());
  t.hyper = resolve_hyper(t.optimizer, t.hyper, B);
  // Concurrent: the same arrays, but their models run side by side on threads of their own
  // (plan threads), unfused: on CPU cores what HFHT's concurrent processes are on one GPU. --plan
  // auto is resolved per array: arrays differ in B and batch size, and the plan cache remembers
  // each choice.
  t.plan = o_.mode == "concurrent" ? "threads" : o_.plan;
  t.threads = o_.threads;
  t.memory_budget_bytes = o_.memory_budget_bytes;
  return t;
}

ArrayProgress TuneSearch::build_array(const TrainOptions& options, int64_t start,
                                      const std::vector<int64_t>& ids,
                                      std::unique_ptr<RunArray>& array) {
  array = data_.make_array(options);
  if (start == 0) return array->fresh_progress();
  std::vector<std::string> paths;
  for (int64_t id : ids) paths.push_back(trial_dir(id) + "/checkpoint.bin");
  return array->restore(stack_checkpoints(paths));
}

void TuneSearch::save_trial_states(RunArray& array, const ArrayProgress& progress,
                                   const std::vector<int64_t>& ids, int64_t at,
                                   bool with_commands) {
  Checkpoint all;
  array.fill_checkpoint(all, progress);
  for (size_t b = 0; b < ids.size(); ++b) {
    const std::string dir = trial_dir(ids[b]);
    fs::create_directories(dir);
    Checkpoint one = extract_model(all, static_cast<int64_t>(b));
    one.model_ids = {0};  // as `hfta train --first-model-id <trial>` saves it
    save_checkpoint(dir + "/checkpoint.bin", one);
    if (!with_commands) continue;
    std::ofstream cmd(dir + "/command.txt", std::ios::trunc);
    cmd << trial_command(o_, space_.sample(o_.seed, ids[b]), ids[b], at, dir + "/reproduce")
        << "\n";
  }
}

void TuneSearch::train_array(const ArrayKey& key, int64_t start, int64_t to,
                             const std::vector<Job>& jobs, std::vector<TuneOutcome>& outcomes) {
  if (InterruptGuard::interrupted())
    fail("interrupted; the search is saved in {}: run the same command with --resume to continue",
         dir_);
  const auto array_start = Clock::now();
  const int64_t B = static_cast<int64_t>(jobs.size());
  std::vector<int64_t> ids;
  for (const Job& j : jobs) ids.push_back(j.job.trial);
  std::unique_ptr<RunArray> array;
  ArrayProgress progress;
  bool failed = false, test_interrupt = false, live = false;
  std::string failure;
  int64_t step = 0;
  // An interrupt: "stopped" rows (their time counts in the search's), then the error --resume
  // continues from. The trials' checkpoints hold the last whole unit.
  auto stop = [&](const char* why) {
    const double time_s = time_offset_ + seconds_since(start_);
    for (const Job& j : jobs)
      write_row(j.job, step, NAN, NAN, NAN, seconds_since(array_start), time_s, "stopped");
    fail("{}; the search is saved in {}: run the same command with --resume to continue", why,
         dir_);
  };
  try {
    live = take_live(key, start, ids, array, progress);
    if (!live) {
      // One array in memory at a time: --memory-budget sizes arrays, not pairs of them.
      live_.reset();
      progress = build_array(array_options(ids, to), start, ids, array);
    }
    if (!o_.quiet) {
      fmt::print("training trial{} {} ({}) from budget {} to {}: {} model{} in one array{}\n",
                 B == 1 ? "" : "s", fmt::join(ids, ","), key.str(), start, to, B, B == 1 ? "" : "s",
                 !live       ? ""
                 : start > 0 ? " (the live array, continued)"
                             : " (live slots refilled)");
      std::fflush(stdout);
    }
    step = progress.step;
    // Per model, whatever the task's progress tracks (a language model's optimizer counts its
    // skipped steps itself).
    progress.skipped.resize(ids.size(), 0);
    progress.epoch_loss.resize(ids.size(), 0.0);
    progress.last_train_loss.resize(ids.size(), 0.0);
    for (int64_t u = start; u < to && !test_interrupt; ++u) {
      // Budget unit u is epoch u of the task's data, as `hfta train --epochs` runs it.
      array->begin_epoch(u, 0);
      std::vector<double> unit_loss(ids.size(), 0.0);
      int64_t unit_steps = 0;
      array->train_epoch([&](const TrainedStepView& trained) {
        ++step;
        ++unit_steps;
        for (size_t b = 0; b < ids.size(); ++b) {
          unit_loss[b] += trained.losses[b];
          if (!trained.skipped.empty() && trained.skipped[b]) ++progress.skipped[b];
        }
        if (trained.current && InterruptGuard::interrupted()) stop("interrupted");
      });
      progress.step = step;
      progress.epochs_done = u + 1;
      progress.batch_in_epoch = 0;
      for (size_t b = 0; b < ids.size(); ++b)
        progress.last_train_loss[b] =
            unit_loss[b] / static_cast<double>(std::max<int64_t>(1, unit_steps));
      // Every whole unit short of `to` is saved, so an interrupt or a crash costs the unit in
      // progress, not the array's (a full-epoch rung of 9 units is an hour of LeNet arrays).
      if (u + 1 < to) {
        save_trial_states(*array, progress, ids, u + 1, false);
        test_interrupt = o_.interrupt_after_units > 0 && ++units_saved_ >= o_.interrupt_after_units;
      }
    }
  } catch (const Error& e) {
    if (InterruptGuard::interrupted()) throw;
    failed = true;
    failure = e.what();
  }
  if (test_interrupt) stop("interrupted (test) after a saved budget unit");
  ValidationScores scores;
  if (!failed) {
    try {
      scores = array->validate();
      // Save every trial's state (B = 1 checkpoints) before its row: a row always has its state.
      save_trial_states(*array, progress, ids, to, true);
    } catch (const Error& e) {
      failed = true;
      failure = e.what();
    }
  }
  if (failed && !o_.quiet) {
    fmt::print("  failed: {}\n", failure);
    std::fflush(stdout);
  }
  std::vector<double> acc(jobs.size(), NAN), loss(jobs.size(), NAN);
  for (size_t b = 0; !failed && b < jobs.size(); ++b) {
    acc[b] = scores.accuracy[b];
    loss[b] = scores.loss[b];
  }
  record_outcomes(jobs, acc, loss, failed, step, seconds_since(array_start), outcomes);
  ++arrays_trained_;
  if (!failed && o_.live_arrays)
    live_ = Live{.key = key, .at = to, .ids = ids, .array = std::move(array), .progress = progress};
  if (o_.interrupt_after_arrays > 0 && arrays_trained_ >= o_.interrupt_after_arrays)
    fail("interrupted (test) after {} arrays; run the same command with --resume to continue",
         arrays_trained_);
}

}  // namespace hfta
