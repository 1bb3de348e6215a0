#include "models/plan.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

#include "core/error.h"

namespace hfta {

namespace {
// A whole number >= 1 spelling all of `text`, or 0.
int64_t positive_count(const std::string& text) {
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
    return 0;
  }
  return used == text.size() && n >= 1 ? n : 0;
}
}  // namespace

ExecutionPlan ExecutionPlan::parse(const std::string& text) {
  if (text == "auto") return {Kind::kAuto, 0};
  const size_t slash = text.find('/');
  std::string base = text.substr(0, slash);
  constexpr std::string_view kBalanced = "+balanced";
  if (base.ends_with(kBalanced)) {
    base.resize(base.size() - kBalanced.size());
    const int64_t steps = slash == std::string::npos ? 0 : positive_count(text.substr(slash + 1));
    HFTA_CHECK(base == "threads:1" && steps >= 2,
               "plan '{}': +balanced (each visit of every model cut into a part per thread, the "
               "threads taking the parts in turn) is spelled threads:1+balanced/K, K >= 2 steps "
               "per visit, e.g. threads:1+balanced/8",
               text);
    return balanced_threads(steps);
  }
  constexpr std::string_view kRestFused = "+fused";
  const bool rest_fused = base.ends_with(kRestFused);
  if (rest_fused) {
    base.resize(base.size() - kRestFused.size());
    HFTA_CHECK(base.rfind("threads", 0) == 0,
               "plan '{}': +fused (the models left over after an even share per thread run "
               "fused) goes after a threads or threads:C plan, not after '{}'",
               text, base);
  }
  int64_t steps = 1;
  if (slash != std::string::npos) {
    steps = positive_count(text.substr(slash + 1));
    HFTA_CHECK(steps >= 1,
               "plan '{}': the steps per visit after '/' must be a whole number >= 1, e.g. "
               "threads:1/8",
               text);
    HFTA_CHECK(base.rfind("chunk:", 0) == 0 || base.rfind("threads", 0) == 0,
               "plan '{}': /K (steps per visit) goes after a chunk:C or threads plan, not after "
               "'{}'",
               text, base);
  }
  if (base == "fused") return fused();
  if (base == "threads") return threads(0, steps, rest_fused);
  const bool threaded = base.rfind("threads:", 0) == 0;
  if (base.rfind("chunk:", 0) == 0 || threaded) {
    const int64_t c = positive_count(base.substr(threaded ? 8 : 6));
    if (c >= 1) return threaded ? threads(c, steps, rest_fused) : chunks(c, steps);
    fail("plan '{}': the chunk size must be a whole number of models >= 1, e.g. {}:2", text,
         threaded ? "threads" : "chunk");
  }
  fail(
      "unknown plan '{}': choose auto, fused, chunk:C (C models at a time), threads or threads:C "
      "(each thread its own models, C at a time; +fused: an even share each, the rest fused "
      "after), the last three optionally with /K (K steps per visit of a group), or "
      "threads:1+balanced/K (visits cut into a part per thread, taken in turn)",
      text);
}

std::string ExecutionPlan::str() const {
  const std::string per_visit = steps > 1 ? fmt::format("/{}", steps) : "";
  switch (kind) {
    case Kind::kFused:
      return "fused";
    case Kind::kChunk:
      return fmt::format("chunk:{}{}", chunk, per_visit);
    case Kind::kThreads:
      return (chunk > 0 ? fmt::format("threads:{}", chunk) : "threads") +
             (rest_fused ? "+fused" : "") + (balanced ? "+balanced" : "") + per_visit;
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
      if (plan.balanced) {
        const int64_t w = std::clamp<int64_t>(threads, 1, B);
        for (int64_t b = 0; b < B; ++b) layout.groups.push_back({b, 1, static_cast<int>(b % w)});
        layout.workers = static_cast<int>(w);
        layout.balanced = B > 1;
        layout.parts = std::min<int64_t>(w, std::max<int64_t>(1, plan.steps));
        break;
      }
      // Contiguous blocks as even as possible: worker w owns [w*B/W, (w+1)*B/W). With +fused,
      // each worker owns B/W models ([w*q, (w+1)*q)) and the B mod W after them are one group
      // that runs fused once the workers are done.
      const int64_t w = std::clamp<int64_t>(threads, 1, B);
      const int64_t even = B / w * w;
      const bool rest = plan.rest_fused && even < B;
      const int64_t shared = rest ? even : B;
      for (int64_t i = 0; i < w; ++i) {
        const int64_t lo = i * shared / w, hi = (i + 1) * shared / w;
        const int64_t c = plan.chunk > 0 ? plan.chunk : hi - lo;
        for (int64_t first = lo; first < hi; first += c)
          layout.groups.push_back({first, std::min(c, hi - first), static_cast<int>(i)});
      }
      if (rest) layout.groups.push_back({even, B - even, PlanGroup::kAfterWorkers});
      layout.workers = static_cast<int>(w);
      break;
    }
  }
  layout.steps_per_visit = layout.is_fused() ? 1 : std::max<int64_t>(1, plan.steps);
  return layout;
}

