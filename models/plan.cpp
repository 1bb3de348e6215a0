#include "models/plan.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <exception>

#include "core/error.h"

namespace hfta {

ExecutionPlan ExecutionPlan::parse(const std::string& text) {
  if (text == "fused") return fused();
  if (text == "threads") return threads();
  if (text == "auto") return {Kind::kAuto, 0};
  const bool threaded = text.rfind("threads:", 0) == 0;
  if (text.rfind("chunk:", 0) == 0 || threaded) {
    const std::string count = text.substr(threaded ? 8 : 6);
    size_t used = 0;
    long long c = 0;
    try {
      c = std::stoll(count, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == count.size() && !count.empty() && c >= 1) return threaded ? threads(c) : chunks(c);
    fail("plan '{}': the chunk size must be a whole number of models >= 1, e.g. {}:2", text,
         threaded ? "threads" : "chunk");
  }
  fail(
      "unknown plan '{}': choose auto, fused, chunk:C (C models at a time), threads or threads:C "
      "(each thread its own models, C at a time)",
      text);
}

std::string ExecutionPlan::str() const {
  switch (kind) {
    case Kind::kFused:
      return "fused";
    case Kind::kChunk:
      return fmt::format("chunk:{}", chunk);
    case Kind::kThreads:
      return chunk > 0 ? fmt::format("threads:{}", chunk) : "threads";
    case Kind::kAuto:
      return "auto";
  }
  return "?";
}

PlanLayout lay_out(const ExecutionPlan& plan, int64_t B, int threads) {
  HFTA_CHECK(B >= 1, "a plan needs at least one model, got B = {}", B);
  PlanLayout layout;
  switch (plan.kind) {
    case ExecutionPlan::Kind::kAuto:
      fail("plan auto must be resolved to a plan before the array is built");
    case ExecutionPlan::Kind::kFused:
      layout.groups.push_back({0, B, 0});
      break;
    case ExecutionPlan::Kind::kChunk: {
      const int64_t c = std::min(plan.chunk, B);
      HFTA_CHECK(c >= 1, "chunk size {} is not a number of models", plan.chunk);
      for (int64_t first = 0; first < B; first += c)
        layout.groups.push_back({first, std::min(c, B - first), 0});
      break;
    }
    case ExecutionPlan::Kind::kThreads: {
      // Contiguous blocks as even as possible: worker w owns [w*B/W, (w+1)*B/W).
      const int64_t w = std::clamp<int64_t>(threads, 1, B);
      for (int64_t i = 0; i < w; ++i) {
        const int64_t lo = i * B / w, hi = (i + 1) * B / w;
        const int64_t c = plan.chunk > 0 ? plan.chunk : hi - lo;
        for (int64_t first = lo; first < hi; first += c)
          layout.groups.push_back({first, std::min(c, hi - first), static_cast<int>(i)});
      }
      layout.workers = static_cast<int>(w);
      break;
    }
  }
  return layout;
}

void run_plan_groups(const PlanLayout& layout, const std::function<void(size_t g)>& run_group) {
  if (layout.workers == 1) {
    for (size_t g = 0; g < layout.groups.size(); ++g) run_group(g);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<size_t>(layout.workers));
#pragma omp parallel num_threads(layout.workers)
  {
    omp_set_num_threads(1);
    const int w = omp_get_thread_num();
    try {
      for (size_t g = 0; g < layout.groups.size(); ++g)
        if (layout.groups[g].worker == w) run_group(g);
    } catch (...) {
      errors[static_cast<size_t>(w)] = std::current_exception();
    }
  }
  for (auto& error : errors)
    if (error) std::rethrow_exception(error);
}

}  // namespace hfta
