// The flags of `hfta train`, `hfta extract` and `hfta eval`, wired to run_train, resume.h and
// evaluate.h. The hyperparameter flags come from hyper_table().
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <memory>

#include "cli/cli.h"
#include "cli/commands.h"
#include "core/error.h"
#include "datasets/fashion_mnist.h"
#include "io/checkpoint.h"
#include "models/model.h"
#include "run/data.h"
#include "run/hyper.h"
#include "run/plan_choice.h"
#include "run/run_dir.h"
#include "run/train.h"
#include "sweep/sweep.h"
#include "tasks/tasks.h"

namespace hfta {

namespace {

// "Adam beta1, per model (default 0.9: adam, adamw)"; one group per distinct default.
std::string hyper_help(const HyperRow& row) {
  std::vector<std::pair<float, std::vector<std::string_view>>> groups;
  for (const HyperDefault& d : row.used_by) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == d.value; });
    if (it == groups.end())
      groups.push_back({d.value, {d.optimizer}});
    else
      it->second.push_back(d.optimizer);
  }
  std::vector<std::string> parts;
  for (const auto& [value, names] : groups)
    parts.push_back(fmt::format("{:g} for {}", value, fmt::join(names, ", ")));
  return fmt::format("{}: one value (shared) or one per model, comma-separated (default {})",
                     row.help, fmt::join(parts, "; "));
}

}  // namespace

void add_model_flags(CLI::App* cmd, TrainOptions& opts) {
  cmd->add_option("--dropout", opts.dropout,
                  "Dropout probability for every dropout of the model (default: the "
                  "architecture's own, e.g. 0.2 in MobileNetV2's classifier; 0 turns it off)")
      ->check(CLI::Range(0.0, 0.999));
  cmd->add_flag("--no-decay-norm-bias", opts.no_decay_norm_bias,
                "No weight decay on BatchNorm parameters and biases");
  cmd->add_option("--synthetic-size", opts.synthetic_train_size,
                  "Training samples of --dataset synthetic or shapes")
      ->check(integer_at_least(1))
      ->capture_default_str();
  cmd->add_option("--synthetic-test-size", opts.synthetic_test_size,
                  "Test samples of --dataset synthetic or shapes")
      ->check(integer_at_least(1))
      ->capture_default_str();
  cmd->add_option("--npoints", opts.npoints,
                  "Points per cloud of --dataset shapes or shapenet-part (default: the model's, "
                  "1024 for pointnet_cls)")
      ->check(integer_at_least(1));
  cmd->add_option("--lr-d", opts.lr_d,
                  "DCGAN: the discriminator's learning rate, one value or one per model "
                  "(default: --lr)")
      ->delimiter(',');
  cmd->add_option("--image-size", opts.image_size,
                  "DCGAN: the side images are resized to: 8, 16, 32 or 64 (default 64)")
      ->check(integer_at_least(1));
  cmd->add_flag("--feature-transform", opts.feature_transform,
                "PointNet: train the model's feature-transform variant (pointnet_cls_ft, "
                "pointnet_seg_ft): a T-Net on the 64-d point features and its regularizer");
  cmd->add_option("--text-files", opts.text_files,
                  "--dataset text: comma-separated UTF-8 text files or directories (e.g. "
                  "/usr/share/games/fortunes), split 90/5/5 by line");
  cmd->add_option("--emsize", opts.emsize, "Language models: embedding width")
      ->check(integer_at_least(1))
      ->capture_default_str();
  cmd->add_option("--nhid", opts.nhid, "Language models: feed-forward width")
      ->check(integer_at_least(1))
      ->capture_default_str();
  cmd->add_option("--nlayers", opts.nlayers, "Language models: encoder layers")
      ->check(integer_at_least(1))
      ->capture_default_str();
  cmd->add_option("--nhead", opts.nhead, "Language models: attention heads")
      ->check(integer_at_least(1))
      ->capture_default_str();
  cmd->add_option("--bptt", opts.bptt, "Language models: tokens per window")
      ->check(integer_at_least(1))
      ->capture_default_str();
  cmd->add_option("--clip", opts.clip,
                  "Language models: each model's gradient norm limit, one value or one per model")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--lr-gamma", opts.lr_gamma,
                  "Language models: StepLR gamma per epoch, one value or one per model")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--lr-step-size", opts.lr_step_size,
                  "Language models: StepLR step size in epochs, one value or one per model")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--vocab", opts.vocab,
                  "Language models, --dataset synthetic-text: words of the seeded token stream")
      ->check(integer_at_least(2))
      ->capture_default_str();
  cmd->add_option("--device", opts.device,
                  "Where the models train: cpu, or cuda (classifiers under plan fused, in a build "
                  "with the CUDA backend; docs/cuda.md)")
      ->check(device_name())
      ->capture_default_str();
}

