// One timed training measurement: the unit `hfta sweep` repeats over modes and B.
//
// run_trial() builds `B` models of one architecture (an array, or with `serial` B single models
// trained one after another), trains them for `warmup_steps` uncounted steps and then `steps`
// counted steps of forward + backward + Adam (the loop of train_loop.h) on minibatches of
// `batch_size` rows, and reports the time of the counted steps. Every model sees the same
// minibatches. Learning rates are drawn per model from a seeded log-uniform range, so every B
// measures distinct hyperparameters.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hfta {

struct TrialOptions {
  std::string model = "lenet";        // a name from model_names()
  std::string dataset = "synthetic";  // "synthetic" or "fashion-mnist"
  std::string data_dir;               // Fashion-MNIST directory; empty = the Debian default
  int64_t B = 1;
  bool serial = false;  // B single models one after another instead of one array of B
  int64_t batch_size = 64;
  int64_t warmup_steps = 2;
  int64_t steps = 20;
  uint64_t seed = 1;
  int threads = 0;             // OpenMP/BLAS threads for this process; 0 = leave as set
  bool deterministic = false;  // --deterministic (core/determinism.h)
  // How the array runs its steps (models/plan.h); auto times the plans (cached per machine).
  std::string plan = "auto";
  // --device: cpu, or cuda (classifiers under plan fused; the timed steps end when the device has
  // finished them).
  std::string device = "cpu";
  int64_t image_size = 0;  // dcgan: the image side (0 = 64)
  int64_t npoints = 0;     // points per cloud of point-cloud data (--npoints); 0 = the model's
  // Language models (--model transformer): --dataset text (--text-files) or synthetic-text
  // (--vocab words); batch_size is the token streams, each step reads [batch_size, 32] tokens
  // and samples_per_second counts tokens.
  std::string text_files;
  int64_t vocab = 10000;
  // Called before each array's timed steps, after its setup (data, model, plan choice) and
  // warm-up: `hfta trial --wait-for-go` waits there for the sweep's go, so that processes
  // training side by side time the same stretch of wall time, not their loading.
  std::function<void()> before_timed;
};

struct TrialResult {
  double seconds = 0.0;       // wall time of the counted steps, all models
  double samples_per_second;  // summed over models: B * steps * batch_size / seconds (language
                              // models: tokens, B * steps * batch_size * bptt / seconds)
  double step_ms;             // seconds / steps * 1000 (with serial: all B models' step)
  double flops_per_step;      // analytic forward+backward FLOPs of all B models per step
  int64_t params_per_model;
  std::string plan;  // the plan that ran (auto resolved)
};

}  // namespace hfta
