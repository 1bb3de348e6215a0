// The flags of `hfta tune`, wired to run_tune (tune.h).
#include <fmt/format.h>

#include <memory>

#include "cli/cli.h"
#include "cli/commands.h"
#include "core/error.h"
#include "models/model.h"
#include "run/data.h"
#include "run/hyper.h"
#include "sweep/sweep.h"
#include "tasks/tasks.h"
#include "tune/tune.h"

namespace hfta {

void add_tune_command(CLI::App& app) {
  auto o = std::make_shared<TuneOptions>();
  auto budget = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "tune", "Search hyperparameters (random, Hyperband, ASHA), training trials as fused arrays");
  cmd->add_option("--model", o->model, "Architecture")
      ->check(CLI::IsMember(task_model_names()))
      ->capture_default_str();
  cmd->add_option("--dataset", o->dataset, "Dataset")
      ->check(CLI::IsMember(dataset_names()))
      ->capture_default_str();
  cmd->add_option("--data-dir", o->data_dir, "Data directory (as `hfta train`)");
  cmd->add_option("--space", o->space,
                  "Search space, a JSON file (tune/spaces/<model>.json ship one per model)")
      ->required();
  cmd->add_option("--algorithm", o->schedule.algorithm, "random, hyperband or asha")
      ->check(CLI::IsMember({"random", "hyperband", "asha"}))
      ->capture_default_str();
  cmd->add_option("--mode", o->mode,
                  "serial (each trial alone), fused (trials of one non-fusible group and budget "
                  "as one array) or concurrent (the same groups, each model on its own threads, "
                  "unfused: plan threads)")
      ->check(CLI::IsMember({"serial", "concurrent", "fused"}))
      ->capture_default_str();
  cmd->add_option("--metric", o->metric,
                  "val_acc (maximized) or val_loss (minimized); default: the model's own "
                  "(classifiers val_acc, language models val_loss)")
      ->check(CLI::IsMember({"val_acc", "val_loss"}));
  cmd->add_option("--num-samples", o->schedule.num_samples, "Trials (random search, ASHA)")
      ->check(integer_at_least(1))
      ->capture_default_str();
  cmd->add_option("--max-iters", o->schedule.max_iters,
                  "Largest budget of a trial (R), in budget units")
      ->check(integer_at_least(1))
      ->capture_default_str();
  cmd->add_option("--eta", o->schedule.eta, "Successive halving keeps 1/eta")
      ->check(integer_at_least(2))
      ->capture_default_str();
  cmd->add_option("--skip-last", o->schedule.skip_last,
                  "Hyperband: rounds left out at the end of each bracket (HFHT's)")
      ->check(integer_at_least(0))
      ->capture_default_str();
  cmd->add_option("--min-iters", o->schedule.min_iters, "ASHA: budget of the first rung")
      ->check(integer_at_least(1))
      ->capture_default_str();
  cmd->add_option("--workers", o->schedule.workers,
                  "ASHA: jobs handed out at once (they train as arrays)")
      ->check(integer_at_least(1))
      ->capture_default_str();
  cmd->add_option("--iters-per-epoch", o->iters_per_epoch,
                  "The budget unit: an epoch (0) or at most this many steps of one")
      ->check(integer_at_least(0))
      ->capture_default_str();
  cmd->add_option("--optimizer", o->optimizer, "Optimizer when the space has no \"optimizer\"")
      ->check(CLI::IsMember(optimizer_names()))
      ->capture_default_str();
  cmd->add_option("--batch-size", o->batch_size, "Batch size when the space has no \"batch_size\"")
      ->check(integer_at_least(1))
      ->capture_default_str();
  cmd->add_option("--memory-budget", *budget,
                  "Fused arrays hold at most as many models as fit in this many bytes of arenas "
                  "(e.g. 2GiB)");
  cmd->add_option("--max-fused", o->max_fused, "At most this many models per array (0: any)")
      ->check(integer_at_least(0))
      ->capture_default_str();
  cmd->add_option("--optuna", o->optuna_storage,
                  "Write the search into an Optuna study at this storage URL when it ends "
                  "(sqlite:///study.db; needs python3-optuna): parameters, the metric at each "
                  "budget, complete or pruned");
  cmd->add_option("--optuna-study", o->optuna_study,
                  "The Optuna study's name (default: <out folder>-<mode>); replaced if it exists");
  cmd->add_flag("--keep-checkpoints", o->keep_checkpoints,
                "Keep the checkpoint of every trial (by default those of trials stopped for good "
                "are deleted, except the best's; pruned.log lists them)");
  cmd->add_flag("!--rebuild-arrays", o->live_arrays,
                "Build every array anew from the trials' checkpoints instead of continuing or "
                "refilling the slots of the array trained last (the same results; for checking)");
  cmd->add_option("--plan", o->plan,
                  "How an array runs its steps: fused, chunk:C, threads, threads:C (the last three "
                  "with an optional /K: K steps per visit of a group; +fused and "
                  "threads:1+balanced/K as in train) or auto (timed per array)")
      ->check(plan_name())
      ->capture_default_str();
  cmd->add_option("--out", o->out, "Output directory (results in <out>/<mode>/)")
      ->capture_default_str();
  cmd->add_flag("--resume", o->resume, "Continue the search in --out where it stopped");
  cmd->add_option("--seed", o->seed, "Seed of the configurations, initialization and shuffling")
      ->check(integer_at_least(0))
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "CPU threads (0: all cores)")
      ->check(integer_at_least(0));
  cmd->add_flag("--deterministic", o->deterministic,
                "Every trial bit for bit the model trained alone (`hfta train --deterministic`)");
  cmd->add_option("--rank-timeout", o->rank_timeout_s,
                  "Under mpirun: a rank that returns no result for this many seconds is dead and "
                  "its trials fail (0: a day)")
      ->check(CLI::NonNegativeNumber);
  // As `hfta train`'s, for every trial (a space may search dropout, no_decay_norm_bias, clip,
  // lr_gamma and lr_step_size per trial instead).
  add_model_flags(cmd, o->model_flags);
  cmd->callback([cmd, o, budget] {
    if (!budget->empty()) o->memory_budget_bytes = parse_memory_size(*budget);
    const Task& task = task_for_model(o->model);
    check_model_flags(task, o->model, given_model_flags(cmd), all_tasks());
    // The task's own sizes, batch and optimizer where the flags are left out (BERT's: HFTA's
    // examples/bert), as in `hfta train`.
    auto given = [cmd](const char* flag) { return cmd->count(flag) > 0; };
    o->model_flags.optimizer = o->optimizer;
    o->model_flags.batch_size = o->batch_size;
    task.apply_defaults(o->model_flags, given);
    o->optimizer = o->model_flags.optimizer;
    o->batch_size = o->model_flags.batch_size;
    o->synthetic_train_size = o->model_flags.synthetic_train_size;
    o->synthetic_test_size = o->model_flags.synthetic_test_size;
    o->npoints = o->model_flags.npoints;
    if (o->model_flags.feature_transform) {  // the _ft variant from here on, as `hfta train`
      o->model = feature_transform_variant(o->model);
      o->model_flags.feature_transform = false;
    }
    run_tune(*o);
  });
}

}  // namespace hfta
