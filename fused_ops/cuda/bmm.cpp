// CUDA fused bmm (the contract is fused_ops/bmm.h): the GEMMs of bmm_gemms.h (where the
// row-major to column-major mapping is written down) through cublasSgemmStridedBatched. fp32
// throughout, no TF32 (backend/cuda/runtime.cpp).
#include "fused_ops/bmm.h"

#include <limits>

#include "backend/cuda/cublas.h"
#include "backend/cuda/runtime.h"
#include "core/determinism.h"
#include "fused_ops/cuda/bmm_gemms.h"

namespace hfta::cuda {

namespace {

// cuBLAS takes 32-bit sizes, leading dimensions and batch counts (64-bit strides).
int blas_int(int64_t v, const char* what) {
  HFTA_CHECK(v <= std::numeric_limits<int>::max(),
             "CUDA bmm: {} = {} is beyond cuBLAS's 32-bit sizes: use fewer points per sample, "
             "fewer samples or fewer models",
             what, v);
  return static_cast<int>(v);
}

void issue(const ColumnMajorGemm& g) {
  const float one = 1.0f;
  HFTA_CUDA_CHECK(cublas().sgemm_strided_batched(
      blas(), g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      blas_int(g.m, "m"), blas_int(g.n, "n"), blas_int(g.k, "k"), &one, g.a, blas_int(g.lda, "lda"),
      g.stride_a, g.b, blas_int(g.ldb, "ldb"), g.stride_b, &g.beta, g.c, blas_int(g.ldc, "ldc"),
      g.stride_c, blas_int(g.batch, "the batch of B*N problems")));
}

}  // namespace

void bmm_forward(const BmmParams& p, const BmmForwardArgs& a) {
  bmm_forward_gemms(p, a, deterministic(), issue);
}

void bmm_backward(const BmmParams& p, const BmmBackwardArgs& a) {
  bmm_backward_gemms(p, a, deterministic(), issue);
}

}  // namespace hfta::cuda
