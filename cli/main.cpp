// The `hfta` command: `hfta train` trains an array of models, `hfta extract` and `hfta eval` work
// on its checkpoints, `hfta sweep` measures throughput against the fusion count,
// `hfta tune` searches hyperparameters (tune.h). Each subcommand
// registers its own flags (train_cli.cpp, sweep.cpp). Every failure ends here as one line on
// stderr and a non-zero exit status.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "backend/cpu/runtime.h"
#include "cli/commands.h"
#include "cli/version.h"
#include "sweep/sweep.h"
#include "tune/tune.h"

int main(int argc, char** argv) {
  hfta::cpu::init_runtime(argv, 0);
  CLI::App app{"hfta: train arrays of horizontally fused models"};
  app.require_subcommand(1);
  app.set_version_flag(
      "--version", [] { return hfta::version_text(); },
      "Print the version, the build's options and the libraries, then exit");
  hfta::add_train_command(app);
  hfta::add_extract_command(app);
  hfta::add_eval_command(app);
  hfta::add_export_command(app);
  hfta::add_sweep_command(app);
  hfta::add_tune_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    fmt::print(stderr, "hfta: error: {} (--help lists the flags)\n", e.what());
    return e.get_exit_code();
  } catch (const std::exception& e) {  // hfta::Error, and anything a library throws
    fmt::print(stderr, "hfta: error: {}\n", e.what());
    return 1;
  } catch (...) {
    fmt::print(stderr, "hfta: error: an unknown exception\n");
    return 1;
  }
  return 0;
}
