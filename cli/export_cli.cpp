// `hfta export`: one model of a run or checkpoint, or a model's initial weights, as safetensors
// with PyTorch's state_dict names and layouts; what the file holds is the model's task's
// (run/task.h: export_model, export_init).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>

#include "cli/cli.h"
#include "cli/commands.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "run/run_dir.h"
#include "tasks/tasks.h"

namespace hfta {

void add_export_command(CLI::App& app) {
  struct Args {
    std::string run, checkpoint;
    int64_t model = -1;
    bool init = false;
    InitExportOptions init_options;
  };
  auto args = std::make_shared<Args>();
  InitExportOptions& init_options = args->init_options;
  CLI::App* cmd = app.add_subcommand(
      "export",
      "Write one model as safetensors with PyTorch's state_dict names and layouts (for "
      "torchvision's resnet18 / mobilenet_v2 or benchmarks/torch_models.py)");
  auto* run = cmd->add_option("--run", args->run, "The --out directory of `hfta train`");
  auto* checkpoint =
      cmd->add_option("--checkpoint", args->checkpoint, "A checkpoint file (e.g. from extract)");
  cmd->add_option("--model", args->model,
                  "Model index: its number in the run (--run), or its index in the checkpoint "
                  "(default 0)")
      ->check(integer_at_least(0));
  auto* init = cmd->add_flag("--init", args->init,
                             "Export freshly initialized weights (--arch, --seed, --sample-shape, "
                             "--classes): the starting point of benchmarks/torch_golden.py");
  cmd->add_option("--arch", init_options.model, "With --init: the architecture")
      ->check(CLI::IsMember(task_model_names()));
  cmd->add_option("--vocab", init_options.vocab, "With --init, language models: vocabulary size")
      ->check(integer_at_least(2));
  cmd->add_option("--emsize", init_options.emsize, "With --init, language models: embedding width");
  cmd->add_option("--nhid", init_options.nhid, "With --init, language models: feed-forward width");
  cmd->add_option("--nlayers", init_options.nlayers, "With --init, language models: layers");
  cmd->add_option("--nhead", init_options.nhead, "With --init, language models: heads");
  cmd->add_option("--text-files", init_options.text_files,
                  "With --init, language models: the corpus whose vocabulary the model gets");
  cmd->add_option("--net", init_options.net,
                  "DCGAN (--init --arch dcgan, or a dcgan run): the generator (g) or the "
                  "discriminator (d); --sample-shape gives the images (C,S,S with S 8, 16, 32 or "
                  "64)")
      ->check(CLI::IsMember({"g", "d"}));
  cmd->add_option("--seed", init_options.seed, "With --init: the seed (model 0's weights)");
  cmd->add_option("--sample-shape", init_options.sample_shape,
                  "With --init: one sample's shape, e.g. 3,32,32 (default: the architecture's)")
      ->delimiter(',')
      ->check(integer_at_least(1));
  cmd->add_option("--classes", init_options.classes, "With --init: classes")
      ->check(integer_at_least(2));
  cmd->add_option("--out", init_options.out, "The .safetensors file to write")->required();
  run->excludes(checkpoint)->excludes(init);
  checkpoint->excludes(init);
  cmd->callback([args] {
    const InitExportOptions& o = args->init_options;
    if (args->init) {
      HFTA_CHECK(!o.model.empty(), "--init needs --arch (one of {})",
                 fmt::join(task_model_names(), ", "));
      fmt::print("{}\n", task_for_model(o.model).export_init(o));
      return;
    }
    HFTA_CHECK(!args->run.empty() || !args->checkpoint.empty(),
               "give --run DIR --model N, --checkpoint FILE, or --init");
    Checkpoint one;
    std::string source;
    if (!args->run.empty()) {
      HFTA_CHECK(args->model >= 0, "--run needs --model N: the model's index in the run");
      one = model_from_run(args->run, args->model);
      source = fmt::format("model {} of {}, step {}", args->model, args->run, one.step);
    } else {
      const Checkpoint all = load_checkpoint(args->checkpoint);
      const int64_t index = std::max<int64_t>(args->model, 0);
      one = extract_model(all, index);
      source = fmt::format("model {} of {}, step {}", index, args->checkpoint, one.step);
    }
    fmt::print("{}\n", task_for_model(one.model).export_model(
                           one, {.out = o.out, .source = source, .net = o.net}));
  });
}

}  // namespace hfta
