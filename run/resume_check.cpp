#include "run/resume_check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"

namespace hfta {

namespace {

std::string hyper_flag(const std::string& name) {
  std::string flag = "--" + name;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

}  // namespace

void check_resumable(const Checkpoint& c, const std::string& path, const ResumeExpectation& now) {
  auto differs = [&](const std::string& what, const std::string& was, const std::string& is) {
    fail(
        "cannot resume from {}: it was trained with {} {}, this command gives {}; resume with "
        "the same flags or choose another --out",
        path, what, was, is);
  };
  if (c.model != now.model) differs("--model", c.model, now.model);
  if (!now.optimizer.empty() && c.optimizer != now.optimizer)
    differs("--optimizer", c.optimizer, now.optimizer);
  for (const ResumeExpectation::Setting& s : now.settings)
    if (s.was != s.is) differs(s.flag, s.was, s.is);
  if (c.seed != now.seed) differs("--seed", std::to_string(c.seed), std::to_string(now.seed));
  if (c.batch_size != now.batch_size)
    differs("--batch-size", std::to_string(c.batch_size), std::to_string(now.batch_size));
  if (c.model_ids != now.model_ids)
    differs("models", fmt::format("{}", fmt::join(c.model_ids, ",")),
            fmt::format("{}", fmt::join(now.model_ids, ",")));
  for (const auto& [name, is] : now.hyper) {
    // Recorded as doubles of floats: shown as the floats the user typed.
    auto was = c.hyper.find(name);
    const std::vector<float> was_floats =
        was == c.hyper.end() ? std::vector<float>{}
                             : std::vector<float>(was->second.begin(), was->second.end());
    if (was == c.hyper.end() || was_floats != is)
      differs(hyper_flag(name),
              was == c.hyper.end() ? "nothing" : fmt::format("{}", fmt::join(was_floats, ",")),
              fmt::format("{}", fmt::join(is, ",")));
  }
  if (now.hyper_exactly)
    for (const auto& [name, values] : c.hyper)
      if (!now.hyper.count(name))
        differs(hyper_flag(name), fmt::format("{}", fmt::join(values, ",")), "nothing");
  if (c.epoch > now.epochs)
    differs("--epochs", std::to_string(c.epoch), std::to_string(now.epochs));
}

}  // namespace hfta
