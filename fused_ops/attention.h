// Fused multi-head self-attention core: for every model b, sequence s and head h, the scaled
// dot-product attention between the heads' slices of packed projections, as inside
// torch.nn.MultiheadAttention (between its in_proj and out_proj, both plain linears here).
//
//   qkv           [B, n, T, 3*D]    n sequences of T tokens; q = columns [0, D), k = [D, 2D),
//                                   v = [2D, 3D): PyTorch's in_proj output. Head h reads columns
//                                   h*dh .. (h+1)*dh of each (dh = D / H).
//   key_padding   [n, T]            optional, int32 or uint8, shared by all models: nonzero = a
//                                   padded key, which no query attends to
//   out           [B, n, T, D]      heads concatenated (head h in columns h*dh ..), for out_proj
//   saved.probs   [B, n, H, T, T]   softmax over keys, before dropout
//   saved.dropout_mask  [B, n, H, T, T]  1/(1-p) where kept, 0 where dropped (training, p > 0)
// Per (b, s, h), with Q, K, V the head's [T, dh] slices:
//   scores = Q K^T / sqrt(dh); scores[t, t'] = -inf where key t' is padded or (causal) t' > t;
//   probs = softmax(scores) over t'; out = (probs * mask) V.
// Dropout (training with p > 0) draws one uniform per element of model b's own probs tensor
// [n, H, T, T] in that order from streams[b], keeping an element when it is >= p, as
// fused_ops/dropout.h does: model b draws the mask it would draw alone. With p = 0 or in eval mode
// no random numbers are drawn and the mask is not touched (it may be an empty view).
// A query whose keys are all masked (every key padded, or padded up to it under causal) has no
// softmax (PyTorch gives NaN there); we define its probs row, output and gradients as 0, so one
// all-padding sequence cannot poison a model. NaN inputs still give NaN outputs.
// Backward: dqkv [B, n, T, 3D] (dq, dk, dv in q, k, v's columns) is written (=), or added (+=)
// with accumulate_dx. It reads qkv, the saved probs and mask, and dout; dqkv must not share
// qkv's or dout's buffer.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

#include "core/rng.h"
#include "core/tensor.h"

namespace hfta {

struct AttentionParams {
  int64_t B = 1;
  int64_t n = 1;  // sequences per model
  int64_t T = 1;  // tokens per sequence (queries and keys)
  int64_t D = 1;  // model width, the sum of the heads' widths
  int64_t H = 1;  // heads; D % H == 0
  bool causal = false;
  float dropout_p = 0.0f;  // attention dropout on the probabilities, in [0, 1)
  bool training = true;

  int64_t head_dim() const { return D / H; }
  // 1 / sqrt(dh), rounded to float as every backend applies it.
  float score_scale() const { return static_cast<float>(1.0 / std::sqrt(double(head_dim()))); }
  bool dropout_active() const { return training && dropout_p > 0.0f; }
  float keep_scale() const { return 1.0f / (1.0f - dropout_p); }
  Shape qkv_shape() const { return {B, n, T, 3 * D}; }
  Shape out_shape() const { return {B, n, T, D}; }
  Shape probs_shape() const { return {B, n, H, T, T}; }
  Shape key_padding_shape() const { return {n, T}; }
  // Q K^T and probs V, 2 FLOPs per multiply-add (the softmax not counted).
  double forward_flops() const { return 4.0 * double(B) * n * H * T * T * head_dim(); }
};

// What backward needs; caller-provided views written by forward.
struct AttentionSaved {
  TensorView probs;
  TensorView dropout_mask;  // training with p > 0 only
};

// The tensors of one call, by name (call with designated initializers:
// attention_forward(p, {.qkv = qkv, .streams = streams, .saved = {.probs = P}, .out = out})).
struct AttentionForwardArgs {
  TensorView qkv{};
  IndexView key_padding{};         // [n, T] int32, or empty
  View<uint8_t> key_padding_u8{};  // [n, T] uint8 (a bool mask), or empty; at most one of the two
  std::span<RngStream> streams{};  // one per model when dropout is active, advanced by the draws
  AttentionSaved saved{};          // output for backward
  TensorView out{};                // output
};
struct AttentionBackwardArgs {
  TensorView qkv{};
  AttentionSaved saved{};  // what forward saved
  TensorView dout{};
  TensorView dqkv{};           // output
  bool accumulate_dx = false;  // dqkv += gradient instead of dqkv = gradient
};

// Throws hfta::Error when a size is not positive, D is not a multiple of H, p is outside [0, 1),
// a tensor does not match its shape above, both key padding masks are given, dqkv shares a
// buffer with qkv or dout, or (dropout active) the mask is missing or streams does not hold B.
void check_attention(const AttentionParams& p, const AttentionForwardArgs& a);
void check_attention_backward(const AttentionParams& p, const AttentionBackwardArgs& a);

void attention_forward(const AttentionParams& p, const AttentionForwardArgs& a);
void attention_backward(const AttentionParams& p, const AttentionBackwardArgs& a);

namespace ref {
void attention_forward(const AttentionParams& p, const AttentionForwardArgs& a);
void attention_backward(const AttentionParams& p, const AttentionBackwardArgs& a);
}  // namespace ref

namespace cpu {
void attention_forward(const AttentionParams& p, const AttentionForwardArgs& a);
void attention_backward(const AttentionParams& p, const AttentionBackwardArgs& a);
}  // namespace cpu

}  // namespace hfta
