// Checks for the numeric flags of every subcommand. CLI11 reads an empty value as 0 and accepts
// "nan" for a float and -3 for a count; these validators reject each with a message naming the
// flag (CLI11 prefixes it): the whole value must be a decimal number, finite, and at least `min`.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

namespace hfta {

CLI::Validator integer_at_least(int64_t min);
CLI::Validator number_at_least(double min);
// An execution plan (models/plan.h): auto, fused, chunk:C or threads.
CLI::Validator plan_name();

}  // namespace hfta
