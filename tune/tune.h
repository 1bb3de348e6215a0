// `hfta tune`: hyperparameter search (random, Hyperband, ASHA: tune_scheduler.h) over a search
// space (tune_space.h), training the trials as fused arrays, one model at a time (serial), or side
// by side on threads of their own (concurrent).
//
// Outputs, in <out>/<mode>/ (several modes can share one --out):
//   history.csv      one row per trial and rung: config, bracket, rung, budgets, val_acc,
//                    val_loss, metric, steps, wall seconds of its array, search time, status
//                    (ok; failed: training threw; stopped: interrupted, retrained on --resume)
//   trajectory.csv   the best metric so far against search time
//   trials/<id>/     the trial's checkpoint after its last rung (a promoted trial continues from
//                    it; deleted once the search stops the trial for good, unless it is the best
//                    or --keep-checkpoints) and command.txt, the `hfta train` command that
//                    retrains it alone
//   pruned.log       the checkpoints deleted, one line per batch of stopped trials
//   best.bin, best.safetensors   the best trial's checkpoint and its PyTorch state_dict
//   tune.json        the space and flags, checked by --resume
// and <out>/trajectory.png: one line per mode.
//
// Data: budget unit u of every trial is epoch u of the loader (the shuffle of (seed, u), at most
// --iters-per-epoch steps), and trial t draws its initial weights from stream (seed, t). A trial
// trained to budget r is therefore `hfta train --epochs r --first-model-id t` with its config,
// whatever arrays it trained in, and the models of one array all see the same minibatches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "run/train.h"
#include "tune/tune_scheduler.h"
#include "tune/tune_space.h"

namespace hfta {

struct TuneOptions {
  std::string model = "lenet";
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  std::string space;               // the JSON file
  std::string optimizer = "adam";  // when the space has no "optimizer"
  int64_t batch_size = 64;         // when the space has no "batch_size"
  TuneSchedule schedule;
  std::string metric;               // val_acc (max) or val_loss (min); empty: the model's own
  std::string mode = "fused";       // serial or fused
  int64_t memory_budget_bytes = 0;  // fused arrays at most this many arena bytes; 0 = no limit
  int64_t max_fused = 0;            // at most this many models per array; 0 = no limit
  int64_t iters_per_epoch = 0;      // the budget unit: an epoch, or this many steps
  std::string plan = "fused";       // how an array runs its steps (models/plan.h)
  std::string out = "runs/tune";
  bool resume = false;
  uint64_t seed = 1;
  int threads = 0;
  bool deterministic = false;  // --deterministic: each trial bit for bit as trained alone
  double rank_timeout_s = 0;   // mpirun: a rank silent this long is dead (0: a day; tune_mpi.h)
  // The model-specific flags of `hfta train` (run/task.h's kModelSpecificFlags, those the model
  // reads: a language model's corpus and sizes, --dropout, --no-decay-norm-bias, ...) that every
  // trial takes where the space does not search them (dropout, no_decay_norm_bias, clip,
  // lr_gamma, lr_step_size), with the task's own defaults; synthetic sizes and --npoints are the
  // fields below.
  TrainOptions model_flags;
  int64_t npoints = 0;  // points per cloud of point-cloud data (--npoints); 0 = the model's
  int64_t synthetic_train_size = 4096;
  int64_t synthetic_test_size = 1024;  // `hfta train`'s (no flag): tests make it smaller
  // Keep every trial's checkpoint; by default those of trials the search will not train again
  // are deleted (not the best's), and pruned.log in the run's directory lists them.
  bool keep_checkpoints = false;
  // Keep the array trained last alive and continue or refill its slots (tune.cpp, take_live);
  // false builds every array anew from the trials' checkpoints (the same numbers, slower).
  bool live_arrays = true;
  bool quiet = false;  // no per-array lines (tests)
  // An Optuna storage URL (sqlite:///study.db): at the end the search is written there as a
  // study (tune/optuna_study.h); empty: none. The study's name: optuna_study, or <out>-<mode>.
  std::string optuna_storage;
  std::string optuna_study;
  // For tests: fail as an interrupt does after this many arrays have trained (0 = never).
  int64_t interrupt_after_arrays = 0;
  // For tests: stop as an interrupt does once this many budget units short of their arrays' ends
  // have been saved (0 = never).
  int64_t interrupt_after_units = 0;
};

// How often an array came from the live one instead of being built (models/slots.h).
struct TuneLiveCounts {
  int64_t arrays_continued = 0;  // promoted trials trained on in the live array, no checkpoint read
  int64_t compactions = 0;       // of those and of refills: the live array shrunk to fit
  int64_t slots_refilled = 0;    // fresh trials started in slots of the live array
};

struct TuneRunResult {
  std::string dir;  // <out>/<mode>
  std::vector<TuneRecord> records;
  int64_t best_trial = -1;
  double best_metric = 0.0;
  int64_t best_budget = 0;
  double wall_seconds = 0.0;
  int64_t arrays_trained = 0;  // this process's arrays (not those replayed from history.csv)
  TuneLiveCounts live;
};

// Runs the search. Throws hfta::Error on bad flags or space, a --resume that does not match, or
// an interrupt (after saving: run the same command with --resume).
TuneRunResult run_tune(const TuneOptions& options);

// The search's state as run_tune writes it to <out>/<mode>/tune.json: the space, the model, the
// schedule and the flags the trials depend on, which --resume must find again.
std::string tune_state_json(const TuneOptions& options, const TuneSpace& space);
// --resume's reading of the state file `path` (a tune.json) against this run's `state_json`
// (tune_state_json): throws hfta::Error naming the file when it is not a JSON object, or records
// another space or another value of a flag (naming the flag).
void check_tune_state(const std::string& path, const std::string& state_json);

// The arrays `config`'s trial trains in: the space's optimizer, batch size, dropout and
// no_decay_norm_bias, else the flags'.
ArrayKey trial_array_key(const TuneOptions& options, const TuneConfig& config);
// The `hfta train` options that retrain `trial` of the search alone to `budget`, into `out`.
TrainOptions trial_train_options(const TuneOptions& options, const TuneConfig& config,
                                 int64_t trial, int64_t budget, const std::string& out);
// The same as a command line.
std::string trial_command(const TuneOptions& options, const TuneConfig& config, int64_t trial,
                          int64_t budget, const std::string& out);

}  // namespace hfta
