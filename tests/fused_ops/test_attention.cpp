// Fused attention core on the op harness (tests/op_harness.h): fused(B) equals B reference
// single-model runs (output, saved probs and dropout mask, dqkv) with causal and key padding
// masks, attention dropout drawn from per-model streams, T on both sides of 16-float vectors,
// dh = 64 and odd dh, both sgemm libraries; reference gradients equal finite differences; head
// columns and PyTorch's semantics by hand; fully masked queries give zeros, not NaN; the uint8
// mask equals the int32 one; bad shapes raise hfta::Error.
#include <algorithm>
#include <cmath>
#include <limits>

#include "fused_ops/attention.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::OpCase;
using test::Role;
using test::TensorSpec;

constexpr double kUnitRoundoff = 1.0 / (1 << 24);

struct AttP {
  int64_t B = 1;
  AttentionParams att;
  bool padding = false;  // a random int32 key padding mask (each key padded with probability 1/2)
  AttentionParams params() const {
    AttentionParams p = att;
    p.B = B;
    return p;
  }
};

// One dropout stream per model, for models first_model .. first_model + B - 1.
// NOLINTNEXTLINE(bugprone-easily-swappable-parameters): a test helper with three call sites.
std::vector<RngStream> streams_for(uint64_t seed, int64_t B, int64_t first_model) {
  std::vector<RngStream> streams;
  for (int64_t b = 0; b < B; ++b)
    streams.push_back(RngStream::for_model(seed, first_model + b, kRngDropout));
  return streams;
}

