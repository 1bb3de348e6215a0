// How ops whose work is a set of independent GEMM tasks (linear's per-model GEMMs, bmm's
// per-sample problems, the small-plane convolutions' models) use the threads: with at least as
// many tasks as threads, parallel_for spreads them over the threads and each task's GEMMs run
// single-threaded (both sgemm libraries run sequentially inside a parallel region), so no GEMM
// synchronizes inside and a task's operands stay in one core's cache; with fewer, the tasks run
// one after another and each GEMM uses every thread. HFTA_PARALLELISM=models|inside overrides the
// choice (backend/cpu/runtime.h, model_parallelism; op_bench par=... measures both sides).
#pragma once

#include <cstdint>

#include "backend/cpu/runtime.h"
#include "core/parallel.h"

namespace hfta::cpu {

// Tasks of unequal cost (kUneven) are handed out one at a time to whichever thread is free.
enum class GemmTasks { kEven, kUneven };

template <typename F>
void for_each_gemm_task(int64_t tasks, F&& task, GemmTasks kind = GemmTasks::kEven) {
  const ModelParallelism mode = model_parallelism();
  const bool across =
      mode == ModelParallelism::kAcrossModels ||
      (mode == ModelParallelism::kAuto && tasks >= num_threads() && num_threads() > 1);
  if (!across)
    for (int64_t i = 0; i < tasks; ++i) task(i);
  else if (kind == GemmTasks::kUneven)
    parallel_for_dynamic(tasks, task);
  else
    parallel_for(tasks, task);
}

}  // namespace hfta::cpu
