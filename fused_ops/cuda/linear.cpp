// CUDA fused linear (the contract is fused_ops/linear.h): the GEMMs of linear_gemms.h (where the
// row-major to column-major mapping is written down) through cublasSgemmStridedBatched, and the
// bias kernels of linear_kernels.cu. fp32 throughout, no TF32 (backend/cuda/runtime.cpp).
#include "fused_ops/linear.h"

#include <limits>

#include "backend/cuda/cublas.h"
#include "backend/cuda/runtime.h"
#include "core/determinism.h"
#include "fused_ops/cuda/kernels.h"
#include "fused_ops/cuda/linear_gemms.h"

namespace hfta::cuda {

namespace {

// cuBLAS takes 32-bit sizes and leading dimensions (64-bit strides).
int blas_int(int64_t v, const char* what) {
  HFTA_CHECK(v <= std::numeric_limits<int>::max(),
             "CUDA linear: {} = {} is beyond cuBLAS's 32-bit sizes: split the layer or the batch",
             what, v);
  return static_cast<int>(v);
}

void issue(const ColumnMajorGemm& g) {
  const float one = 1.0f;
  HFTA_CUDA_CHECK(cublas().sgemm_strided_batched(
      blas(), g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      blas_int(g.m, "m"), blas_int(g.n, "n"), blas_int(g.k, "k"), &one, g.a, blas_int(g.lda, "lda"),
      g.stride_a, g.b, blas_int(g.ldb, "ldb"), g.stride_b, &g.beta, g.c, blas_int(g.ldc, "ldc"),
      g.stride_c, blas_int(g.batch, "B")));
}

// In deterministic mode one call per model (issue_per_entry): model b's bits as alone.
void issue_gemm(const ColumnMajorGemm& g) {
  if (deterministic())
    issue_per_entry(g, issue);
  else
    issue(g);
}

}  // namespace

void linear_forward(const LinearParams& p, const LinearForwardArgs& a) {
  if (p.bias)  // then the GEMM adds onto y (beta = 1); without bias it does not read y
    check(kernels::fill_bias(a.bias.data, a.y.data, p.B, p.N, p.out_features, stream()),
          "linear fill_bias kernel launch");
  linear_forward_gemms(p, a, issue_gemm);
}

void linear_backward(const LinearParams& p, const LinearBackwardArgs& a) {
  linear_backward_gemms(p, a, issue_gemm);
  if (p.bias && !a.dbias.empty()) {
    HFTA_CHECK(p.B <= 65535, "CUDA linear: B = {} models exceed the bias kernel's grid (65535)",
               p.B);
    check(kernels::bias_grad(a.dy.data, a.dbias.data, p.B, p.N, p.out_features, stream()),
          "linear bias_grad kernel launch");
  }
}

}  // namespace hfta::cuda
