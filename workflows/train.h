// `hfta train`: trains an array of B models (one per hyperparameter setting) on one dataset,
// fused (one array) or serial (each model alone, one after another, the baseline).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace hfta {

struct TrainOptions {
  std::string model = "lenet";
  std::string dataset = "fashion-mnist";  // or "synthetic"
  std::string data_dir;                   // empty = Debian's /usr/share/datasets/fashion-mnist
  std::string optimizer = "adam";         // adam, adamw, sgd
  // Per-model hyperparameter lists: one value (shared) or B values. B = the longest list.
  std::vector<float> lr{1e-3f}, beta1{0.9f}, beta2{0.999f}, eps{1e-8f}, weight_decay{0.0f},
      momentum{0.0f};
  std::vector<uint8_t> nesterov{0};
  int64_t epochs = 1;
  int64_t batch_size = 64;
  int64_t iters_per_epoch = 0;  // 0 = whole epochs
  int64_t eval_batch_size = 1000;
  uint64_t seed = 1;
  int threads = 0;
  bool serial = false;
  bool progress = true;  // progress bar when stdout is a terminal
  std::string out = "runs/train";
  // Save <out>/checkpoint.bin (serial: checkpoint-model<b>.bin) after every epoch and on Ctrl-C.
  bool checkpoint = true;
  // Continue from the checkpoints in <out> (same flags required; metrics.csv is kept).
  bool resume = false;
  // Synthetic data sizes (dataset = synthetic).
  int64_t synthetic_train_size = 4096, synthetic_test_size = 1024;
};

struct ModelResult {
  int64_t model = 0;
  double final_train_loss = 0.0;  // mean over the last epoch's steps
  double test_accuracy = 0.0;     // in [0, 1]
  double test_loss = 0.0;
  double wall_seconds = 0.0;  // this model's share: the whole run when fused
  int64_t skipped_steps = 0;  // steps skipped for NaN/Inf gradients
};

struct TrainResult {
  int64_t B = 0;
  double wall_seconds = 0.0;  // training + evaluation, all models
  std::vector<ModelResult> models;
};

// The number of models implied by the hyperparameter lists: the longest list's length. Throws
// hfta::Error naming the flags when two lists have different lengths greater than one.
int64_t array_size(const TrainOptions& options);

// Trains as the options say, writing <out>/metrics.csv and <out>/summary.csv. Throws hfta::Error
// on bad options, missing data files or an unwritable --out.
TrainResult run_train(const TrainOptions& options);

// Registers the `train` subcommand.
void add_train_command(CLI::App& app);
// `hfta extract --run DIR (--model N | --best) --out FILE`: one model of a run, on its own.
void add_extract_command(CLI::App& app);
// `hfta eval --checkpoint FILE`: test loss and accuracy of each model in a checkpoint.
void add_eval_command(CLI::App& app);

}  // namespace hfta