void require_one_step_per_visit(const ExecutionPlan& plan, std::string_view array) {
  HFTA_CHECK(plan.steps == 1,
             "plan {}: {} arrays take one step per visit of a group (classifiers take /K): drop "
             "the /{}",
             plan.str(), array, plan.steps);
}

namespace {

// body(w) for each worker w on its own OpenMP thread, with one thread inside (ops run inline).
// A worker's exception is kept, `on_error` told of it (others may be waiting on that worker), and
// the first rethrown once every worker has stopped.
void on_workers(int workers, const std::function<void(int w)>& body,
                const std::function<void()>& on_error = {}) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(workers));
#pragma omp parallel num_threads(workers)
  {
    omp_set_num_threads(1);
    const int w = omp_get_thread_num();
    try {
      body(w);
    } catch (...) {
      errors[static_cast<size_t>(w)] = std::current_exception();
      if (on_error) on_error();
    }
  }
  for (auto& error : errors)
    if (error) std::rethrow_exception(error);
}

// The workers' groups, each worker's in order.
void run_workers(const PlanLayout& layout, const std::function<void(size_t g)>& run_group) {
  on_workers(layout.workers, [&](int w) {
    for (size_t g = 0; g < layout.groups.size(); ++g)
      if (layout.groups[g].worker == w) run_group(g);
  });
}

}  // namespace

void run_plan_groups(const PlanLayout& layout, const std::function<void(size_t g)>& run_group) {
  if (layout.workers == 1) {
    for (size_t g = 0; g < layout.groups.size(); ++g) run_group(g);
    return;
  }
  run_workers(layout, run_group);
  for (size_t g = 0; g < layout.groups.size(); ++g)
    if (layout.groups[g].worker == PlanGroup::kAfterWorkers) run_group(g);
}

void run_balanced_parts(
    const PlanLayout& layout, int64_t steps,
    const std::function<void(size_t g, int worker, int64_t first, int64_t end)>& run_part) {
  const int64_t groups = static_cast<int64_t>(layout.groups.size());
  const int64_t parts = std::clamp<int64_t>(layout.parts, 1, std::max<int64_t>(steps, 1));
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  // Parts of each group ended so far: part p of group g waits for done[g] == p.
  std::vector<std::atomic<int64_t>> done(static_cast<size_t>(groups));
  for (auto& d : done) d.store(0);
  on_workers(
      layout.workers,
      [&](int w) {
        for (int64_t t = next.fetch_add(1); t < groups * parts && !failed.load();
             t = next.fetch_add(1)) {
          const int64_t part = t / groups;
          const size_t g = static_cast<size_t>(t % groups);
          // Its part before was handed out `groups` parts earlier and has usually ended; a part
          // takes milliseconds, so a short wait yields the core rather than spinning on it.
          while (done[g].load(std::memory_order_acquire) < part && !failed.load())
            std::this_thread::yield();
          if (failed.load()) break;
          run_part(g, w, part * steps / parts, (part + 1) * steps / parts);
          done[g].store(part + 1, std::memory_order_release);
        }
      },
      [&] { failed.store(true); });
}

}  // namespace hfta
