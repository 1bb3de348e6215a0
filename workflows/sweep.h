// `hfta sweep`: throughput against the fusion count B, for the serial, concurrent and fused modes.
#pragma once

#include <CLI/CLI.hpp>

namespace hfta {

// Registers the `sweep` subcommand.
void add_sweep_command(CLI::App& app);

}  // namespace hfta
