#include "run/task.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace hfta {

std::unique_ptr<SearchData> Task::load_search_data(const TrainOptions&, int64_t) const {
  fail("hfta tune does not search {} models", kind());
}

void check_model_flags(const Task& task, const std::string& model,
                       std::span<const std::string> given, std::span<const Task* const> all_tasks) {
  for (const std::string& flag : given) {
    if (task.reads_flag(model, flag)) continue;
    std::vector<std::string> readers;
    for (const Task* t : all_tasks)
      for (const std::string& m : t->model_names())
        if (t->reads_flag(m, flag)) readers.push_back(m);
    fail("{}: --model {} ({}) does not read it; {}", flag, model, task.kind(),
         readers.empty() ? std::string("no model does")
                         : fmt::format("it is a flag of {}", fmt::join(readers, ", ")));
  }
}

}  // namespace hfta
