// The fused bmm's GEMMs in cuBLAS's column-major terms (linear_gemms.h's ColumnMajorGemm): one
// place for the mapping, issued by fused_ops/cuda/bmm.cpp to cublasSgemmStridedBatched and run
// by tests/cuda/test_cuda_bmm.cpp through a naive column-major GEMM on the host, so the operand
// mapping is checked against the reference without a GPU. No vendor header.
//
//   x [P, L, K]   t [P, K, M]   y, dy [P, L, M]   (P = B*N problems, each contiguous)
//
// A row-major [R, C] matrix is a column-major [C, R] one with leading dimension C, so each
// row-major product is computed transposed, operands swapped:
//   forward   y^T  = t^T x^T     gemm(N, N, m=M, n=L, k=K)   A = t (ld M), B = x (ld K)
//   dx        dx^T = t dy^T      gemm(T, N, m=K, n=L, k=M)   A = t (ld M), B = dy (ld M)
//   dt        dt^T = dy^T x      gemm(N, T, m=M, n=K, k=L)   A = dy (ld M), B = x (ld K)
// Every problem is independent, so one strided-batched GEMM covers all B*N of them. In
// deterministic mode (core/determinism.h) each model gets a call of its own (batch N), the call
// a single model makes, so cuBLAS's choice of kernel cannot depend on B.
#pragma once

#include <cstdint>

#include "fused_ops/bmm.h"
#include "fused_ops/cuda/linear_gemms.h"

namespace hfta::cuda {

namespace detail {

// `g` over all B*N problems, or as B calls of N problems each when per_model.
template <typename Issue>
void issue_bmm(const BmmParams& p, const ColumnMajorGemm& g, bool per_model, Issue&& issue) {
  if (!per_model) {
    ColumnMajorGemm all = g;
    all.batch = p.B * p.N;
    issue(all);
    return;
  }
  for (int64_t b = 0; b < p.B; ++b) {
    ColumnMajorGemm one = g;
    one.a += b * p.N * g.stride_a;
    one.b += b * p.N * g.stride_b;
    one.c += b * p.N * g.stride_c;
    one.batch = p.N;
    issue(one);
  }
}

}  // namespace detail

template <typename Issue>
void bmm_forward_gemms(const BmmParams& p, const BmmForwardArgs& a, bool per_model, Issue&& issue) {
  const int64_t L = p.L, K = p.K, M = p.M;
  detail::issue_bmm(p,
                    ColumnMajorGemm{.m = M,
                                    .n = L,
                                    .k = K,
                                    .a = a.t.data,
                                    .lda = M,
                                    .stride_a = K * M,
                                    .b = a.x.data,
                                    .ldb = K,
                                    .stride_b = L * K,
                                    .beta = 0.0f,
                                    .c = a.y.data,
                                    .ldc = M,
                                    .stride_c = L * M},
                    per_model, issue);
}

// dx, then dt (those wanted), each written or added to by its own flag (beta 0 or 1).
template <typename Issue>
void bmm_backward_gemms(const BmmParams& p, const BmmBackwardArgs& a, bool per_model,
                        Issue&& issue) {
  const int64_t L = p.L, K = p.K, M = p.M;
  if (!a.dx.empty())
    detail::issue_bmm(p,
                      ColumnMajorGemm{.transpose_a = true,
                                      .m = K,
                                      .n = L,
                                      .k = M,
                                      .a = a.t.data,
                                      .lda = M,
                                      .stride_a = K * M,
                                      .b = a.dy.data,
                                      .ldb = M,
                                      .stride_b = L * M,
                                      .beta = a.accumulate_dx ? 1.0f : 0.0f,
                                      .c = a.dx.data,
                                      .ldc = K,
                                      .stride_c = L * K},
                      per_model, issue);
  if (!a.dt.empty())
    detail::issue_bmm(p,
                      ColumnMajorGemm{.transpose_b = true,
                                      .m = M,
                                      .n = K,
                                      .k = L,
                                      .a = a.dy.data,
                                      .lda = M,
                                      .stride_a = L * M,
                                      .b = a.x.data,
                                      .ldb = K,
                                      .stride_b = L * K,
                                      .beta = a.accumulate_dt ? 1.0f : 0.0f,
                                      .c = a.dt.data,
                                      .ldc = M,
                                      .stride_c = K * M},
                      per_model, issue);
}

}  // namespace hfta::cuda
