// The task interface: what differs between model kinds (a classifier, a language model, a masked
// language model, a GAN), so that the workflows above it (`hfta train`, `trial`, `eval`,
// `extract`, `export`, `sweep`, `tune`) are written once and never branch on the kind.
//
// A task knows which models it trains, which of the model-specific flags each reads, how it
// trains and times an array (train, trial), what it evaluates and by which metric its models are
// ranked (or that it has none), and what an export of one model holds (its state_dict, with
// extras such as a vocabulary). The four implementations live in tasks/; tasks/tasks.h finds the
// task of a model name.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hfta {

struct Checkpoint;
class RunArray;
struct TrainOptions;
struct TrainResult;
struct TrialOptions;
struct TrialResult;

// The metric that ranks a task's models (`hfta extract --best`, `hfta tune`'s default --metric):
// a column of the run's summary.csv, and which way is better.
struct TaskMetric {
  std::string column;       // summary.csv's column, e.g. test_accuracy, test_miou, valid_ppl
  bool maximize = true;     // higher is better
  std::string description;  // for messages, e.g. "test accuracy"
};

// `hfta eval`: where the test data comes from; an empty field takes the checkpoint's own.
struct EvalOptions {
  std::string dataset, data_dir, text_files;
  std::string device = "cpu";  // where the models run: "cpu" or "cuda" (tasks that read --device)
};

// What `hfta eval` prints: the data it scored, and per model of the checkpoint its metrics.
struct EvalReport {
  std::string data;                        // e.g. "10000 test samples of fashion-mnist"
  std::vector<std::string> model_metrics;  // e.g. "test loss 0.41  test acc 85.20%"
};

// `hfta export` of one trained model.
struct ExportOptions {
  std::string out;     // the .safetensors file
  std::string source;  // what the model is, for the file's metadata ("model 2 of runs/x, step 9")
  std::string net = "g";  // a GAN's network: g (generator) or d (discriminator)
};

// `hfta export --init`: the initial weights of model 0 of an array seeded with `seed` (the
// starting point of benchmarks/torch_golden.py).
struct InitExportOptions {
  std::string model, out;
  uint64_t seed = 1;
  std::vector<int64_t> sample_shape;  // one sample (classifiers, DCGAN); empty: the model's
  int64_t classes = 10;               // classifiers
  // Language models: sizes, and the corpus whose vocabulary the model gets (none: --vocab
  // placeholder words).
  int64_t vocab = 10000, emsize = 128, nhid = 128, nlayers = 2, nhead = 2;
  std::string text_files;
  std::string net = "g";  // DCGAN: g or d
};

// Flags of `hfta train` (and those of them `hfta tune` takes) that only some models read. The
// command line refuses one that the chosen model does not read (Task::reads_flag), naming it.
inline constexpr std::string_view kModelSpecificFlags[] = {
    "--dropout",        "--no-decay-norm-bias",
    "--synthetic-size", "--synthetic-test-size",
    "--npoints",        "--feature-transform",
    "--text-files",     "--emsize",
    "--nhid",           "--nlayers",
    "--nhead",          "--bptt",
    "--clip",           "--lr-gamma",
    "--lr-step-size",   "--vocab",
    "--lr-d",           "--image-size",
    "--device"};

// `hfta tune`'s data, loaded once per search, and the arrays of trials it trains on it.
class SearchData {
 public:
  virtual ~SearchData() = default;
  // An array of `options`' models, for the search to train epoch by epoch (run/epoch_loop.h's
  // RunArray: begin_epoch, train_epoch, validate, checkpoints, live slots): B is the longest
  // hyperparameter list and model b draws its initial weights and dropout from RNG stream
  // options.model_streams[b] (its trial's id). It writes no metrics, and holds what it needs but
  // this SearchData, which must outlive it.
  virtual std::unique_ptr<RunArray> make_array(const TrainOptions& options) = 0;
  // Arena bytes of one model of `options` (B = 1 under every plan): --memory-budget's unit.
  virtual int64_t bytes_per_model(const TrainOptions& options) = 0;
  // What the search trains on, for its first line: e.g. "fashion-mnist (60000 train samples)".
  virtual std::string describe() const = 0;
};

class Task {
 public:
  virtual ~Task() = default;

  // "classifier", "language model", "masked language model", "GAN".
  virtual std::string_view kind() const = 0;
  // The names --model takes for this task.
  virtual std::vector<std::string> model_names() const = 0;
  // Whether `model` reads `flag`, one of kModelSpecificFlags.
  virtual bool reads_flag(const std::string& model, std::string_view flag) const = 0;
  // The metric that ranks `model`'s trained models; none for a task without one (a GAN).
  virtual std::optional<TaskMetric> primary_metric(const std::string& model) const = 0;
  // `hfta tune`'s --metric when none is given (val_acc or val_loss); none when tune cannot
  // search the task, with `why_not` saying why.
  virtual std::optional<std::string> tune_metric(const std::string& model,
                                                 std::string* why_not) const = 0;

  // `hfta tune`'s --metric choices for `model`, from its RunArray::validate: val_acc and
  // val_loss, or val_loss alone for a model without accuracy.
  virtual std::vector<std::string> tune_metrics(const std::string& model) const {
    return {"val_acc", "val_loss"};
  }
  // `hfta tune`: loads the data of `options` (dataset, data dir, sizes, seed) once for the whole
  // search; throws hfta::Error for data the search cannot use, e.g. fewer samples than
  // `largest_batch`, the largest batch size it may train with. The default throws: a task that
  // tune_metric refuses is never searched.
  virtual std::unique_ptr<SearchData> load_search_data(const TrainOptions& options,
                                                       int64_t largest_batch) const;

  // What a trial's samples are (`hfta sweep`'s samples/s): "samples", or "tokens" for text.
  virtual std::string_view sample_unit() const { return "samples"; }
  // Sets the task's own defaults in `options` for the flags `given` says were left out (BERT's
  // sizes follow HFTA's examples/bert).
  virtual void apply_defaults(TrainOptions& options,
                              const std::function<bool(const char*)>& given) const {}

  // `hfta train`: trains the options' array (or its models one after another) and writes the
  // run's metrics, summary and checkpoints in options.out.
  virtual TrainResult train(const TrainOptions& options) const = 0;
  // `hfta trial`: timed training steps of B models (trial.h).
  virtual TrialResult trial(const TrialOptions& options) const = 0;
  // `hfta eval`: every model of `checkpoint` (read from `path`) on its test data.
  virtual EvalReport evaluate(const Checkpoint& checkpoint, const std::string& path,
                              const EvalOptions& options) const = 0;
  // `hfta export`: model 0 of a B = 1 checkpoint (extract_model's) as safetensors with PyTorch's
  // state_dict names; returns what was written, for the command's message.
  virtual std::string export_model(const Checkpoint& one, const ExportOptions& options) const = 0;
  // `hfta export --init`; returns what was written.
  virtual std::string export_init(const InitExportOptions& options) const = 0;
};

// Throws hfta::Error naming the first of `given` (flags of kModelSpecificFlags that the command
// line holds) that `model` does not read, and the models that do.
void check_model_flags(const Task& task, const std::string& model,
                       std::span<const std::string> given, std::span<const Task* const> all_tasks);

}  // namespace hfta