std::vector<std::string> given_model_flags(const CLI::App* cmd) {
  std::vector<std::string> given;
  for (std::string_view flag : kModelSpecificFlags) {
    const CLI::Option* option = cmd->get_option_no_throw(std::string(flag));
    if (option != nullptr && option->count() > 0) given.emplace_back(flag);
  }
  return given;
}

void add_train_command(CLI::App& app) {
  auto opts = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand(
      "train", "Train an array of models, one per hyperparameter setting, on one dataset");
  cmd->add_option("--model", opts->model, "Architecture")
      ->check(CLI::IsMember(task_model_names()))
      ->capture_default_str();
  cmd->add_option("--dataset", opts->dataset, "Dataset")
      ->check(CLI::IsMember(dataset_names()))
      ->capture_default_str();
  cmd->add_option("--data-dir", opts->data_dir,
                  fmt::format("Data directory: Fashion-MNIST's IDX files (default {}) or "
                              "CIFAR-10's binary batches (cifar-10-batches-bin)",
                              kFashionMnistDefaultDir));
  cmd->add_option("--optimizer", opts->optimizer, "Optimizer")
      ->check(CLI::IsMember(optimizer_names()))
      ->capture_default_str();
  // The hyperparameter lists, as typed: parsed after the command line is read.
  auto hyper_text = std::make_shared<std::map<std::string, std::string>>();
  std::vector<std::pair<const HyperRow*, CLI::Option*>> hyper_flags;
  for (const HyperRow& row : hyper_table())
    hyper_flags.emplace_back(
        &row, cmd->add_option(row.flag(), (*hyper_text)[std::string(row.name)], hyper_help(row))
                  ->type_name("LIST"));
  cmd->add_option("--epochs", opts->epochs, "Epochs")
      ->check(integer_at_least(1))
      ->capture_default_str();
  cmd->add_option("--batch-size", opts->batch_size, "Minibatch rows, shared by all models")
      ->check(integer_at_least(1))
      ->capture_default_str();
  cmd->add_option("--iters-per-epoch", opts->iters_per_epoch,
                  "At most this many steps per epoch (0: whole epochs)")
      ->check(integer_at_least(0));
  cmd->add_option("--first-model-id", opts->first_model_id,
                  "Model b draws its initial weights from stream (seed, K + b): retrains model K "
                  "of a larger run, e.g. a trial of `hfta tune`, alone")
      ->check(integer_at_least(0))
      ->capture_default_str();
  cmd->add_option("--first-epoch", opts->first_epoch,
                  "Epoch e draws the loader's shuffle of epoch K + e: retrains a trial that "
                  "joined a live `hfta tune` array after K budget units, alone")
      ->check(integer_at_least(0))
      ->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Seed of initialization and shuffling")
      ->check(integer_at_least(0))
      ->capture_default_str();
  cmd->add_option("--threads", opts->threads, "CPU threads (0: all cores)")
      ->check(integer_at_least(0));
  cmd->add_flag("--deterministic", opts->deterministic,
                "Every op sums in one fixed order per model: each model of an array, under any "
                "plan and thread count, is bit for bit the model trained alone with this flag "
                "(slower; docs/design.md)");
  auto fused_flag = std::make_shared<bool>(false);  // the default; kept alive by the callback
  auto* fused =
      cmd->add_flag("--fused", *fused_flag, "Train the models as one fused array (default)");
  cmd->add_flag("--serial", opts->serial,
                "Train the models one after another, each alone (the baseline)")
      ->excludes(fused);
  cmd->add_option("--plan", opts->plan,
                  "How the fused array runs a step: auto (time the others and pick the fastest), "
                  "fused, chunk:C (C models at a time) or threads (each thread its own models); "
                  "chunk:C/K and threads[:C]/K visit each group for K steps in a row; "
                  "threads[:C]+fused and threads:1+balanced/K share odd B out (docs/cli.md)")
      ->check(plan_name())
      ->capture_default_str();
  cmd->add_option_function<std::string>(
      "--memory-budget",
      [opts](const std::string& text) { opts->memory_budget_bytes = parse_memory_size(text); },
      "Most memory --plan auto may pick a plan for (e.g. 4GiB, 512MiB; default: no limit)");
  cmd->add_flag(
      "--no-progress", [opts](int64_t) { opts->progress = false; }, "No progress bar");
  cmd->add_option("--out", opts->out, "Directory for metrics.csv and summary.csv")
      ->capture_default_str();
  cmd->add_flag("--resume", opts->resume,
                "Continue the run in --out from its checkpoints (give the same flags)");
  cmd->add_flag(
      "--no-checkpoint", [opts](int64_t) { opts->checkpoint = false; },
      "Do not save checkpoints (after every epoch and on Ctrl-C by default)");
  cmd->add_option("--checkpoint-every", opts->checkpoint_every,
                  "Also checkpoint every N optimizer steps, written in the background while "
                  "training goes on (0: off)")
      ->check(integer_at_least(0))
      ->capture_default_str();
  auto interval_text =
      std::make_shared<std::string>(fmt::format("{:g}m", kDefaultCheckpointIntervalSeconds / 60.0));
  cmd->add_option("--checkpoint-interval", *interval_text,
                  "Also checkpoint every DURATION of training (90s, 5m, 1h, plain seconds; 0 or "
                  "off: never), written in the background while training goes on")
      ->check(duration())
      ->capture_default_str();
  add_model_flags(cmd, *opts);
  cmd->callback([cmd, opts, fused_flag, hyper_text, hyper_flags, interval_text] {
    const Task& task = task_for_model(opts->model);
    check_model_flags(task, opts->model, given_model_flags(cmd), all_tasks());
    // The task's own defaults where the flags are left out (BERT's: HFTA's examples/bert).
    task.apply_defaults(*opts, [cmd](const char* flag) { return cmd->count(flag) > 0; });
    opts->checkpoint_interval_seconds =
        parse_duration_seconds(*interval_text, "--checkpoint-interval");
    for (const auto& [row, option] : hyper_flags)
      if (option->count() > 0)
        opts->hyper[std::string(row->name)] =
            parse_hyper_list(*row, hyper_text->at(std::string(row->name)));
    run_train(*opts);
  });
}