struct AttentionOp {
  using Params = AttP;
  static std::string describe(const AttP& q) {
    const AttentionParams p = q.params();
    return fmt::format("n={} T={} D={} H={} causal={} padding={} p={} training={}", p.n, p.T, p.D,
                       p.H, p.causal, q.padding, p.dropout_p, p.training);
  }
  static std::vector<TensorSpec> tensors(const AttP& q, const OpCase<AttP>& c) {
    const AttentionParams p = q.params();
    std::vector<TensorSpec> t = {
        {.name = "qkv", .shape = p.qkv_shape()},
        {.name = "dout", .shape = p.out_shape()},
        {.name = "out", .shape = p.out_shape(), .role = Role::kOutput},
        {.name = "probs", .shape = p.probs_shape(), .role = Role::kSaved},
        {.name = "dqkv", .shape = p.qkv_shape(), .role = Role::kInputGrad},
    };
    if (q.padding)
      t.push_back({.name = "key_padding",
                   .shape = p.key_padding_shape(),
                   .layout = test::Layout::kShared,
                   .lo = 0.0f,
                   .hi = 2.0f,
                   .is_index = true});
    if (p.dropout_active())  // the same draws, compared exactly
      t.push_back({.name = "mask",
                   .shape = p.probs_shape(),
                   .role = Role::kSaved,
                   .atol = 0.0,
                   .rtol = 0.0});
    return t;
  }
  // Error bounds of the float kernel against the double reference from model b's own data, with
  // u = 2^-24, s = 1/sqrt(dh), keep = 1/(1-p) (1 without dropout), |k|, |q| <= 1 (the fill) and
  // over every head and (query t, key t'):  A_s = max sum_d |q_td k_t'd|,  A_dp = max sum_d
  // |dout_td v_t'd|,  C = max column sum of the probs (one key's weight summed over queries):
  // - a score is a float dot of dh terms and a scaling: E_s = s A_s (dh + 1) u; the softmax moves
  //   by 2 E_s relative, plus the rounded x - max (2 s A_s u), exp_approx (1.4u), a float sum of
  //   <= T terms (T u), the reciprocal and product (2u): rel_p.
  // - out = sum_t' P' v over T terms with sum P' <= keep: keep (rel_p + (T + 2) u).
  // - dv = sum_t P' dout: the same with the column sum: keep C (rel_p + (T + 2) u).
  // - dP = (dout . v) M: E_dp = keep (dh + 1) u A_dp, |dP| <= G = keep A_dp; c = sum P dP:
  //   E_c = G (rel_p + T u) + E_dp; dS = P (dP - c): P E_ds, E_ds = E_dp + E_c + 2 G (rel_p + 2u).
  // - dq = s sum_t' dS k: s (E_ds + 2 G (T + 1) u); dk: the same times C.
  // Accumulating adds a rounding of the start and the gradient (4u).
  static std::pair<double, double> tolerance(const AttP& q, const test::Views& v,
                                             const TensorSpec& spec) {
    const AttentionParams p = q.params();
    if (spec.name == "mask") return {0.0, 0.0};
    const int64_t dh = p.head_dim(), D = p.D, Tn = p.T;
    const double u = kUnitRoundoff, T = double(Tn);
    const double keep = p.dropout_active() ? double(p.keep_scale()) : 1.0;
    const double s = p.score_scale();
    const float *qkv = v("qkv").data, *dout = v("dout").data, *probs = v("probs").data;
    double a_s = 0.0, a_dp = 0.0, C = 1.0;
    for (int64_t seq = 0; seq < p.n; ++seq)
      for (int64_t h = 0; h < p.H; ++h) {
        const float* qh = qkv + seq * Tn * 3 * D + h * dh;
        const float* doh = dout + seq * Tn * D + h * dh;
        for (int64_t t = 0; t < Tn; ++t)
          for (int64_t k = 0; k < Tn; ++k) {
            double qk = 0.0, dv = 0.0;
            for (int64_t d = 0; d < dh; ++d) {
              qk += std::fabs(double(qh[t * 3 * D + d]) * qh[k * 3 * D + D + d]);
              dv += std::fabs(double(doh[t * D + d]) * qh[k * 3 * D + 2 * D + d]);
            }
            a_s = std::max(a_s, qk);
            a_dp = std::max(a_dp, dv);
          }
        const float* ph = probs + (seq * p.H + h) * Tn * Tn;
        for (int64_t k = 0; k < Tn; ++k) {
          double col = 0.0;
          for (int64_t t = 0; t < Tn; ++t) col += ph[t * Tn + k];
          C = std::max(C, col);
        }
      }
    const double e_s = s * a_s * double(dh + 1) * u;
    const double rel_p = 2.0 * e_s + (2.0 * s * a_s + T + 3.4) * u;
    if (spec.name == "probs") return {1e-30, rel_p};
    if (spec.name == "out") return {keep * (rel_p + (T + 2.0) * u), 0.0};
    const double G = keep * a_dp;
    const double e_dp = keep * double(dh + 1) * u * a_dp;
    const double e_c = G * (rel_p + T * u) + e_dp;
    const double e_ds = e_dp + e_c + 2.0 * G * (rel_p + 2.0 * u);
    const double dq = s * (e_ds + 2.0 * G * (T + 1.0) * u);
    const double dv = keep * C * (rel_p + (T + 2.0) * u);
    return {std::max(dq * C, dv) + 4.0 * u, 0.0};
  }
  static void run(const AttP& q, const test::Views& v, const test::RunContext& ctx) {
    const AttentionParams p = q.params();
    // Fresh streams on every run: finite differences redraw the same mask.
    std::vector<RngStream> streams = streams_for(ctx.seed, p.B, ctx.first_model);
    const AttentionSaved saved{.probs = v("probs"), .dropout_mask = v("mask")};
    (ctx.ref ? ref::attention_forward : attention_forward)(p,
                                                           {.qkv = v("qkv"),
                                                            .key_padding = v.index("key_padding"),
                                                            .streams = streams,
                                                            .saved = saved,
                                                            .out = v("out")});
    if (ctx.forward_only) return;
    (ctx.ref ? ref::attention_backward : attention_backward)(p,
                                                             {.qkv = v("qkv"),
                                                              .saved = saved,
                                                              .dout = v("dout"),
                                                              .dqkv = v("dqkv"),
                                                              .accumulate_dx = ctx.accumulate_dx});
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"out", "dout"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() { return {{"qkv", "dqkv"}}; }
  // eps = 1e-2: softmax attention is smooth with third derivatives of order 1 on these small
  // cases (|scores| <= sqrt(dh) <= 2): truncation ~ eps^2 / 6 ~ 2e-5; the float output's rounding
  // over <= 60 terms of L adds ~ 60 * 2^-24 / eps ~ 4e-4.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 1e-3, 1e-3}; }
};

std::vector<OpCase<AttP>> attention_cases() {
  struct Size {
    int64_t n, T, D, H;
    bool causal, padding;
    float p;
    bool training = true;
    bool openblas = false;
  };
  const Size sizes[] = {
      {1, 1, 1, 1, false, false, 0.0f},                // one token
      {2, 5, 6, 2, true, false, 0.0f},                 // dh = 3, causal (differences)
      {1, 4, 3, 1, false, true, 0.0f},                 // dh = 3, padding (differences)
      {2, 3, 4, 2, true, true, 0.3f},                  // everything at once (differences)
      {3, 17, 10, 2, false, true, 0.0f, true, true},   // odd dh = 5, T = 17, OpenBLAS
      {2, 9, 8, 2, true, false, 0.5f, false},          // eval mode: no dropout
      {2, 16, 64, 1, false, false, 0.1f},              // T = one vector, dh = 64
      {2, 32, 128, 2, true, false, 0.2f},              // the Transformer LM: dh = 64, bptt 32
      {1, 33, 128, 2, false, true, 0.0f, true, true},  // one past a vector, OpenBLAS
      {1, 100, 128, 2, true, true, 0.1f},              // T not a multiple of 16
      {1, 64, 512, 8, false, true, 0.1f},              // BERT: 8 heads of 64
      {1, 128, 64, 1, true, false, 0.0f},              // T = 128
  };
  std::vector<OpCase<AttP>> cases;
  int k = 0;
  for (const Size& s : sizes)
    for (int64_t B : test::model_counts()) {
      OpCase<AttP> c;
      c.p.att = AttentionParams{.n = s.n,
                                .T = s.T,
                                .D = s.D,
                                .H = s.H,
                                .causal = s.causal,
                                .dropout_p = s.p,
                                .training = s.training};
      c.p.padding = s.padding;
      c.B = B;
      c.threads = 1 + (k++ % 2);
      if (s.openblas) c.gemm = cpu::GemmBackend::kOpenBlas;
      c.accumulate_dx = (s.n + s.T + B) % 2 == 1;
      c.fd = B == 1 && s.n * s.T * s.D <= 60;
      c.name = fmt::format("n{}_T{}_D{}_H{}{}{}_p{}{}{}_B{}_t{}{}{}", s.n, s.T, s.D, s.H,
                           s.causal ? "_causal" : "", s.padding ? "_pad" : "", int(s.p * 10),
                           s.training ? "" : "_eval", s.openblas ? "_openblas" : "", B, c.threads,
                           c.accumulate_dx ? "_acc" : "", c.fd ? "_fd" : "");
      cases.push_back(c);
    }
  return cases;
}

class AttentionHarness : public ::testing::TestWithParam<OpCase<AttP>> {};
TEST_P(AttentionHarness, FusedEqualsSerial) { test::run_case<AttentionOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, AttentionHarness, ::testing::ValuesIn(attention_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCuda, AttentionHarness,
                         ::testing::ValuesIn(test::device_cases<AttentionOp>(attention_cases(),
                                                                             Device::kCuda)),
                         test::CaseName());

// Forward and backward of both paths on whole buffers.
struct AttResult {
  Buffer out, probs, dqkv;
};

AttResult run_attention(const AttentionParams& p, Buffer qkv, Buffer dout, IndexView padding,
                        View<uint8_t> padding_u8, bool fast) {
  AttResult r{Buffer(p.out_shape()), Buffer(p.probs_shape()), Buffer(p.qkv_shape())};
  (fast ? attention_forward : ref::attention_forward)(p, {.qkv = qkv.view(),
                                                          .key_padding = padding,
                                                          .key_padding_u8 = padding_u8,
                                                          .saved = {.probs = r.probs.view()},
                                                          .out = r.out.view()});
  (fast ? attention_backward : ref::attention_backward)(p, {.qkv = qkv.view(),
                                                            .saved = {.probs = r.probs.view()},
                                                            .dout = dout.view(),
                                                            .dqkv = r.dqkv.view()});
  return r;
}

// Head h reads q, k, v columns h*dh.. of their thirds and writes output columns h*dh..; the
// softmax is over keys, scaled by 1/sqrt(dh). D = 2, H = 2, dh = 1, T = 2, one sequence:
// head 0's keys are equal (uniform weights: the mean of its v), head 1's second key dominates
// (its v), causal query 0 sees only key 0.
TEST(Attention, HeadColumnsAndSemanticsByHand) {
  for (bool fast : {true, false})
    for (bool causal : {false, true}) {
      SCOPED_TRACE(fmt::format("fast={} causal={}", fast, causal));
      const AttentionParams p{.n = 1, .T = 2, .D = 2, .H = 2, .causal = causal};
      Buffer qkv(p.qkv_shape()), dout(p.out_shape(), 1.0f);
      //            q0    q1    k0    k1     v0    v1
      qkv.values = {1.0f, 1.0f, 0.5f, 0.0f,  2.0f, 3.0f,   // token 0
                    1.0f, 1.0f, 0.5f, 50.0f, 4.0f, 7.0f};  // token 1
      const AttResult r = run_attention(p, qkv, dout, {}, {}, fast);
      // Query 1: head 0 uniform -> (2 + 4) / 2; head 1 -> key 1's v = 7.
      EXPECT_NEAR(r.out.values[2], 3.0f, 1e-6);
      EXPECT_NEAR(r.out.values[3], 7.0f, 1e-6);
      // Query 0: causal sees key 0 only; else head 0 uniform, head 1 still key 1.
      EXPECT_NEAR(r.out.values[0], causal ? 2.0f : 3.0f, 1e-6);
      EXPECT_NEAR(r.out.values[1], causal ? 3.0f : 7.0f, 1e-6);
      EXPECT_NEAR(r.probs.values[0 * 4 + 1], causal ? 0.0f : 0.5f, 1e-7);  // head 0, query 0
      EXPECT_EQ(r.probs.values[1 * 4 + 1], causal ? 0.0f : 1.0f);          // head 1, query 0, key 1
    }
}

// Every key of sequence 0 padded: its probs, outputs and gradients are 0 (not NaN), and
// sequence 1 equals a run with sequence 1 alone. Under causal masking with key 0 padded, query 0
// has no key either.
TEST(Attention, FullyMaskedQueriesGiveZerosNotNan) {
  const uint64_t seed = test::case_seed("Attention.FullyMaskedQueriesGiveZerosNotNan");
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 0);
  for (bool fast : {true, false})
    for (bool causal : {false, true}) {
      SCOPED_TRACE(fmt::format("fast={} causal={}", fast, causal));
      const AttentionParams p{.B = 2, .n = 2, .T = 5, .D = 6, .H = 2, .causal = causal};
      const Buffer qkv = test::random_buffer(p.qkv_shape(), rng);
      const Buffer dout = test::random_buffer(p.out_shape(), rng);
      std::vector<int32_t> padding = {1, 1, 1, 1, 1, 1, 0, 0, 1, 0};
      const AttResult r =
          run_attention(p, qkv, dout, IndexView(padding.data(), p.key_padding_shape()), {}, fast);
      for (float x : r.out.values) ASSERT_FALSE(std::isnan(x));
      for (float x : r.dqkv.values) ASSERT_FALSE(std::isnan(x));
      const int64_t T = p.T, D = p.D;
      for (int64_t b = 0; b < p.B; ++b) {
        for (int64_t i = 0; i < T * D; ++i)
          EXPECT_EQ(r.out.values[(b * p.n + 0) * T * D + i], 0.0f);
        for (int64_t i = 0; i < T * 3 * D; ++i)
          EXPECT_EQ(r.dqkv.values[(b * p.n + 0) * T * 3 * D + i], 0.0f);
        for (int64_t i = 0; i < p.H * T * T; ++i)
          EXPECT_EQ(r.probs.values[(b * p.n + 0) * p.H * T * T + i], 0.0f);
        if (causal) {  // sequence 1, query 0: key 0 padded and later keys hidden
          for (int64_t d = 0; d < D; ++d) EXPECT_EQ(r.out.values[(b * p.n + 1) * T * D + d], 0.0f);
        }
      }
    }
}

// The uint8 (bool) mask gives exactly what the int32 mask gives.
TEST(Attention, Uint8PaddingEqualsInt32Padding) {
  const uint64_t seed = test::case_seed("Attention.Uint8PaddingEqualsInt32Padding");
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 0);
  const AttentionParams p{.B = 3, .n = 2, .T = 19, .D = 12, .H = 3, .causal = true};
  const Buffer qkv = test::random_buffer(p.qkv_shape(), rng);
  const Buffer dout = test::random_buffer(p.out_shape(), rng);
  std::vector<int32_t> padding(static_cast<size_t>(p.n * p.T));
  std::vector<uint8_t> bytes(padding.size());
  for (size_t i = 0; i < padding.size(); ++i) bytes[i] = padding[i] = rng.below(3) == 0;
  for (bool fast : {true, false}) {
    const AttResult a =
        run_attention(p, qkv, dout, IndexView(padding.data(), p.key_padding_shape()), {}, fast);
    const AttResult b =
        run_attention(p, qkv, dout, {}, View<uint8_t>(bytes.data(), p.key_padding_shape()), fast);
    test::expect_close(a.out, b.out, 0.0, 0.0, "out");
    test::expect_close(a.dqkv, b.dqkv, 0.0, 0.0, "dqkv");
  }
}

