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
#include <tuple>

#include "backend/cpu/runtime.h"
#include "core/clock.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/interrupt.h"
#include "io/safetensors.h"
#include "models/language_model.h"
#include "models/masked_lm.h"
#include "run/export.h"
#include "run/plan_choice.h"
#include "tasks/tasks.h"
#include "tune/tune_search.h"

namespace hfta {

namespace fs = std::filesystem;

namespace {

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
  if (tunes_language_model(o.model)) {
    id["text-files"] = o.lm.text_files;
    id["emsize"] = o.lm.emsize;
    id["nhid"] = o.lm.nhid;
    id["nlayers"] = o.lm.nlayers;
    id["nhead"] = o.lm.nhead;
    id["bptt"] = o.lm.bptt;
    id["vocab"] = o.lm.vocab;
    id["clip"] = o.lm.clip;
    id["lr-gamma"] = o.lm.lr_gamma;
    id["lr-step-size"] = o.lm.lr_step_size;
    id["dropout"] = o.lm.dropout ? nlohmann::json(*o.lm.dropout) : nlohmann::json("default");
  }
  return id;
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

// A classifier's data and model configuration; language models read their corpus in `hfta
// train`'s loop (tune_lm.cpp) and leave both empty.
void load_classifier_data(const TuneOptions& o, Data& data, ModelConfig& config) {
  if (tunes_language_model(o.model)) return;
  const ModelInfo& info = model_info(o.model);
  Shape sample_shape = info.default_sample_shape;
  if (o.npoints > 0 && sample_shape.rank() == 2) sample_shape[0] = o.npoints;  // [L, 3] clouds
  data = load_data(o.dataset, o.data_dir, sample_shape, info.default_num_classes,
                   o.synthetic_train_size, o.synthetic_test_size, o.seed,
                   info.task == ModelTask::kSegment);
  config = model_config(o.model, data);
  // Concurrent: the same arrays, but their models run side by side on threads of their own
  // (plan threads), unfused: on CPU cores what HFHT's concurrent processes are on one GPU.
  config.plan = ExecutionPlan::parse(o.mode == "concurrent" ? "threads" : o.plan);
  // --plan auto is resolved per array (train_array), as make_array does: arrays differ in B and
  // batch size, and the plan cache remembers each choice.
}

// What the model and space allow: a GAN has no validation metric; a Transformer LM no accuracy;
// clip and StepLR are language models' alone.
void check_model_and_space(const TuneOptions& o, const TuneSpace& space) {
  const bool lm = tunes_language_model(o.model);
  HFTA_CHECK(!(is_language_model(o.model) && o.metric == "val_acc"),
             "--metric val_acc: the {} language model has no accuracy; use --metric val_loss "
             "(validation loss per token, minimized; perplexity is its exp)",
             o.model);
  for (const TuneParam& p : space.params())
    HFTA_CHECK(lm || !is_lm_param(p.name),
               "search space {}, parameter \"{}\": only language models (transformer, bert) "
               "read it; remove it to tune {}",
               space.file(), p.name, o.model);
  if (lm) {
    for (const auto& [flag, param, n] :
         {std::tuple{"--clip", "clip", o.lm.clip.size()},
          std::tuple{"--lr-gamma", "lr_gamma", o.lm.lr_gamma.size()},
          std::tuple{"--lr-step-size", "lr_step_size", o.lm.lr_step_size.size()}})
      HFTA_CHECK(n <= 1,
                 "{} takes one value in hfta tune (every trial's), got {}; search per-model "
                 "values with the space's \"{}\"",
                 flag, n, param);
    HFTA_CHECK(!(is_masked_lm(o.model) && o.mode == "concurrent"),
               "--mode concurrent runs each model on threads of its own (plan threads), which "
               "BERT does not have: use --mode fused or serial");
  }
}

// A rank > 0 under mpirun: trains the arrays rank 0 sends until it says stop; writes no outputs
// but the trials' checkpoints (in the shared --out).
TuneRunResult serve_rank(const TuneOptions& o, const TuneSpace& space, TuneMpi& mpi) {
  Data data;
  ModelConfig config;
  load_classifier_data(o, data, config);
  TuneSearch search(o, space, data, config, fmt::format("{}/{}", o.out, o.mode));
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
  t.npoints = o.npoints;
  t.progress = false;
  if (tunes_language_model(o.model)) {
    // The corpus, sizes and per-model clip and StepLR: the space's values, else the flags'.
    t.text_files = o.lm.text_files;
    t.emsize = o.lm.emsize;
    t.nhid = o.lm.nhid;
    t.nlayers = o.lm.nlayers;
    t.nhead = o.lm.nhead;
    t.bptt = o.lm.bptt;
    t.vocab = o.lm.vocab;
    t.clip = o.lm.clip;
    t.lr_gamma = o.lm.lr_gamma;
    t.lr_step_size = o.lm.lr_step_size;
    if (!t.dropout) t.dropout = o.lm.dropout;
    if (auto it = config.find("clip"); it != config.end())
      t.clip = {static_cast<float>(it->second.number)};
    if (auto it = config.find("lr_gamma"); it != config.end())
      t.lr_gamma = {static_cast<float>(it->second.number)};
    if (auto it = config.find("lr_step_size"); it != config.end())
      t.lr_step_size = {static_cast<int64_t>(it->second.number)};
  }
  return t;
}

std::string trial_command(const TuneOptions& o, const TuneConfig& config, int64_t trial,
                          int64_t budget, const std::string& out) {
  const TrainOptions t = trial_train_options(o, config, trial, budget, out);
  std::string s = fmt::format("hfta train --model {} --dataset {}", t.model, t.dataset);
  if (!t.data_dir.empty()) s += " --data-dir " + quote_arg(t.data_dir);
  if (t.dataset == "synthetic" || t.dataset == "shapes" || t.dataset == "synthetic-text")
    s += fmt::format(" --synthetic-size {}", t.synthetic_train_size);
  s += fmt::format(" --optimizer {}", t.optimizer);
  for (const auto& [name, v] : t.hyper) {
    std::string flag = "--" + name;
    std::replace(flag.begin(), flag.end(), '_', '-');
    s += fmt::format(" {} {}", flag, v[0]);
  }
  if (t.npoints > 0) s += fmt::format(" --npoints {}", t.npoints);
  if (t.dropout) s += fmt::format(" --dropout {}", *t.dropout);
  if (t.no_decay_norm_bias) s += " --no-decay-norm-bias";
  if (tunes_language_model(t.model)) {
    if (!t.text_files.empty()) s += " --text-files " + quote_arg(t.text_files);
    if (t.dataset == "synthetic-text" || t.dataset == "synthetic")
      s += fmt::format(" --vocab {}", t.vocab);
    s += fmt::format(" --emsize {} --nhid {} --nlayers {} --nhead {} --bptt {}", t.emsize, t.nhid,
                     t.nlayers, t.nhead, t.bptt);
    // BERT runs without clipping unless --clip is given.
    if (!t.clip.empty()) s += fmt::format(" --clip {}", fmt::join(t.clip, ","));
    s += fmt::format(" --lr-gamma {} --lr-step-size {}", fmt::join(t.lr_gamma, ","),
                     fmt::join(t.lr_step_size, ","));
  }
  s += fmt::format(" --batch-size {} --epochs {}", t.batch_size, t.epochs);
  if (t.iters_per_epoch > 0) s += fmt::format(" --iters-per-epoch {}", t.iters_per_epoch);
  if (t.first_epoch > 0) s += fmt::format(" --first-epoch {}", t.first_epoch);
  s += fmt::format(" --seed {} --first-model-id {} --plan fused --out {}", t.seed, trial,
                   quote_arg(out));
  return s;
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
  prepare_runtime(o.threads);
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
  Data data;
  ModelConfig config;
  load_classifier_data(o, data, config);
  // Batch sizes the data cannot fill fail now, not in the middle of the search.
  int64_t largest_batch = o.batch_size;
  for (const TuneParam& p : space.params())
    if (p.name == "batch_size") {
      largest_batch = static_cast<int64_t>(p.high);
      for (const TuneValue& v : p.values)
        largest_batch = std::max(largest_batch, static_cast<int64_t>(v.number));
    }
  HFTA_CHECK(tunes_language_model(o.model) || largest_batch <= data.train.size,
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

  TuneSearch search(o, space, data, config, dir);
  if (mpi) search.set_mpi(mpi.get());
  if (o.resume) search.load_history(history);
  search.open_history(history, o.resume);
  if (!o.quiet) {
    fmt::print("{}\n", cpu::describe_runtime());
    fmt::print(
        "tuning {} on {}{}: {} over {} ({} parameters), mode {}, metric {}\n", o.model, o.dataset,
        tunes_language_model(o.model) ? "" : fmt::format(" ({} train samples)", data.train.size),
        schedule.algorithm, o.space, space.params().size(), o.mode, o.metric);
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
  if (tunes_language_model(o.model)) {
    write_lm_safetensors(c, dir + "/best.safetensors", best_ckpt);
  } else {
    auto model = make_model(c.model, model_spec(c, 1));
    restore_tensors(c, *model, nullptr);
    write_safetensors(dir + "/best.safetensors", state_dict(*model, 0),
                      {{"format", "pt"},
                       {"hfta_model", model->name()},
                       {"sample_shape", model->sample_shape().str()},
                       {"num_classes", std::to_string(model->num_classes())},
                       {"source", best_ckpt}});
  }
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
