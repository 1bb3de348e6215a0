// Checks for the numeric flags of every subcommand. CLI11 reads an empty value as 0 and accepts
// "nan" for a float and -3 for a count; these validators reject each with a message naming the
// flag (CLI11 prefixes it): the whole value must be a decimal number, finite, and at least `min`.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace hfta {

CLI::Validator integer_at_least(int64_t min);
CLI::Validator number_at_least(double min);
// An execution plan (models/plan.h): auto, fused, chunk:C, threads or threads:C, optionally /K,
// and their +fused and +balanced forms.
CLI::Validator plan_name();
// A --device name (core/device_memory.h's parse_device: cpu or cuda).
CLI::Validator device_name();

// A duration as typed after a flag: a number of seconds ("90", "2.5"), or a number with a unit
// "s", "m" or "h" ("90s", "5m", "1h"); "0" and "off" mean none. Returns seconds (0 for none).
// Throws hfta::Error naming `flag` (if not empty) and the text when it is none of these, negative
// or not finite.
double parse_duration_seconds(const std::string& text, const std::string& flag);
// The same check as a CLI11 validator.
CLI::Validator duration();

}  // namespace hfta