TEST(Attention, BadShapesRaiseClearErrors) {
  const AttentionParams p{.B = 2, .n = 3, .T = 4, .D = 6, .H = 2, .dropout_p = 0.1f};
  Buffer qkv(p.qkv_shape()), out(p.out_shape()), probs(p.probs_shape()), mask(p.probs_shape());
  std::vector<RngStream> streams = streams_for(1, 2, 0);
  std::vector<int32_t> padding(12, 0);
  std::vector<uint8_t> bytes(12, 0);
  auto message = [&](const AttentionParams& q, AttentionForwardArgs a) {
    try {
      attention_forward(q, a);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const AttentionForwardArgs good{.qkv = qkv.view(),
                                  .streams = streams,
                                  .saved = {.probs = probs.view(), .dropout_mask = mask.view()},
                                  .out = out.view()};
  auto expect_message = [](const std::string& got, const std::string& want) {
    EXPECT_NE(got.find(want), std::string::npos) << got;
  };
  EXPECT_EQ(message(p, good), "no error");
  AttentionParams bad = p;
  bad.H = 4;
  expect_message(message(bad, good),
                 "attention width D=6 is not a multiple of the number of heads H=4");
  bad = p;
  bad.dropout_p = 1.0f;
  expect_message(message(bad, good), "attention dropout_p is 1, expected a value in [0, 1)");
  AttentionForwardArgs a = good;
  a.qkv = out.view();
  expect_message(message(p, a), "attention qkv (q, k, v projections side by side) has shape");
  a = good;
  a.streams = std::span<RngStream>(streams).first(1);
  expect_message(message(p, a), "attention dropout got 1 random streams for B=2 models");
  a = good;
  a.saved.dropout_mask = {};
  expect_message(message(p, a), "attention saved.dropout_mask (needed in training");
  bad = p;
  bad.training = false;
  EXPECT_EQ(message(bad, a), "no error");  // eval mode: no mask needed
  a = good;
  a.key_padding = IndexView(padding.data(), Shape{4, 3});
  expect_message(message(p, a), "attention key_padding has shape [4, 3], expected [3, 4]");
  a.key_padding = IndexView(padding.data(), p.key_padding_shape());
  a.key_padding_u8 = View<uint8_t>(bytes.data(), p.key_padding_shape());
  expect_message(message(p, a), "attention got both an int32 and a uint8 key padding mask");
  Buffer dqkv(p.qkv_shape());
  try {
    attention_backward(
        p, {.qkv = qkv.view(), .saved = good.saved, .dout = out.view(), .dqkv = qkv.view()});
    FAIL() << "expected hfta::Error";
  } catch (const Error& e) {
    expect_message(e.what(), "attention backward got dqkv in the buffer of qkv");
  }
  EXPECT_THROW(
      attention_backward(
          p, {.qkv = qkv.view(), .saved = good.saved, .dout = qkv.view(), .dqkv = dqkv.view()}),
      Error);
}

}  // namespace
}  // namespace hfta
