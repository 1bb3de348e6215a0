// CPU runtime: one OpenMP thread count for hfta, oneDNN and OpenBLAS, the oneDNN engine and
// stream, and a row-major sgemm wrapper. The only header outside backend/cpu that callers need.
#pragma once

#include <cstdint>
#include <string>

namespace hfta::cpu {

// Sets the thread count for OpenMP and OpenBLAS together (0 = leave the default).
void set_num_threads(int threads);
// One line naming the loaded OpenBLAS build, oneDNN version and OpenMP threads, for start-up logs.
std::string describe_runtime();

// Row-major C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, with leading dimensions.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
           const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
           int64_t ldc);

}  // namespace hfta::cpu
