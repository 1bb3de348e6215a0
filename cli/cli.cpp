#include "cli/cli.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "core/device_memory.h"
#include "core/error.h"
#include "models/plan.h"

namespace hfta {

namespace {

// The value is checked as text, so it must be the whole text (CLI11 converts it after).
template <typename T>
bool parse_whole(const std::string& text, T& value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

CLI::Validator integer_at_least(int64_t min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        int64_t value = 0;
        uint64_t big = 0;
        if (parse_whole(text, value)) {
          if (value >= min) return "";
        } else if (!(min >= 0 && parse_whole(text, big))) {  // beyond int64: seeds
          return fmt::format("'{}' is not an integer", text);
        } else {
          return "";
        }
        return fmt::format("{} is less than {}", text, min);
      },
      fmt::format(">= {}", min));
}

CLI::Validator number_at_least(double min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        double value = 0;
        if (!parse_whole(text, value) || !std::isfinite(value))
          return fmt::format("'{}' is not a finite number", text);
        if (value < min) return fmt::format("{} is less than {:g}", text, min);
        return "";
      },
      fmt::format(">= {:g}", min));
}

CLI::Validator plan_name() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          ExecutionPlan::parse(text);
        } catch (const Error& e) {
          return e.what();
        }
        return {};
      },
      "PLAN");
}

CLI::Validator device_name() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          parse_device(text);
        } catch (const Error& e) {
          return e.what();
        }
        return {};
      },
      "cpu|cuda");
}

double parse_duration_seconds(const std::string& text, const std::string& flag) {
  if (text == "off") return 0.0;
  std::string number = text;
  double unit = 1.0;
  if (!number.empty()) {
    switch (number.back()) {
      case 's':
        unit = 1.0;
        break;
      case 'm':
        unit = 60.0;
        break;
      case 'h':
        unit = 3600.0;
        break;
      default:
        unit = 0.0;  // no unit: plain seconds
    }
    if (unit != 0.0)
      number.pop_back();
    else
      unit = 1.0;
  }
  // CLI11 names the flag itself before a validator's message.
  const std::string what = flag.empty() ? fmt::format("'{}'", text) : flag + " '" + text + "'";
  double value = 0;
  HFTA_CHECK(parse_whole(number, value) && std::isfinite(value),
             "{} is not a duration: give seconds (90), or a number with s, m or h (90s, 5m, 1h), "
             "or off",
             what);
  HFTA_CHECK(value >= 0, "{} is negative: give a duration such as 5m, or off", what);
  return value * unit;
}

CLI::Validator duration() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          parse_duration_seconds(text, "");
        } catch (const Error& e) {
          return e.what();
        }
        return "";
      },
      "DURATION");
}

}  // namespace hfta
