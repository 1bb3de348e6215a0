// hfta::Error: a mistake the user can fix (shape, flag, file, hyperparameter list). The message
// names the value, what was expected, and how to fix it. Kernel preconditions use assert instead.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <string>

namespace hfta {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace hfta

// HFTA_CHECK(cond, "fmt", args...): throws hfta::Error with the formatted message when cond fails.
#define HFTA_CHECK(cond, ...)               \
  do {                                      \
    if (!(cond)) ::hfta::fail(__VA_ARGS__); \
  } while (0)
