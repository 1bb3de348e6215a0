// The subcommands of `hfta`, each registered by its own file: the command line is a thin layer
// that fills plain option structs (run/train.h, run/trial.h, sweep/sweep.h, tune/tune.h) and
// calls the workflows and the model's task (tasks/tasks.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "run/train.h"

namespace hfta {

// `hfta train` (cli/train_cli.cpp).
void add_train_command(CLI::App& app);
// `hfta extract --run DIR (--model N | --best) --out FILE`: one model of a run, on its own.
void add_extract_command(CLI::App& app);
// `hfta eval --checkpoint FILE`: every model of a checkpoint on its test data.
void add_eval_command(CLI::App& app);
// `hfta export` (cli/export_cli.cpp): one model as safetensors with PyTorch's state_dict names.
void add_export_command(CLI::App& app);

// `hfta sweep` and the hidden `hfta trial` (cli/sweep_cli.cpp).
void add_sweep_command(CLI::App& app);
// `hfta tune` (cli/tune_cli.cpp).
void add_tune_command(CLI::App& app);

// The flags of `hfta train` that only some models read (run/task.h's kModelSpecificFlags), into
// `opts`: the language models' corpus and sizes, --dropout, --synthetic-size, --npoints, DCGAN's,
// PointNet's. `hfta tune` takes them too, for every trial.
void add_model_flags(CLI::App* cmd, TrainOptions& opts);
// The flags of run/task.h's kModelSpecificFlags that `cmd`'s command line gave.
std::vector<std::string> given_model_flags(const CLI::App* cmd);

}  // namespace hfta
