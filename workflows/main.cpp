// The `hfta` command: `hfta train` trains an array of models, `hfta sweep` measures throughput
// against the fusion count. Each subcommand lives in its own workflows/ file.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "backend/cpu/runtime.h"
#include "core/error.h"
#include "workflows/sweep.h"
#include "workflows/train.h"

int main(int argc, char** argv) {
  hfta::cpu::init_runtime(argv, 0);
  CLI::App app{"hfta: train arrays of horizontally fused models"};
  app.require_subcommand(1);
  hfta::add_train_command(app);
  hfta::add_extract_command(app);
  hfta::add_eval_command(app);
  hfta::add_sweep_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const hfta::Error& e) {
    fmt::print(stderr, "hfta: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
