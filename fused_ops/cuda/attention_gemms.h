// The fused attention's GEMMs in cuBLAS's column-major terms: one place for the mapping, issued by
// fused_ops/cuda/attention.cpp to cublasSgemmStridedBatched and run by
// tests/cuda/test_cuda_attention.cpp through a naive column-major GEMM on the host, so the operand
// mapping is checked against the reference without a GPU. No vendor header.
//
//   qkv, dqkv [B*n, T, 3D] (q, k, v at column offsets 0, D, 2D; head h at h*dh)
//   out, dout [B*n, T, D]  probs, weights (probs * mask), ds [B*n, H, T, T]
//
// A row-major [R, C] matrix with row stride ld is a column-major [C, R] one with leading dimension
// ld, so each product of one (sequence, head) problem is computed transposed, operands swapped:
//   scores  S^T  = K Q^T * scale   gemm(T, N, m=T,  n=T, k=dh)  A = K (ld 3D), B = Q (ld 3D)
//   out     O^T  = V^T W^T         gemm(N, N, m=dh, n=T, k=T)   A = V (ld 3D), B = W (ld T)
//   dV      dV^T = dO^T W          gemm(N, T, m=dh, n=T, k=T)   A = dO (ld D), B = W (ld T)
//   dP      dP^T = V dO^T          gemm(T, N, m=T,  n=T, k=dh)  A = V (ld 3D), B = dO (ld D)
//   dQ      dQ^T = K^T dS^T scale  gemm(N, N, m=dh, n=T, k=T)   A = K (ld 3D), B = dS (ld T)
//   dK      dK^T = Q^T dS scale    gemm(N, T, m=dh, n=T, k=T)   A = Q (ld 3D), B = dS (ld T)
// A head's slices are not a fixed stride apart from the next sequence's, so each GEMM is H
// strided-batched calls (one per head) over the B*n sequences; in deterministic mode
// (core/determinism.h) B*H calls, each over one model's n sequences: the calls a single model
// makes, so cuBLAS's choice of kernel cannot depend on B.
#pragma once

#include <cstdint>

#include "fused_ops/attention.h"
#include "fused_ops/cuda/linear_gemms.h"