void add_extract_command(CLI::App& app) {
  struct Args {
    std::string run, out;
    int64_t model = -1;
    bool best = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "extract", "Write one model of a trained array to its own checkpoint (B = 1)");
  cmd->add_option("--run", args->run, "The --out directory of `hfta train`")->required();
  auto* model = cmd->add_option("--model", args->model, "Model index (0-based) to extract")
                    ->check(integer_at_least(0));
  cmd->add_flag("--best", args->best,
                "Extract the model with the best test accuracy (language models: the lowest "
                "validation perplexity)")
      ->excludes(model);
  cmd->add_option("--out", args->out, "Checkpoint file to write")->required();
  cmd->callback([args] {
    HFTA_CHECK(args->best || args->model >= 0, "give --model N or --best");
    int64_t b = args->model;
    if (args->best) {
      const std::string model = model_from_run(args->run, 0).model;
      b = best_model_of_run(args->run, model, task_for_model(model).primary_metric(model));
    }
    Checkpoint one = model_from_run(args->run, b);
    save_checkpoint(args->out, one);
    // Parameters and buffers (optimizer state is named "<param>#state<i>").
    int64_t values = 0;
    for (const auto& t : one.tensors)
      if (t.name.find('#') == std::string::npos) values += t.shape.numel();
    fmt::print(
        "model {} of {} ({} {}, lr {:g}, {} steps) written to {}: {} parameter and buffer "
        "values\n",
        b, args->run, one.model, one.optimizer, one.hyper.at("lr")[0], one.step, args->out, values);
  });
}

void add_eval_command(CLI::App& app) {
  struct Args {
    std::string checkpoint, dataset, data_dir, text_files, device = "cpu";
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("eval", "Evaluate the models of a checkpoint on a test set");
  cmd->add_option("--checkpoint", args->checkpoint, "Checkpoint file")->required();
  cmd->add_option("--dataset", args->dataset,
                  "Dataset (default: the one the checkpoint's models were trained on)")
      ->check(CLI::IsMember(dataset_names()));
  cmd->add_option("--data-dir", args->data_dir, "Fashion-MNIST, CIFAR-10 or WikiText-2 directory");
  cmd->add_option("--text-files", args->text_files,
                  "Language models, --dataset text: the files (default: those it was trained on)");
  cmd->add_option("--device", args->device,
                  "Where the models run: cpu, or cuda (classifiers, in a build with the CUDA "
                  "backend; any checkpoint, wherever it was trained)")
      ->check(device_name())
      ->capture_default_str();
  cmd->callback([args] {
    const Checkpoint c = load_checkpoint(args->checkpoint);
    prepare_runtime(0, false);
    const EvalReport report = run_eval(c, args->checkpoint,
                                       {.dataset = args->dataset,
                                        .data_dir = args->data_dir,
                                        .text_files = args->text_files,
                                        .device = args->device});
    fmt::print("{}: {} {} model{} after {} steps, on {}\n", args->checkpoint, c.B, c.model,
               c.B == 1 ? "" : "s", c.step, report.data);
    for (int64_t b = 0; b < c.B; ++b)
      fmt::print("  model {:>2}  lr {:<8g} {}\n", c.model_ids[b], c.hyper.at("lr")[b],
                 report.model_metrics[static_cast<size_t>(b)]);
  });
}

}  // namespace hfta
