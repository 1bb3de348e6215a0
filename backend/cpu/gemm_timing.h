// Which sgemm library suits this CPU, per transposition case: oneDNN's JIT sgemm and OpenBLAS's,
// timed on the GEMMs the fused layers run. Neither wins everywhere: on AVX-512 Xeons and Zen 5
// oneDNN's small per-model GEMMs were up to several times faster, on an AVX2-only Zen 3 OpenBLAS's
// weight gradients (TN) were up to 2x faster (docs/benchmarks.md, "Which sgemm library").
// run/plan_choice.h remembers the choice per machine.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "backend/cpu/runtime.h"

namespace hfta::cpu {

// The cases timed and routed: the input gradient (NT) and the weight gradient (TN).
inline constexpr size_t kTimedGemmCases[] = {gemm_case(false, true), gemm_case(true, false)};

struct GemmCaseTiming {
  size_t gemm_case = 0;      // gemm_case(trans_a, trans_b)
  std::string shape;         // "TN N=64 784->256": the case, a layer's rows, in and out features
  double onednn_ms = 0.0;    // median over the rounds
  double openblas_ms = 0.0;  // the same with OpenBLAS
};

// Times both libraries on one thread (fused layers run one single-threaded GEMM per model and
// thread: kernels, not threading, differ) on each layer shape's input gradient (NT) and weight
// gradient (TN), in interleaved rounds so a neighbour's load slows both alike. NN is not timed: it
// stays on oneDNN (faster_gemm_routing). Takes about half a second on a current core; restores
// the thread count and routing after.
std::vector<GemmCaseTiming> time_gemm_libraries();

// OpenBLAS's total time over oneDNN's on the shapes of one case: a model made of one layer of
// each shape, where the large layers weigh most, as they do in a training step.
double openblas_time_ratio(const std::vector<GemmCaseTiming>& timings, size_t which);

// The routing: NT and TN on OpenBLAS when its time ratio for the case is below
// kOpenBlasWinsBelow (oneDNN where the two are close, so noise does not flip the choice), NN on
// oneDNN (linear's forward cuts it into exact column blocks when models are fewer than threads,
// see sgemm_blocks_are_exact), TT (no op runs it) on oneDNN.
inline constexpr double kOpenBlasWinsBelow = 0.95;
GemmRouting faster_gemm_routing(const std::vector<GemmCaseTiming>& timings);

// What the timing measures and how it decides ("6 shapes (N=64 784->256, ...), 3 rounds, OpenBLAS
// below 0.95"), for the cache key of its result: a build that times other shapes or decides
// otherwise measures again instead of reading an older build's choice.
std::string describe_gemm_timing();

// "onednn" / "openblas", the spelling of HFTA_GEMM and of the cache; parse_gemm_backend reads it
// back (throws on anything else, naming the accepted values).
const char* gemm_backend_name(GemmBackend backend);
GemmBackend parse_gemm_backend(const std::string& name);
// "NN", "NT", "TN", "TT".
const char* gemm_case_name(size_t which);

}  // namespace hfta::cpu
