// The fused linear's GEMMs in cuBLAS's column-major terms, one place for the row-major to
// column-major mapping: fused_ops/cuda/linear.cpp issues them to cublasSgemmStridedBatched, and
// tests/cuda/test_cuda_linear.cpp runs them through a naive column-major GEMM on the CPU, so the
// mapping is checked against the reference on machines without a GPU. No vendor header.
//
//   x [B, N, Fi] (or [N, Fi] shared)   weight [B, Fi, Fo]   y, dy [B, N, Fo]
//
// A row-major [R, C] matrix is a column-major [C, R] one (its transpose) with the same leading
// dimension C. So row-major Y = X W is computed as column-major Y^T = W^T X^T: the operands swap
// places and nothing is transposed in memory.
//   forward   y_b^T   = W_b^T x_b^T        gemm(N, N, m=Fo, n=N,  k=Fi)
//   dx        dx_b^T  = W_b dy_b^T         gemm(T, N, m=Fi, n=N,  k=Fo)
//   dweight   dW_b^T += dy_b^T x_b         gemm(N, T, m=Fo, n=Fi, k=N)
// A shared input is read with stride 0 between models. Its gradient sums over the models: B GEMMs
// into one dx, one after another in model order (as cpu/linear.cpp), so the sum's order is fixed.
#pragma once

#include <cstdint>

#include "fused_ops/linear.h"

namespace hfta::cuda {

// C_i = op(A_i) op(B_i) + beta C_i for i in [0, batch), column-major, alpha = 1; X_i = X + i *
// stride_x. op(A) is m x k, op(B) k x n, C m x n.
struct ColumnMajorGemm {
  bool transpose_a = false, transpose_b = false;
  int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const float* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  float beta = 0.0f;  // 0: C is not read (it may hold garbage)
  float* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  int64_t batch = 1;
};

// `g` as one call per batch entry (batch 1, each operand offset by its stride), in entry order:
// deterministic mode's way (core/determinism.h), so that model b's products are the calls its run
// alone (B = 1) makes, whatever kernel cuBLAS would pick for a larger batch. C must not be shared
// between entries (stride_c > 0 when batch > 1), as a strided-batched call requires anyway.
template <typename Issue>
void issue_per_entry(const ColumnMajorGemm& g, Issue&& issue) {
  for (int64_t i = 0; i < g.batch; ++i) {
    ColumnMajorGemm one = g;
    one.a += i * g.stride_a;
    one.b += i * g.stride_b;
    one.c += i * g.stride_c;
    one.batch = 1;
    issue(one);
  }
}

// The forward's GEMM, given to issue(const ColumnMajorGemm&). With bias, y must already hold the
// bias (beta = 1).
template <typename Issue>
void linear_forward_gemms(const LinearParams& p, const LinearForwardArgs& a, Issue&& issue) {
  const int64_t N = p.N, fi = p.in_features, fo = p.out_features;
  issue(ColumnMajorGemm{.m = fo,
                        .n = N,
                        .k = fi,
                        .a = a.weight.data,
                        .lda = fo,
                        .stride_a = fi * fo,
                        .b = a.x.data,
                        .ldb = fi,
                        .stride_b = p.shared_input ? 0 : N * fi,
                        .beta = p.bias ? 1.0f : 0.0f,
                        .c = a.y.data,
                        .ldc = fo,
                        .stride_c = N * fo,
                        .batch = p.B});
}

// The backward's GEMMs (dx, then dweight; those wanted), in order. The bias gradient is not a
// GEMM.
template <typename Issue>
void linear_backward_gemms(const LinearParams& p, const LinearBackwardArgs& a, Issue&& issue) {
  const int64_t N = p.N, fi = p.in_features, fo = p.out_features;
  const float dx_beta = a.accumulate_dx ? 1.0f : 0.0f;
  const ColumnMajorGemm dx{.transpose_a = true,
                           .m = fi,
                           .n = N,
                           .k = fo,
                           .a = a.weight.data,
                           .lda = fo,
                           .stride_a = fi * fo,
                           .b = a.dy.data,
                           .ldb = fo,
                           .stride_b = N * fo,
                           .beta = dx_beta,
                           .c = a.dx.data,
                           .ldc = fi,
                           .stride_c = N * fi,
                           .batch = p.B};
  if (!a.dx.empty() && p.shared_input) {
    for (int64_t b = 0; b < p.B; ++b) {
      ColumnMajorGemm one = dx;
      one.a += b * dx.stride_a;
      one.b += b * dx.stride_b;
      one.beta = b == 0 ? dx_beta : 1.0f;
      one.stride_c = 0;
      one.batch = 1;
      issue(one);
    }
  } else if (!a.dx.empty()) {
    issue(dx);
  }
  if (!a.dweight.empty())
    issue(ColumnMajorGemm{.transpose_b = true,
                          .m = fo,
                          .n = fi,
                          .k = N,
                          .a = a.dy.data,
                          .lda = fo,
                          .stride_a = N * fo,
                          .b = a.x.data,
                          .ldb = fi,
                          .stride_b = p.shared_input ? 0 : N * fi,
                          .beta = 1.0f,
                          .c = a.dweight.data,
                          .ldc = fo,
                          .stride_c = fi * fo,
                          .batch = p.B});
}

}  // namespace hfta::cuda
