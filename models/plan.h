// Execution plans: the order in which the B models of an array run a training step. Every plan
// computes the same thing (each model exactly as alone); they differ in speed and memory.
//
//   fused     one call per op for all B models, every thread inside each op (activations for B)
//   chunk:C   models in chunks of C, depth-first: forward and backward of one chunk, then the
//             next, on one set of activations sized for C (activation memory / (B / C))
//   threads   each thread owns whole models end to end (B / threads of them, fused among
//             themselves), with no barrier inside the step: concurrent training inside one
//             process, sharing the minibatch
//   threads:C the same, each thread running its models C at a time depth-first (threads:1: a
//             model's working set per thread, as B processes have)
//   threads+fused, threads:C+fused
//             the same with an even share of B / threads models per thread; the B mod threads
//             models left over then run fused, every thread inside each op, once the workers
//             are done (3 models on 2 threads: one each, then the third on both, instead of a
//             thread idling while the other runs its second model)
//   threads:1+balanced/K
//             each thread one model at a time, but no model is a thread's own: every model's
//             visit of K steps is cut into one part per thread (K / threads steps each), and the
//             threads take the B x threads parts from one queue in turn, part by part, a part
//             starting once its model's part before is done. Each thread then runs B parts of a
//             visit whatever B is (5 models on 2 threads: 5 parts each, where threads:1 gives one
//             thread 3 models and the other 2, and threads:1+fused runs the fifth on both threads,
//             which a small model uses poorly), as B processes share the cores by time slices
//   auto      chosen per model and machine by timing a few steps (run/plan_choice.h)
//
// chunk:C/K, threads/K and threads:C/K (and the +fused variants) visit each group for K steps in a
// row, on K minibatches, before the next group (each model still sees the batches in order): a
// group's parameters, gradients and optimizer state stay in cache for K steps, as a process keeps
// its own through its time slice, instead of coming back from memory once per step when a worker's
// groups together outgrow the caches. The training loop hands the model K batches at a time; a
// step's report, metrics and checkpoints are as without /K (checkpoints fall at the ends of
// visits).
//
// The parameters, gradients and buffers of all B models stay in one [B, ...] arena either way,
// so the optimizer, checkpoints and extract see the same array whatever the plan.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace hfta {

struct ExecutionPlan {
  enum class Kind { kFused, kChunk, kThreads, kAuto };
  Kind kind = Kind::kFused;
  int64_t chunk = 0;        // kChunk: models per chunk; kThreads: per chunk of a thread (0: all)
  int64_t steps = 1;        // steps per visit of a group (the /K); 1 for fused and auto
  bool rest_fused = false;  // kThreads: the models beyond an even share run fused ("+fused")
  bool balanced = false;    // threads:1 only: visits cut into parts any thread takes ("+balanced")

  // "fused", "chunk:C" (C >= 1), "threads", "threads:C" or "auto", the threads plans optionally
  // followed by "+fused", the chunk and threads plans by "/K" (K >= 1 steps per visit), and
  // "threads:1+balanced/K" (K >= 2); throws hfta::Error naming the choices.
  static ExecutionPlan parse(const std::string& text);
  static ExecutionPlan fused() { return {}; }
  static ExecutionPlan chunks(int64_t c, int64_t steps = 1) { return {Kind::kChunk, c, steps}; }
  static ExecutionPlan threads(int64_t c = 0, int64_t steps = 1, bool rest_fused = false) {
    return {Kind::kThreads, c, steps, rest_fused};
  }
  static ExecutionPlan balanced_threads(int64_t steps) {
    return {Kind::kThreads, 1, steps, false, true};
  }
  std::string str() const;
  bool operator==(const ExecutionPlan&) const = default;
};

// One group of models that runs as a fused sub-array: models [first, first + count), on
// worker `worker` (0 unless the plan runs workers in parallel), or, with worker -1 (kAfterWorkers,
// a +fused plan's leftover models), after every worker is done, on the calling thread with all
// threads inside its ops.
struct PlanGroup {
  static constexpr int kAfterWorkers = -1;
  int64_t first = 0;
  int64_t count = 0;
  int worker = 0;
};

// How `plan` splits an array of B models over `threads` threads: its groups, in the order each
// worker runs them, and the number of workers running at once. A plan that amounts to fused
// (chunk:C with C >= B, threads with one thread or one model) gives one group of B on one worker
// and one step per visit. Throws hfta::Error for kAuto (resolve it first).
struct PlanLayout {
  std::vector<PlanGroup> groups;
  int workers = 1;
  int64_t steps_per_visit = 1;  // the plan's /K (1 when fused)
  // +balanced: the groups (one model each, on worker b mod workers only to say which workers
  // exist) run in parts that any worker takes (run_balanced_parts), each visit cut into `parts`.
  bool balanced = false;
  int64_t parts = 1;
  bool is_fused() const { return groups.size() == 1; }
};
PlanLayout lay_out(const ExecutionPlan& plan, int64_t B, int threads);

// Arrays whose training loops hand over one minibatch at a time (GANs, language models) take
// only plans of one step per visit: throws hfta::Error naming `array` for a /K plan.
void require_one_step_per_visit(const ExecutionPlan& plan, std::string_view array);

// Runs run_group(g) for every group g of the layout: in order on the calling thread with one
// worker, else each worker's groups in order on its own OpenMP thread, with every op inside
// single-threaded (no barrier between the workers until all are done), then the groups that run
// after the workers (PlanGroup::kAfterWorkers) in order on the calling thread. The first
// exception of any worker is rethrown after all have stopped.
void run_plan_groups(const PlanLayout& layout, const std::function<void(size_t g)>& run_group);

// A +balanced layout's visit of `steps` steps: every group's steps cut into min(layout.parts,
// steps) parts of consecutive steps, run_part(g, worker, first, end) for each part [first, end)
// of each group g, taken by the workers from one queue in part order (every group's first part,
// then every group's second, ...), a part starting only once its group's part before has ended.
// Workers as in run_plan_groups (each on its own OpenMP thread, ops single-threaded inside); a
// worker's exception stops the others at their next part and is rethrown after all have stopped.
void run_balanced_parts(
    const PlanLayout& layout, int64_t steps,
    const std::function<void(size_t g, int worker, int64_t first, int64_t end)>& run_part);

}  // namespace hfta
