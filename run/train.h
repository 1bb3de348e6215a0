// `hfta train`'s options and results: an array of B models (one per hyperparameter setting) on one
// dataset, fused (one array) or serial (each model alone, one after another, the baseline). Every
// task (run/task.h) trains from these; cli/train_cli.cpp fills them from the flags, and
// tasks/tasks.h's run_train hands them to the model's task.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "run/hyper.h"

namespace hfta {

// --checkpoint-interval's default: 5 minutes.
inline constexpr double kDefaultCheckpointIntervalSeconds = 300.0;

struct TrainOptions {
  std::string model = "lenet";
  std::string dataset = "fashion-mnist";  // or "synthetic"
  std::string data_dir;                   // empty = Debian's /usr/share/datasets/fashion-mnist
  std::string optimizer = "adam";         // a name from optimizer_names()
  std::optional<float> dropout;           // overrides the architecture's dropout probabilities
  bool no_decay_norm_bias = false;        // no weight decay on norm parameters and biases
  // Per-model hyperparameter lists by name (hyper_table()): one value (shared) or B values; the
  // optimizer's defaults for the rest. B = the longest list.
  HyperValues hyper;
  int64_t epochs = 1;
  int64_t batch_size = 64;
  // 0 = whole epochs. Language models: epoch e reads the N windows after epoch e-1's, wrapping
  // around the pass, so epochs of N steps cover the corpus as whole epochs do.
  int64_t iters_per_epoch = 0;
  int64_t eval_batch_size = 1000;
  uint64_t seed = 1;
  // --first-model-id: model b draws its initial weights and dropout from stream (seed, K + b), so
  // one model of a larger run (e.g. a trial of `hfta tune`) retrains alone.
  int64_t first_model_id = 0;
  // Set by `hfta tune` (no flag): model b's RNG stream is model_streams[b] (the array's trial
  // ids) instead of first_model_id + b.
  std::vector<int64_t> model_streams;
  // --first-epoch: epoch e of this run draws the loader's shuffle of epoch first_epoch + e, so a
  // trial that joined a live array of `hfta tune` (a refilled slot) at that point retrains alone.
  int64_t first_epoch = 0;
  int threads = 0;
  // --deterministic: every op sums in one fixed order per model (core/determinism.h), so model b
  // of an array, under any plan and thread count, is bit for bit the model trained alone.
  bool deterministic = false;
  bool serial = false;
  // --plan: how a fused array runs its steps (models/plan.h): auto, fused, chunk:C, threads or
  // threads:C, the last three optionally /K.
  std::string plan = "auto";
  int64_t memory_budget_bytes = 0;  // --memory-budget: the most arena bytes auto may pick; 0 = any
  // --device: cpu, or cuda (classifiers, plan fused; docs/cuda.md).
  std::string device = "cpu";
  bool progress = true;  // progress bar when stdout is a terminal
  std::string out = "runs/train";
  // Save <out>/checkpoint.bin (serial: checkpoint-model<b>.bin) after every epoch and on Ctrl-C.
  bool checkpoint = true;
  // And periodically while training, written in the background (checkpoint_writer.h): every
  // this many optimizer steps and/or seconds of training (0 turns either off). The default
  // interval costs well under 3% of training time (docs/benchmarks.md).
  int64_t checkpoint_every = 0;
  double checkpoint_interval_seconds = kDefaultCheckpointIntervalSeconds;
  // Continue from the checkpoints in <out> (same flags required; metrics.csv is kept).
  bool resume = false;
  // Language models (models/language_model.h; dataset = text or wikitext2).
  std::string text_files;  // --text-files: comma-separated files or directories
  int64_t emsize = 128, nhid = 128, nlayers = 2, nhead = 2, bptt = 32;
  std::vector<float> clip = {0.25f};     // per-model global gradient norm limit; empty = off
  std::vector<float> lr_gamma = {1.0f};  // StepLR per model: lr * gamma^floor(epoch / step)
  std::vector<int64_t> lr_step_size = {1};
  int64_t vocab = 10000;  // --vocab: words of --dataset synthetic-text (a seeded token stream)
  // Synthetic data sizes (dataset = synthetic).
  int64_t synthetic_train_size = 4096, synthetic_test_size = 1024;
  // Points per cloud of point-cloud datasets (--npoints); 0 = the model's default.
  int64_t npoints = 0;
  // DCGAN (train_gan.h): the discriminator's learning rate per model (empty = --lr's) and the
  // image side the data is resized to (0 = 64, the example's).
  std::vector<float> lr_d;
  int64_t image_size = 0;
  // --feature-transform: the model's _ft variant (PointNet's feature transform).
  bool feature_transform = false;
};

struct ModelResult {
  int64_t model = 0;
  double final_train_loss = 0.0;  // mean over the last epoch's steps
  double test_accuracy = 0.0;     // in [0, 1]
  double test_loss = 0.0;
  // Language models: the validation split's mean loss per predicted token after the last epoch,
  // and (BERT) the masked-token accuracy there; NaN where a run has none.
  double valid_loss = std::numeric_limits<double>::quiet_NaN();
  double valid_accuracy = std::numeric_limits<double>::quiet_NaN();
  // Segmentation models: the test shapes' mean IoU (evaluate.h); NaN for classifiers.
  double test_miou = std::numeric_limits<double>::quiet_NaN();
  double wall_seconds = 0.0;  // this model's share: the whole run when fused
  int64_t skipped_steps = 0;  // steps skipped for NaN/Inf gradients
  uint32_t state_crc32 = 0;   // model_state_crc32 of its final state (io/checkpoint.h)
  // summary.csv's state_crc32 field: 8 hexadecimal digits.
  std::string state_crc32_text() const;
};

struct TrainResult {
  int64_t B = 0;
  double wall_seconds = 0.0;  // training + evaluation, all models
  std::vector<ModelResult> models;
};

}  // namespace hfta
