// The training loop: one loop of optimizer steps that `hfta train` (epochs, checkpoints,
// metrics) and `hfta trial` (timed steps for the sweep) both run.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "datasets/loader.h"
#include "models/model.h"
#include "optim/optimizer.h"
#include "run/data.h"
#include "run/hyper.h"
#include "run/task.h"
#include "run/train.h"
#include "run/train_run.h"

namespace hfta {

class CsvWriter;
struct Checkpoint;

// What the models of a run are: the architecture and what the data and flags fix about it.
struct ModelConfig {
  std::string name;                 // a name from model_names()
  Shape sample_shape;               // one sample of the data
  int64_t num_classes = 10;         // classes of the data
  std::optional<float> dropout;     // --dropout: overrides the architecture's probabilities
  bool no_decay_norm_bias = false;  // --no-decay-norm-bias
  // --plan: the order the models run a step in; auto is resolved by make_array (plan_choice.h),
  // within plan_memory_budget bytes of arenas (0 = no limit).
  ExecutionPlan plan = {};
  int64_t plan_memory_budget = 0;
  // --device: where the models live and run (ModelSpec::device); a device runs plan fused only.
  Device device = Device::kCpu;
  // Added to every model id of spec(): the RNG stream of model `id` is (seed, first_model_id + id),
  // or (seed, model_streams[id]) where model_streams is given (`hfta tune`'s trial ids).
  int64_t first_model_id = 0;
  std::vector<int64_t> model_streams;
  // The spec of an array of models `ids`.
  ModelSpec spec(const std::vector<int64_t>& ids, int64_t batch_size, uint64_t seed) const;
};
// --device `name` for --model `model` with --plan `plan`, checked before any data is read: a
// device runs plan fused (auto resolves to it there), only models whose every op has a kernel
// there (ModelInfo::runs_on_cuda), and must be available. Throws hfta::Error saying which is not
// so.
Device checked_device(const std::string& name, const std::string& model, const std::string& plan);

// The architecture `name` on `data` (its sample shape and classes). Throws hfta::Error naming an
// unknown model.
ModelConfig model_config(const std::string& name, const Data& data,
                         std::optional<float> dropout = {}, bool no_decay_norm_bias = false);

struct ModelArray {
  std::vector<int64_t> ids;
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> optimizer;
  std::vector<StepReport> reports;  // array_steps()'s, kept to step without allocating
};
// `all_values`: the resolved hyperparameters of every model of the run (resolve_hyper). A plan
// of auto is chosen here (timed, or read from the plan cache), and said on stderr.
ModelArray make_array(const ModelConfig& config, const std::vector<int64_t>& ids,
                      int64_t batch_size, uint64_t seed, std::string_view optimizer,
                      const HyperValues& all_values);

// Optimizer steps of every model on steps.size() minibatches in order (Model::train_steps):
// forward, backward and update in the plan's order (under plans with groups, each group updates
// right after each of its backwards). Returns each step's report, valid until the next call.
std::span<const StepReport> array_steps(ModelArray& array, std::span<const Model::StepBatch> steps);
// One such step.
const StepReport& array_step(ModelArray& array, const TensorView& images, const IndexView& labels);

// What train_steps says of each step it took.
struct TrainedStep {
  const StepReport& report;       // the models whose update was skipped (NaN/Inf gradients)
  std::span<const float> losses;  // each model's training loss on the step's batch
  // The arrays hold this step's result. Under a plan with K steps per visit the loop runs K
  // steps before it reports them, so only the last of them may be checkpointed or stopped at.
  bool arrays_current;
};

// Runs optimizer steps on the loader's batches: `max_steps` steps (going on into the next epoch
// when one ends), or with kUntilEpochEnds the rest of the loader's epoch, handing the model as
// many batches at a time as its plan visits a group for (array_steps). `after_step` (if given)
// sees each step, in order. Returns the steps taken.
inline constexpr int64_t kUntilEpochEnds = -1;
int64_t train_steps(ModelArray& array, Loader& loader, Batch& batch, int64_t max_steps,
                    const std::function<void(const TrainedStep&)>& after_step = {});

// The array of models `ids` of a `hfta train` run (run/train_run.h): the loader's epochs, a
// metrics row per model and step, the test evaluation after every epoch, checkpoints of the
// array, its optimizer and progress.
// Says once per run (for the array of model 0) what one model holds.
std::unique_ptr<RunArray> make_classifier_run(const TrainOptions& options,
                                              const ModelConfig& config,
                                              const HyperValues& all_values,
                                              const std::vector<int64_t>& ids, const Data& data,
                                              CsvWriter& metrics);

// `hfta tune`'s data of a classifier search (run/task.h): the dataset of `options`, checked to
// hold `largest_batch` training samples.
std::unique_ptr<SearchData> load_classifier_search_data(const TrainOptions& options,
                                                        int64_t largest_batch);

}  // namespace hfta