namespace hfta::cuda {

// A ColumnMajorGemm with its alpha (the score scale), for issue(const AttentionGemm&).
struct AttentionGemm {
  ColumnMajorGemm g;
  float alpha = 1.0f;
};

namespace detail {

// `g` (for sequence 0, head 0, strides per sequence) for every head: the operands of head h start
// h * head_a / head_b / head_c floats further; over all B*n sequences, or per model.
template <typename Issue>
void issue_per_head(const AttentionParams& p, const AttentionGemm& g, int64_t head_a,
                    int64_t head_b, int64_t head_c, bool per_model, Issue&& issue) {
  const int64_t models = per_model ? p.B : 1, sequences = per_model ? p.n : p.B * p.n;
  for (int64_t b = 0; b < models; ++b)
    for (int64_t h = 0; h < p.H; ++h) {
      AttentionGemm one = g;
      one.g.a += b * sequences * g.g.stride_a + h * head_a;
      one.g.b += b * sequences * g.g.stride_b + h * head_b;
      one.g.c += b * sequences * g.g.stride_c + h * head_c;
      one.g.batch = sequences;
      issue(one);
    }
}

}  // namespace detail

// The tensors of the GEMMs: weights is probs, or probs * mask under dropout; ds holds dP and,
// after the softmax's backward, dS.
struct AttentionGemmArgs {
  const float* qkv = nullptr;
  float* probs = nullptr;  // forward's scores are written here, then turned into probabilities
  const float* weights = nullptr;
  float* out = nullptr;
  const float* dout = nullptr;
  float* ds = nullptr;
  float* dqkv = nullptr;
  bool accumulate_dx = false;
};

// Forward, first: scores into probs (scaled by 1/sqrt(dh)).
template <typename Issue>
void attention_score_gemms(const AttentionParams& p, const AttentionGemmArgs& a, bool per_model,
                           Issue&& issue) {
  const int64_t T = p.T, D = p.D, dh = p.head_dim(), TT = T * T;
  detail::issue_per_head(p,
                         {.g = {.transpose_a = true,
                                .m = T,
                                .n = T,
                                .k = dh,
                                .a = a.qkv + D,
                                .lda = 3 * D,
                                .stride_a = T * 3 * D,
                                .b = a.qkv,
                                .ldb = 3 * D,
                                .stride_b = T * 3 * D,
                                .c = a.probs,
                                .ldc = T,
                                .stride_c = p.H * TT},
                          .alpha = p.score_scale()},
                         dh, dh, TT, per_model, issue);
}

// Forward, last: out = weights V.
template <typename Issue>
void attention_output_gemms(const AttentionParams& p, const AttentionGemmArgs& a, bool per_model,
                            Issue&& issue) {
  const int64_t T = p.T, D = p.D, dh = p.head_dim(), TT = T * T;
  detail::issue_per_head(p,
                         {.g = {.m = dh,
                                .n = T,
                                .k = T,
                                .a = a.qkv + 2 * D,
                                .lda = 3 * D,
                                .stride_a = T * 3 * D,
                                .b = a.weights,
                                .ldb = T,
                                .stride_b = p.H * TT,
                                .c = a.out,
                                .ldc = D,
                                .stride_c = T * D}},
                         dh, TT, dh, per_model, issue);
}

// Backward, first: dV (written or added) from the weights, then dP into ds.
template <typename Issue>
void attention_dv_dp_gemms(const AttentionParams& p, const AttentionGemmArgs& a, bool per_model,
                           Issue&& issue) {
  const int64_t T = p.T, D = p.D, dh = p.head_dim(), TT = T * T;
  const float beta = a.accumulate_dx ? 1.0f : 0.0f;
  detail::issue_per_head(p,
                         {.g = {.transpose_b = true,
                                .m = dh,
                                .n = T,
                                .k = T,
                                .a = a.dout,
                                .lda = D,
                                .stride_a = T * D,
                                .b = a.weights,
                                .ldb = T,
                                .stride_b = p.H * TT,
                                .beta = beta,
                                .c = a.dqkv + 2 * D,
                                .ldc = 3 * D,
                                .stride_c = T * 3 * D}},
                         dh, TT, dh, per_model, issue);
  detail::issue_per_head(p,
                         {.g = {.transpose_a = true,
                                .m = T,
                                .n = T,
                                .k = dh,
                                .a = a.qkv + 2 * D,
                                .lda = 3 * D,
                                .stride_a = T * 3 * D,
                                .b = a.dout,
                                .ldb = D,
                                .stride_b = T * D,
                                .c = a.ds,
                                .ldc = T,
                                .stride_c = p.H * TT}},
                         dh, dh, TT, per_model, issue);
}

// Backward, last: dQ and dK from dS (written or added).
template <typename Issue>
void attention_dq_dk_gemms(const AttentionParams& p, const AttentionGemmArgs& a, bool per_model,
                           Issue&& issue) {
  const int64_t T = p.T, D = p.D, dh = p.head_dim(), TT = T * T;
  const float beta = a.accumulate_dx ? 1.0f : 0.0f;
  detail::issue_per_head(p,
                         {.g = {.m = dh,
                                .n = T,
                                .k = T,
                                .a = a.qkv + D,
                                .lda = 3 * D,
                                .stride_a = T * 3 * D,
                                .b = a.ds,
                                .ldb = T,
                                .stride_b = p.H * TT,
                                .beta = beta,
                                .c = a.dqkv,
                                .ldc = 3 * D,
                                .stride_c = T * 3 * D},
                          .alpha = p.score_scale()},
                         dh, TT, dh, per_model, issue);
  detail::issue_per_head(p,
                         {.g = {.transpose_b = true,
                                .m = dh,
                                .n = T,
                                .k = T,
                                .a = a.qkv,
                                .lda = 3 * D,
                                .stride_a = T * 3 * D,
                                .b = a.ds,
                                .ldb = T,
                                .stride_b = p.H * TT,
                                .beta = beta,
                                .c = a.dqkv + D,
                                .ldc = 3 * D,
                                .stride_c = T * 3 * D},
                          .alpha = p.score_scale()},
                         dh, TT, dh, per_model, issue);
}

}  // namespace hfta::cuda
