// run_tune (tune.h): the search's flags, --resume's check, the scheduler driving a TuneSearch
// (tune_search.h), and the outputs at the end: trajectory, plot, the best model.
#include "tune/tune.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>

#include "backend/cpu/runtime.h"
#include "core/clock.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/interrupt.h"
#include "io/safetensors.h"
#include "io/shell_quote.h"
#include "run/export.h"
#include "run/plan_choice.h"
#include "tasks/tasks.h"
#include "tune/optuna_study.h"
#include "tune/tune_search.h"

namespace hfta {

namespace fs = std::filesystem;

namespace {

// What the search state depends on: --resume must find the same.
nlohmann::json run_identity(const TuneOptions& o, const TuneSpace& space) {
  const TuneSchedule& s = o.schedule;
  nlohmann::json id = {{"space_file", o.space},
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
  if (o.npoints > 0) id["npoints"] = o.npoints;
  // The model-specific flags the model reads.
  const Task& task = task_for_model(o.model);
  const TrainOptions& t = o.model_flags;
  const std::vector<std::pair<std::string_view, nlohmann::json>> flags = {
      {"--text-files", t.text_files},
      {"--emsize", t.emsize},
      {"--nhid", t.nhid},
      {"--nlayers", t.nlayers},
      {"--nhead", t.nhead},
      {"--bptt", t.bptt},
      {"--vocab", t.vocab},
      {"--clip", t.clip},
      {"--lr-gamma", t.lr_gamma},
      {"--lr-step-size", t.lr_step_size},
      {"--dropout", t.dropout ? nlohmann::json(*t.dropout) : nlohmann::json("default")},
      {"--no-decay-norm-bias", t.no_decay_norm_bias}};
  for (const auto& [flag, value] : flags)
    if (task.reads_flag(o.model, flag)) id[std::string(flag.substr(2))] = value;
  return id;
}

void check_resume_identity(const nlohmann::json& was, const nlohmann::json& is,
                           const std::string& path) {
  // A hand-edited or corrupt file may hold any JSON: value() and get() would throw nlohmann's
  // exceptions on another type.
  HFTA_CHECK(was.is_object(),
             "cannot --resume {}: it holds a JSON {}, not a search's state (an object of its "
             "flags); choose another --out",
             path, was.type_name());
  const auto text = [&](const char* key) -> std::optional<std::string> {
    const auto it = was.find(key);
    if (it == was.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
  };
  if (text("space") != is["space"].get<std::string>())
    fail(
        "cannot --resume {}: it searched the space {}, this command gives {} with other contents; "
        "resume with the same space file or choose another --out",
        path, text("space_file").value_or("?"), is["space_file"].get<std::string>());
  for (const auto& [key, value] : is.items()) {
    if (key == "space" || key == "space_file") continue;
    // A flag a search of an older version did not record ran at its default.
    if (!was.contains(key) && (value == "default" || value == false)) continue;
    if (!was.contains(key) || was[key] != value)
      fail(
          "cannot --resume {}: it was run with --{} {}, this command gives {}; resume with the "
          "same "
          "flags or choose another --out",
          path, key == "synthetic_size" ? "synthetic-size" : key,
          was.contains(key) ? was[key].dump() : "nothing", value.dump());
  }
}

// --resume's reading of the state file `path` against this run's `identity`.
void check_resume_state(const std::string& path, const nlohmann::json& identity) {
  std::ifstream in(path);
  nlohmann::json was;
  try {
    was = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("{} is malformed ({}): choose another --out", path, e.what());
  }
  check_resume_identity(was, identity, path);
}

// The search's data (the model's task loads it; tune_search.h trains arrays on it).
std::unique_ptr<SearchData> load_search_data(const TuneOptions& o, const TuneSpace& space) {
  // Batch sizes the data cannot fill fail now, not in the middle of the search.
  int64_t largest_batch = o.batch_size;
  for (const TuneParam& p : space.params())
    if (p.name == "batch_size") {
      largest_batch = static_cast<int64_t>(p.high);
      for (const TuneValue& v : p.values)
        largest_batch = std::max(largest_batch, static_cast<int64_t>(v.number));
    }
  const TrainOptions t = trial_train_options(o, space.sample(o.seed, 0), 0, 1, "");
  return task_for_model(o.model).load_search_data(t, largest_batch);
}

// What the model and space allow: the metrics its validation reports, and the model-specific
// parameters it reads.
void check_model_and_space(const TuneOptions& o, const TuneSpace& space) {
  const Task& task = task_for_model(o.model);
  const std::vector<std::string> metrics = task.tune_metrics(o.model);
  HFTA_CHECK(std::find(metrics.begin(), metrics.end(), o.metric) != metrics.end(),
             "--metric {}: --model {} ({}) {}; use --metric {}", o.metric, o.model, task.kind(),
             o.metric == "val_acc" ? "has no accuracy"
                                   : fmt::format("reports {}", fmt::join(metrics, " and ")),
             metrics.front());
  HFTA_CHECK(o.model_flags.device == "cpu" || o.plan == "fused" || o.plan == "auto",
             "--device {} runs each array under plan fused (one call per op for all models), got "
             "--plan {}: use --plan fused or leave --plan out",
             o.model_flags.device, o.plan);
  for (const TuneParam& p : space.params()) {
    std::string flag = "--" + p.name;
    std::replace(flag.begin(), flag.end(), '_', '-');
    const bool model_specific =
        std::find(std::begin(kModelSpecificFlags), std::end(kModelSpecificFlags), flag) !=
        std::end(kModelSpecificFlags);
    HFTA_CHECK(!model_specific || task.reads_flag(o.model, flag),
               "search space {}, parameter \"{}\": --model {} does not read {}; remove it to "
               "tune {}",
               space.file(), p.name, o.model, flag, o.model);
  }
  for (const auto& [flag, param, n] :
       {std::tuple{"--clip", "clip", o.model_flags.clip.size()},
        std::tuple{"--lr-gamma", "lr_gamma", o.model_flags.lr_gamma.size()},
        std::tuple{"--lr-step-size", "lr_step_size", o.model_flags.lr_step_size.size()}})
    HFTA_CHECK(n <= 1 || !task.reads_flag(o.model, flag),
               "{} takes one value in hfta tune (every trial's), got {}; search per-model "
               "values with the space's \"{}\"",
               flag, n, param);
}

// A rank > 0 under mpirun: trains the arrays rank 0 sends until it says stop; writes no outputs
// but the trials' checkpoints (in the shared --out).
TuneRunResult serve_rank(const TuneOptions& o, const TuneSpace& space, TuneMpi& mpi) {
  const std::unique_ptr<SearchData> data = load_search_data(o, space);
  TuneSearch search(o, space, *data, fmt::format("{}/{}", o.out, o.mode));
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
      t.row({fmt::format("{:.3f}", time), csv_metric(r.outcome.metric), std::to_string(r.job.trial),
             std::to_string(r.job.to)});
    }
  // The best held until the search ended: the line runs to the end.
  if (best != nullptr && timeline.back().first > best_time)
    t.row({fmt::format("{:.3f}", timeline.back().first), csv_metric(best->outcome.metric),
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

ArrayKey trial_array_key(const TuneOptions& o, const TuneConfig& config) {
  return array_key(config, {.optimizer = o.optimizer,
                            .batch_size = o.batch_size,
                            .dropout = o.model_flags.dropout.value_or(-1.0f),
                            .no_decay_norm_bias = o.model_flags.no_decay_norm_bias});
}

TrainOptions trial_train_options(const TuneOptions& o, const TuneConfig& config, int64_t trial,
                                 int64_t budget, const std::string& out) {
  const ArrayKey key = trial_array_key(o, config);
  // The model-specific flags (a model reads those of its task, run/task.h), then the search's.
  TrainOptions t = o.model_flags;
  t.model = o.model;
  t.dataset = o.dataset;
  t.data_dir = o.data_dir;
  t.optimizer = key.optimizer;
  t.dropout.reset();  // the key's: the space's, else --dropout
  if (key.dropout >= 0) t.dropout = key.dropout;
  t.no_decay_norm_bias = key.no_decay_norm_bias;
  t.hyper = config_hyper(config, key.optimizer);
  t.epochs = budget;
  t.batch_size = key.batch_size;
  t.iters_per_epoch = o.iters_per_epoch;
  t.seed = o.seed;
  t.deterministic = o.deterministic;
  t.first_model_id = trial;
  t.plan = "fused";
  t.out = out;
  t.synthetic_train_size = o.synthetic_train_size;
  t.synthetic_test_size = o.synthetic_test_size;
  t.npoints = o.npoints;
  t.progress = false;
  // Per trial where the space searches them.
  if (auto it = config.find("clip"); it != config.end())
    t.clip = {static_cast<float>(it->second.number)};
  if (auto it = config.find("lr_gamma"); it != config.end())
    t.lr_gamma = {static_cast<float>(it->second.number)};
  if (auto it = config.find("lr_step_size"); it != config.end())
    t.lr_step_size = {static_cast<int64_t>(it->second.number)};
  return t;
}

std::string trial_command(const TuneOptions& o, const TuneConfig& config, int64_t trial,
                          int64_t budget, const std::string& out) {
  const TrainOptions t = trial_train_options(o, config, trial, budget, out);
  const Task& task = task_for_model(t.model);
  auto reads = [&](std::string_view flag) { return task.reads_flag(t.model, flag); };
  std::string s = fmt::format("hfta train --model {} --dataset {}", t.model, t.dataset);
  if (!t.data_dir.empty()) s += " --data-dir " + quote_arg(t.data_dir);
  if (t.dataset == "synthetic" || t.dataset == "shapes" || t.dataset == "synthetic-text")
    s += fmt::format(" --synthetic-size {}", t.synthetic_train_size);
  if ((t.dataset == "synthetic" || t.dataset == "shapes") && reads("--synthetic-test-size"))
    s += fmt::format(" --synthetic-test-size {}", t.synthetic_test_size);
  s += fmt::format(" --optimizer {}", t.optimizer);
  for (const auto& [name, v] : t.hyper) {
    std::string flag = "--" + name;
    std::replace(flag.begin(), flag.end(), '_', '-');
    s += fmt::format(" {} {}", flag, v[0]);
  }
  if (t.npoints > 0) s += fmt::format(" --npoints {}", t.npoints);
  if (t.dropout && reads("--dropout")) s += fmt::format(" --dropout {}", *t.dropout);
  if (t.no_decay_norm_bias) s += " --no-decay-norm-bias";
  if (!t.text_files.empty() && reads("--text-files"))
    s += " --text-files " + quote_arg(t.text_files);
  if ((t.dataset == "synthetic-text" || t.dataset == "synthetic") && reads("--vocab"))
    s += fmt::format(" --vocab {}", t.vocab);
  if (reads("--emsize"))
    s += fmt::format(" --emsize {} --nhid {} --nlayers {} --nhead {} --bptt {}", t.emsize, t.nhid,
                     t.nlayers, t.nhead, t.bptt);
  // BERT runs without clipping unless --clip is given.
  if (!t.clip.empty() && reads("--clip")) s += fmt::format(" --clip {}", fmt::join(t.clip, ","));
  if (reads("--lr-gamma"))
    s += fmt::format(" --lr-gamma {} --lr-step-size {}", fmt::join(t.lr_gamma, ","),
                     fmt::join(t.lr_step_size, ","));
  s += fmt::format(" --batch-size {} --epochs {}", t.batch_size, t.epochs);
  if (t.iters_per_epoch > 0) s += fmt::format(" --iters-per-epoch {}", t.iters_per_epoch);
  if (t.first_epoch > 0) s += fmt::format(" --first-epoch {}", t.first_epoch);
  s += fmt::format(" --seed {} --first-model-id {} --plan fused", t.seed, trial);
  if (t.deterministic) s += " --deterministic";
  s += " --out " + quote_arg(out);
  return s;
}

std::string tune_state_json(const TuneOptions& options, const TuneSpace& space) {
  return run_identity(options, space).dump(2) + "\n";
}

void check_tune_state(const std::string& path, const std::string& state_json) {
  check_resume_state(path, nlohmann::json::parse(state_json));
}

TuneRunResult run_tune(const TuneOptions& options) {
  const auto start = Clock::now();
  TuneOptions o = options;
  // The model's task knows its metric (or that it has none).
  std::string no_metric;
  const std::optional<std::string> task_metric =
      task_for_model(o.model).tune_metric(o.model, &no_metric);
  HFTA_CHECK(task_metric.has_value(), "{}", no_metric);
  if (o.metric.empty()) o.metric = *task_metric;
  HFTA_CHECK(!o.space.empty(), "--space is required: a JSON file such as tune/spaces/{}.json",
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
  check_model_and_space(o, space);
  prepare_runtime(o.threads, o.deterministic);
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
    check_resume_state(state, identity);
  } else {
    HFTA_CHECK(!fs::exists(history),
               "{} already holds a search ({}): continue it with --resume, or choose another --out",
               dir, history);
  }
  if (!o.optuna_storage.empty()) check_optuna_available();
  const std::unique_ptr<SearchData> data = load_search_data(o, space);
  std::error_code ec;
  fs::create_directories(dir, ec);
  HFTA_CHECK(!ec, "cannot create {}: {}", dir, ec.message());
  {
    std::ofstream out(state, std::ios::trunc);
    out << tune_state_json(o, space);
  }

  TuneSearch search(o, space, *data, dir);
  if (mpi) search.set_mpi(mpi.get());
  if (o.resume) search.load_history(history);
  search.open_history(history, o.resume);
  if (!o.quiet) {
    fmt::print("{}\n", cpu::describe_runtime());
    fmt::print("tuning {} on {}: {} over {} ({} parameters), mode {}, metric {}\n", o.model,
               data->describe(), schedule.algorithm, o.space, space.params().size(), o.mode,
               o.metric);
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
  if (!o.optuna_storage.empty())
    write_optuna_study(dir, o.optuna_storage,
                       o.optuna_study.empty()
                           ? fmt::format("{}-{}", fs::path(o.out).filename().string(), o.mode)
                           : o.optuna_study,
                       o.quiet);
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
  task_for_model(c.model).export_model(c, {.out = dir + "/best.safetensors", .source = best_ckpt});
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
