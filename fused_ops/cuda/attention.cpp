// CUDA fused attention core (the contract is fused_ops/attention.h): the products are cuBLAS
// strided-batched GEMMs (attention_gemms.h: one call per head over every sequence of every model,
// or per model and head in deterministic mode), the softmax and its backward are warp-per-row
// kernels (attention_kernels.cu, attention_math.h). fp32 GEMMs without TF32
// (backend/cuda/runtime.cpp).
//
// Dropout: model b's mask is one sequential stream over its [n, H, T, T] probabilities, so it is
// drawn on the host exactly as the CPU op draws it (cpu::dropout_draw_mask, one model per host
// thread) into pinned staging memory and copied to saved.dropout_mask on the thread's stream, as
// the dropout op does (fused_ops/cuda/dropout.cpp). probs * mask, which the output GEMM and dV
// read, goes to the thread's device scratch (B*n*H*T*T floats); backward reuses that scratch for
// dP and dS once dV has read the weights (the stream orders them).
#include "fused_ops/cuda/attention.h"

#include <limits>

#include "backend/cuda/cublas.h"
#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "backend/cuda/scratch.h"
#include "core/determinism.h"
#include "fused_ops/cuda/attention_gemms.h"
#include "fused_ops/cuda/attention_kernels.h"
#include "fused_ops/dropout.h"

namespace hfta::cuda {

namespace {

// cuBLAS takes 32-bit sizes, leading dimensions and batch counts (64-bit strides).
int blas_int(int64_t v, const char* what) {
  HFTA_CHECK(v <= std::numeric_limits<int>::max(),
             "CUDA attention: {} = {} is beyond cuBLAS's 32-bit sizes: use fewer tokens, a "
             "narrower model or fewer sequences per call",
             what, v);
  return static_cast<int>(v);
}

void issue(const AttentionGemm& e) {
  const ColumnMajorGemm& g = e.g;
  HFTA_CUDA_CHECK(cublas().sgemm_strided_batched(
      blas(), g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      blas_int(g.m, "m"), blas_int(g.n, "n"), blas_int(g.k, "k"), &e.alpha, g.a,
      blas_int(g.lda, "lda"), g.stride_a, g.b, blas_int(g.ldb, "ldb"), g.stride_b, &g.beta, g.c,
      blas_int(g.ldc, "ldc"), g.stride_c, blas_int(g.batch, "the batch of sequences")));
}

int64_t probs_numel(const AttentionParams& p) { return p.B * p.n * p.H * p.T * p.T; }

void upload_dropout_mask(const AttentionParams& p, const AttentionForwardArgs& a) {
  // The calling thread's staging for masks: the next forward draws into it once this one's copy
  // has read it.
  thread_local PinnedStaging staging;
  const int64_t n = probs_numel(p);
  float* host_mask = staging.acquire(static_cast<size_t>(n) * sizeof(float));
  // Model b's mask over its [n, H, T, T] probs from streams[b], in that order: the attention's
  // dropout is the dropout op's draw over a model-major tensor of that size.
  cpu::dropout_draw_mask(DropoutParams::model_major(p.B, n / p.B, p.dropout_p, true), a.streams,
                         host_mask);
  copy_to_device_async(staging.buffer.view(p.probs_shape()), a.saved.dropout_mask);
  staging.copied.record();
}

}  // namespace

void attention_forward(const AttentionParams& p, const AttentionForwardArgs& a) {
  const bool dropout = p.dropout_active(), per_model = deterministic();
  const int64_t n = probs_numel(p);
  if (dropout) upload_dropout_mask(p, a);
  AttentionGemmArgs g{.qkv = a.qkv.data, .probs = a.saved.probs.data, .out = a.out.data};
  attention_score_gemms(p, g, per_model, issue);
  const attention_math::SoftmaxShape s{
      .rows = p.B * p.n * p.H * p.T,
      .n = p.n,
      .H = p.H,
      .T = p.T,
      .causal = p.causal,
      .pad32 = a.key_padding.empty() ? nullptr : a.key_padding.data,
      .pad8 = a.key_padding_u8.empty() ? nullptr : a.key_padding_u8.data};
  check(kernels::attention_softmax_forward(s, a.saved.probs.data, stream()),
        "attention softmax kernel launch");
  g.weights = a.saved.probs.data;
  if (dropout) {
    float* weights = device_scratch(n);
    check(kernels::attention_apply_mask(a.saved.probs.data, a.saved.dropout_mask.data, weights, n,
                                        stream()),
          "attention dropout kernel launch");
    g.weights = weights;
  }
  attention_output_gemms(p, g, per_model, issue);
}

void attention_backward(const AttentionParams& p, const AttentionBackwardArgs& a) {
  const bool dropout = p.dropout_active(), per_model = deterministic();
  const int64_t n = probs_numel(p);
  const float* mask = dropout ? a.saved.dropout_mask.data : nullptr;
  float* scratch = device_scratch(n);
  AttentionGemmArgs g{.qkv = a.qkv.data,
                      .weights = a.saved.probs.data,
                      .dout = a.dout.data,
                      .ds = scratch,
                      .dqkv = a.dqkv.data,
                      .accumulate_dx = a.accumulate_dx};
  if (dropout) {
    check(kernels::attention_apply_mask(a.saved.probs.data, mask, scratch, n, stream()),
          "attention dropout kernel launch");
    g.weights = scratch;  // read by dV before dP overwrites it (attention_dv_dp_gemms' order)
  }
  attention_dv_dp_gemms(p, g, per_model, issue);
  check(kernels::attention_softmax_backward(p.B * p.n * p.H * p.T, p.T, a.saved.probs.data, mask,
                                            scratch, stream()),
        "attention softmax backward kernel launch");
  attention_dq_dk_gemms(p, g, per_model, issue);
}

}  // namespace hfta::cuda
