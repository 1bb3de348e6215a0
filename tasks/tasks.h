// The model kinds hfta trains, each a Task (run/task.h): the classifiers (models/model.h), the
// language models (models/language_model.h), the masked language models (models/masked_lm.h) and
// the GAN (models/gan.h). The workflows find a model's task here and call it; nothing above this
// layer branches on the kind.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "run/task.h"

namespace hfta {

// Every task, in the order `--help` lists their models.
std::span<const Task* const> all_tasks();
// The task that trains `model`. Throws hfta::Error naming the models there are.
const Task& task_for_model(const std::string& model);
// Every --model name, all tasks together.
std::vector<std::string> task_model_names();

// `hfta train`, `hfta trial` and `hfta eval` of any model: its task's.
TrainResult run_train(const TrainOptions& options);
TrialResult run_trial(const TrialOptions& options);
// --device `name` with --plan `plan`, checked before any data is read: a device runs plan fused
// (auto resolves to it there) and must be available. Throws hfta::Error saying which is not so.
// (A task checks first that its model's ops have kernels on the device.)
Device checked_device(const std::string& name, const std::string& plan);

// `path` is the file `c` was read from (for messages).
EvalReport run_eval(const Checkpoint& c, const std::string& path, const EvalOptions& options);

// The four tasks (tasks/<kind>/task.cpp).
const Task& classifier_task();
const Task& language_model_task();
const Task& masked_lm_task();
const Task& gan_task();

}  // namespace hfta
