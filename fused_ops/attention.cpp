#include "fused_ops/attention.h"

#include "fused_ops/cuda/attention.h"
#include "fused_ops/dispatch.h"

namespace hfta {

static void check_attention_params(const AttentionParams& p) {
  HFTA_CHECK(p.B > 0 && p.n > 0 && p.T > 0 && p.D > 0 && p.H > 0,
             "attention sizes must be positive, got B={} n={} T={} D={} H={}", p.B, p.n, p.T, p.D,
             p.H);
  HFTA_CHECK(p.D % p.H == 0,
             "attention width D={} is not a multiple of the number of heads H={}: every head "
             "takes D/H columns, so pick H dividing D",
             p.D, p.H);
  HFTA_CHECK(p.dropout_p >= 0.0f && p.dropout_p < 1.0f,
             "attention dropout_p is {}, expected a value in [0, 1) (the probability to drop an "
             "attention weight; use eval mode to turn dropout off)",
             p.dropout_p);
}

static void check_saved(const AttentionParams& p, const AttentionSaved& saved) {
  check_shape(saved.probs, p.probs_shape(), "attention saved.probs");
  if (p.dropout_active())
    check_shape(saved.dropout_mask, p.probs_shape(),
                "attention saved.dropout_mask (needed in training with dropout_p > 0)");
}

void check_attention(const AttentionParams& p, const AttentionForwardArgs& a) {
  check_attention_params(p);
  check_shape(a.qkv, p.qkv_shape(), "attention qkv (q, k, v projections side by side)");
  check_shape(a.out, p.out_shape(), "attention output");
  HFTA_CHECK(a.key_padding.empty() || a.key_padding_u8.empty(),
             "attention got both an int32 and a uint8 key padding mask: pass one");
  check_optional_shape(a.key_padding, p.key_padding_shape(), "attention key_padding");
  check_optional_shape(a.key_padding_u8, p.key_padding_shape(), "attention key_padding_u8");
  check_saved(p, a.saved);
  check_device(a.key_padding, a.qkv.device, "attention key_padding");
  check_device(a.key_padding_u8, a.qkv.device, "attention key_padding_u8");
  check_device(a.saved.probs, a.qkv.device, "attention saved.probs");
  check_device(a.saved.dropout_mask, a.qkv.device, "attention saved.dropout_mask");
  check_device(a.out, a.qkv.device, "attention output");
  if (p.dropout_active())
    HFTA_CHECK(static_cast<int64_t>(a.streams.size()) == p.B,
               "attention dropout got {} random streams for B={} models: pass one stream per "
               "model, RngStream::for_model(seed, b, kRngDropout)",
               a.streams.size(), p.B);
}

void check_attention_backward(const AttentionParams& p, const AttentionBackwardArgs& a) {
  check_attention_params(p);
  check_shape(a.qkv, p.qkv_shape(), "attention qkv (q, k, v projections side by side)");
  check_saved(p, a.saved);
  check_shape(a.dout, p.out_shape(), "attention output gradient");
  check_shape(a.dqkv, p.qkv_shape(), "attention qkv gradient");
  check_device(a.saved.probs, a.qkv.device, "attention saved.probs");
  check_device(a.saved.dropout_mask, a.qkv.device, "attention saved.dropout_mask");
  check_device(a.dout, a.qkv.device, "attention output gradient");
  check_device(a.dqkv, a.qkv.device, "attention qkv gradient");
  HFTA_CHECK(a.dqkv.data != a.qkv.data && a.dqkv.data != a.dout.data,
             "attention backward got dqkv in the buffer of {}: backward reads it while writing "
             "dqkv, so give dqkv a buffer of its own",
             a.dqkv.data == a.qkv.data ? "qkv" : "dout");
}

void attention_forward(const AttentionParams& p, const AttentionForwardArgs& a) {
  check_attention(p, a);
  HFTA_DISPATCH_CUDA("attention_forward", a.qkv.device, cpu::attention_forward(p, a),
                     cuda::attention_forward(p, a));
}

void attention_backward(const AttentionParams& p, const AttentionBackwardArgs& a) {
  check_attention_backward(p, a);
  HFTA_DISPATCH_CUDA("attention_backward", a.qkv.device, cpu::attention_backward(p, a),
                     cuda::attention_backward(p, a));
}

}  // namespace hfta
