#include "workflows/sweep.h"

namespace hfta {

void add_sweep_command(CLI::App& app) {}

}  // namespace hfta
