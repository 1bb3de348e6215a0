// CPU runtime: one OpenMP thread count for hfta, oneDNN and OpenBLAS, the oneDNN engine and
// stream, and a row-major sgemm wrapper. The only header outside backend/cpu that callers need.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace hfta::cpu {

// Program start-up for every hfta executable: fixes OpenBLAS's kernel choice on CPUs its
// DYNAMIC_ARCH table does not know (see runtime.cpp), then sets the thread count. May re-execute
// the program once with OPENBLAS_CORETYPE set; call it first thing in main().
void init_runtime(char** argv, int threads);

// Sets the thread count for OpenMP and OpenBLAS together (0 = leave the default). sgemm still
// runs OpenBLAS on one thread per call (see sgemm_blocks_are_exact).
void set_num_threads(int threads);
// The two sgemm libraries' builds: OpenBLAS's configuration and kernel set in use ("Zen",
// "SkylakeX"; OPENBLAS_CORETYPE can force one) and oneDNN's version.
std::string describe_gemm_libraries();
// One line naming the loaded OpenBLAS build, oneDNN version and OpenMP threads, for start-up logs.
std::string describe_runtime();

// Which library runs sgemm(), per transposition case (fused layers: forward NN, input gradient
// NT, weight gradient TN). oneDNN's JIT sgemm is the default: on the small per-model GEMMs of
// fused layers (e.g. 64x784x256) on AVX-512 CPUs it measured up to several times faster than
// OpenBLAS 0.3.21, and its JIT always uses the CPU's widest vectors; on an AVX2-only Zen 3
// OpenBLAS's weight gradients were up to 2x faster (numbers in docs/benchmarks.md, "Which sgemm
// library"). The hfta commands time both once per machine and route NT and TN to the faster
// (run/plan_cache.h, choose_gemm_library); NN stays on oneDNN, whose blocks are exact
// (sgemm_blocks_are_exact). HFTA_GEMM=onednn|openblas names one library for every case.
enum class GemmBackend { kOneDnn, kOpenBlas };
// The library of each case, indexed by gemm_case(trans_a, trans_b): NN, NT, TN, TT.
using GemmRouting = std::array<GemmBackend, 4>;
constexpr size_t gemm_case(bool trans_a, bool trans_b) { return 2 * trans_a + trans_b; }
void set_gemm_routing(const GemmRouting& routing);
GemmRouting gemm_routing();
// Every case to one library.
void set_gemm_backend(GemmBackend backend);
// "oneDNN" when one library runs every case, else e.g. "oneDNN (NN, TT) and OpenBLAS (NT, TN)".
std::string describe_gemm_routing(const GemmRouting& routing);

// How ops that loop over models use the threads: one model per thread (kAcrossModels), all
// threads inside each model's call (kInsideOp), or the op's own measured rule (kAuto).
// HFTA_PARALLELISM=models|inside overrides; benchmarks/op_bench par=... compares them.
enum class ModelParallelism { kAuto, kAcrossModels, kInsideOp };
void set_model_parallelism(ModelParallelism mode);
ModelParallelism model_parallelism();

// Whether the library's result for an element of C is the same however a GEMM of the case is
// cut into column blocks. oneDNN's sgemm: yes for NN (every shape measured, linear layers' among
// them), not for NT (a 32x160x960 NT product cut into two column blocks changed 4,292 of 5,120
// elements in the last bits on a Zen 5), so only NN says yes. OpenBLAS 0.3.21's: no (a 256x64x64
// product cut into two row blocks, or run on 2 threads, changed 10-20% of the elements in the
// last bit on a Zen 3), so OpenBLAS runs every GEMM as one single-threaded call, and
// fused_ops/cpu/linear.cpp cuts a forward GEMM into column blocks only when this holds: fused,
// serial and every plan then compute each model's GEMMs identically.
bool sgemm_blocks_are_exact(bool trans_a, bool trans_b);

// Whether oneDNN runs its AVX-512 kernels here (its effective ISA, which ONEDNN_MAX_CPU_ISA can
// lower). Ops whose choice between oneDNN and our own kernels was measured to differ between
// oneDNN's AVX-512 and AVX2 kernels ask it; the answer is the same for every B and plan.
bool onednn_has_avx512_kernels();

// oneDNN's sgemm on AVX2 runs a row-major NN product at about half its speed when B's rows lie a
// multiple of 2 KiB apart (ldb a multiple of 512 floats: linear layers with 512, 1024 or 2048
// outputs, pointwise convolutions over 32x32 planes) and B starts on a cache line, as parameters
// and activations in the arenas do (docs/benchmarks.md, "B rows 2 KiB apart"). sgemm() then copies
// B a panel of columns at a time into a buffer whose rows are not so aligned and multiplies panel
// by panel: NN column blocks are exact (sgemm_blocks_are_exact) and the copy's stride does not
// change oneDNN's result, so the bits are those of the direct call. Which products: where oneDNN
// runs the case, A is not transposed either, 32 <= m < 1024 and n >= 64 (outside those the copy
// measured no faster), and only without AVX-512 kernels (the only ones measured). The rule
// depends on the shape and the machine, never on B or the plan. kAlways and kNever (tests,
// op_bench) apply or skip the copy for every oneDNN NN product with such an ldb.
enum class SgemmPanels { kAuto, kAlways, kNever };
void set_sgemm_panels(SgemmPanels mode);
SgemmPanels sgemm_panels();
bool sgemm_copies_b_in_panels(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t ldb);
// The panel width for a K of `k`: a panel (k rows, width + 16 floats each) stays within about
// 2 MiB, the buffer each thread keeps for it.
int64_t sgemm_panel_width(int64_t k);

// Row-major C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, with leading dimensions.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// Always OpenBLAS, whatever gemm_routing() says (one of the two sgemms peak.h measures), on at
// most set_openblas_threads threads (1 unless measure_peak_gflops is measuring all of them).
void set_openblas_threads(int threads);
void openblas_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                    int64_t ldc);

}  // namespace hfta::cpu
