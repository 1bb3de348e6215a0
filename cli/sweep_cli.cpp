// The flags of `hfta sweep` and of the hidden `hfta trial` each of its measurements runs in,
// wired to sweep/sweep.h.
#include <fmt/format.h>

#include <memory>

#include "cli/cli.h"
#include "cli/commands.h"
#include "core/error.h"
#include "run/data.h"
#include "sweep/sweep.h"

namespace hfta {

void add_sweep_command(CLI::App& app) {
  auto flags = std::make_shared<SweepFlags>();
  flags->trial.warmup_steps = 3;
  CLI::App* sweep = app.add_subcommand(
      "sweep", "Measure training throughput against B for the serial, concurrent and fused modes");
  // A later flag overrides an earlier one, so workflow scripts can pass "$@" after their own.
  sweep->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sweep->add_option("--model", flags->trial.model, "Model to train")->capture_default_str();
  sweep->add_option("--dataset", flags->trial.dataset, "Dataset")
      ->check(CLI::IsMember(dataset_names()))
      ->capture_default_str();
  sweep->add_option("--data-dir", flags->trial.data_dir, "Fashion-MNIST directory");
  sweep
      ->add_option("--npoints", flags->trial.npoints,
                   "Points per cloud of --dataset shapes or shapenet-part (PointNets)")
      ->check(integer_at_least(1));
  sweep->add_option("--text-files", flags->trial.text_files,
                    "Language models, --dataset text: comma-separated text files or directories");
  sweep
      ->add_option("--vocab", flags->trial.vocab,
                   "Language models, --dataset synthetic-text: words of the token stream")
      ->check(integer_at_least(2))
      ->capture_default_str();
  sweep->add_option("--modes", flags->modes, "Comma-separated: serial, concurrent, fused")
      ->capture_default_str();
  sweep
      ->add_option("--plan", flags->plans,
                   "Comma-separated plans for the fused mode (auto, fused, chunk:C, threads, "
                   "threads:C, each but fused and auto with an optional /K; +fused and "
                   "threads:1+balanced/K as in train); several draw a line each")
      ->capture_default_str();
  sweep->add_option("--B", flags->Bs, "Model counts, e.g. 1,2,4,8,16, or 'max'")
      ->capture_default_str();
  sweep->add_option("--repeats", flags->repeats, "Measurements per (mode, B)")
      ->check(integer_at_least(1))
      ->capture_default_str();
  sweep->add_option("--out", flags->out, "Results go to <out>/<model>/")->capture_default_str();
  sweep->add_option("--batch-size", flags->trial.batch_size, "Minibatch per model")
      ->check(integer_at_least(1))
      ->capture_default_str();
  sweep->add_option("--steps", flags->trial.steps, "Timed training steps per measurement")
      ->check(integer_at_least(1))
      ->capture_default_str();
  sweep->add_option("--warmup", flags->trial.warmup_steps, "Untimed steps before them")
      ->check(integer_at_least(0))
      ->capture_default_str();
  sweep->add_option("--seed", flags->trial.seed, "Seed of weights and hyperparameters")
      ->check(integer_at_least(0))
      ->capture_default_str();
  sweep->add_option("--image-size", flags->trial.image_size, "dcgan: image side (default 64)")
      ->check(integer_at_least(1));
  sweep->add_flag("--deterministic", flags->trial.deterministic,
                  "Every mode and plan measured with `hfta train --deterministic`'s kernels");
  sweep
      ->add_option("--device", flags->trial.device,
                   "Where the models train: cpu, or cuda (classifiers, modes serial and "
                   "concurrent and fused under plan fused; docs/cuda.md)")
      ->check(device_name())
      ->capture_default_str();
  sweep->add_option("--threads", flags->threads, "Threads in all (0 = every core)")
      ->check(integer_at_least(0))
      ->capture_default_str();
  sweep
      ->add_option(
          "--memory-budget", flags->memory_budget,
          "Memory limit, e.g. 8GiB: what --B max must fit in; kills any measurement above it")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            try {
              parse_memory_size(text);
              return "";
            } catch (const Error& e) {  // "--memory-budget '...' is not ...": CLI11 adds the flag
              std::string why = e.what();
              return why.starts_with("--memory-budget ") ? why.substr(16) : why;
            }
          },
          "SIZE"));
  sweep->add_option("--max-B-cap", flags->max_B_cap, "Largest B the --B max search tries")
      ->check(integer_at_least(1))
      ->capture_default_str();
  sweep
      ->add_option("--max-processes", flags->max_processes,
                   "Concurrent measurements with more processes are skipped")
      ->check(integer_at_least(1))
      ->capture_default_str();
  sweep
      ->add_option("--peak-gflops", flags->peak_gflops,
                   "Machine peak for percent_of_peak (default: measure it)")
      ->check(number_at_least(0));
  sweep
      ->add_option("--retries", flags->retries,
                   "Measure again when other processes took CPU time meanwhile, at most this "
                   "many times")
      ->check(integer_at_least(0))
      ->capture_default_str();
  sweep
      ->add_option("--busy-threshold", flags->busy_threshold,
                   "Share of the machine's CPU time other processes may take before a "
                   "measurement counts as disturbed")
      ->check(number_at_least(0))
      ->capture_default_str();
  sweep
      ->add_option("--quiet-wait", flags->quiet_wait,
                   "Seconds the whole sweep may wait, after a disturbed measurement, for other "
                   "processes to leave the CPUs")
      ->check(number_at_least(0))
      ->capture_default_str();
  sweep->add_flag("--no-plot", flags->no_plot, "Write the CSV only");
  sweep->add_flag("--plot-only", flags->plot_only,
                  "Plot an existing <out>/<model>/throughput.csv, measure nothing");
  sweep->callback([flags] { sweep_command(*flags); });

  auto trial = std::make_shared<TrialOptions>();
  auto wait_for_go = std::make_shared<bool>(false);
  CLI::App* t = app.add_subcommand("trial", "One timed measurement (run by hfta sweep)");
  t->group("");  // hidden: an interface between hfta processes, not for users
  t->add_option("--model", trial->model)->required();
  t->add_option("--dataset", trial->dataset);
  t->add_option("--data-dir", trial->data_dir);
  t->add_option("--B", trial->B)->check(integer_at_least(1));
  t->add_flag("--serial", trial->serial);
  t->add_option("--batch-size", trial->batch_size)->check(integer_at_least(1));
  t->add_option("--warmup", trial->warmup_steps)->check(integer_at_least(0));
  t->add_option("--steps", trial->steps)->check(integer_at_least(1));
  t->add_option("--seed", trial->seed)->check(integer_at_least(0));
  t->add_option("--threads", trial->threads)->check(integer_at_least(0));
  t->add_flag("--deterministic", trial->deterministic);
  t->add_option("--plan", trial->plan)->check(plan_name());
  t->add_option("--device", trial->device)->check(device_name());
  t->add_option("--image-size", trial->image_size)->check(integer_at_least(1));
  t->add_option("--npoints", trial->npoints)->check(integer_at_least(1));
  t->add_option("--text-files", trial->text_files);
  t->add_option("--vocab", trial->vocab)->check(integer_at_least(2));
  t->add_flag("--wait-for-go", *wait_for_go);
  t->callback([trial, wait_for_go] { trial_command(*trial, *wait_for_go); });
}

}  // namespace hfta
