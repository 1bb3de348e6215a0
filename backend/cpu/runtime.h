// CPU runtime: one OpenMP thread count for hfta, oneDNN and OpenBLAS, the oneDNN engine and
// stream, and a row-major sgemm wrapper. The only header outside backend/cpu that callers need.
#pragma once

#include <cstdint>
#include <string>

namespace hfta::cpu {

// Program start-up for every hfta executable: fixes OpenBLAS's kernel choice on CPUs its
// DYNAMIC_ARCH table does not know (see runtime.cpp), then sets the thread count. May re-execute
// the program once with OPENBLAS_CORETYPE set; call it first thing in main().
void init_runtime(char** argv, int threads);

// Sets the thread count for OpenMP and OpenBLAS together (0 = leave the default).
void set_num_threads(int threads);
// One line naming the loaded OpenBLAS build, oneDNN version and OpenMP threads, for start-up logs.
std::string describe_runtime();

// Which library runs sgemm(). oneDNN's JIT sgemm is the default: on the small per-model GEMMs of
// fused layers (e.g. 64x784x256) it measured up to several times faster than OpenBLAS 0.3.21, and
// its JIT always uses the CPU's widest vectors (benchmarks/op_bench gemm=openblas|onednn compares
// them; numbers in docs/benchmarks.md). HFTA_GEMM=openblas selects OpenBLAS.
enum class GemmBackend { kOneDnn, kOpenBlas };
void set_gemm_backend(GemmBackend backend);
GemmBackend gemm_backend();

// How ops that loop over models use the threads: one model per thread (kAcrossModels), all
// threads inside each model's call (kInsideOp), or the op's own measured rule (kAuto).
// HFTA_PARALLELISM=models|inside overrides; benchmarks/op_bench par=... compares them.
enum class ModelParallelism { kAuto, kAcrossModels, kInsideOp };
void set_model_parallelism(ModelParallelism mode);
ModelParallelism model_parallelism();

// Row-major C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, with leading dimensions.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// Always OpenBLAS, whatever gemm_backend() says (one of the two sgemms peak.h measures).
void openblas_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                    int64_t ldc);

}  // namespace hfta::cpu
