// The CUDA attention core (fused_ops/cuda/attention.cpp): B in {1, 2, 3, 8}; T from 1 to 40 keys
// around the warp's 32 lanes, dh from 1 to 64, 1 to 4 heads; causal, int32 and uint8 key padding
// (one sequence all padded), dropout in training and eval; dqkv written or added.
//   AttentionHostMirror (runs without a GPU): the op's pipeline on the host: its GEMM descriptions
//     (attention_gemms.h) run by a naive column-major GEMM with double sums, the softmax kernels'
//     lanes and tree (attention_math.h), the mask drawn as the op draws it; on NaN-filled
//     outputs, against the reference within bounds derived below; the same with deterministic
//     mode's per-model calls, bit for bit; model b of the fused mirror equals the B = 1 mirror
//     bit for bit.
//   CudaAttention (skipped without a GPU): the op through the dispatcher on device tensors (cuBLAS
//     float GEMMs) against the reference within the same bounds, the dropout mask bit for bit;
//     AttentionDevices: mixed devices raise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "core/device_memory.h"
#include "fused_ops/attention.h"
#include "fused_ops/cuda/attention_gemms.h"
#include "fused_ops/cuda/attention_math.h"
#include "fused_ops/dropout.h"
#include "host_gemm.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr double kU = 1.0 / (1 << 24);

struct AttCase {
  AttentionParams p;
  int padding;  // 0 none, 1 int32, 2 uint8 (sequence 0 all padded when n > 1)
  bool accumulate;
  std::string name() const {
    return fmt::format("B{}_n{}_T{}_D{}_H{}{}{}_p{}{}{}", p.B, p.n, p.T, p.D, p.H,
                       p.causal ? "_causal" : "",
                       padding == 0   ? ""
                       : padding == 1 ? "_pad32"
                                      : "_pad8",
                       int(p.dropout_p * 10), p.training ? "" : "_eval", accumulate ? "_acc" : "");
  }
};

void PrintTo(const AttCase& c, std::ostream* os) { *os << c.name(); }

std::vector<AttCase> cases() {
  const struct {
    int64_t n, T, D, H;
    bool causal;
    int padding;
    float p;
    bool training;
  } shapes[] = {{1, 1, 1, 1, false, 0, 0.0f, true},   {2, 5, 6, 2, true, 0, 0.0f, true},
                {2, 33, 64, 2, false, 1, 0.0f, true}, {2, 32, 128, 2, true, 0, 0.2f, true},
                {2, 40, 16, 4, true, 2, 0.1f, true},  {3, 31, 8, 1, false, 1, 0.5f, false}};
  std::vector<AttCase> out;
  int k = 0;
  for (const auto& s : shapes)
    for (int64_t B : test::model_counts())
      out.push_back({{.B = B,
                      .n = s.n,
                      .T = s.T,
                      .D = s.D,
                      .H = s.H,
                      .causal = s.causal,
                      .dropout_p = s.p,
                      .training = s.training},
                     s.padding,
                     k++ % 2 == 1});
  return out;
}

uint64_t seed_of(const AttCase& c) { return test::case_seed("cuda_attention_" + c.name()); }

struct Tensors {
  Buffer qkv, dout, dqkv_start;
  std::vector<int32_t> pad32;
  std::vector<uint8_t> pad8;
};

Tensors inputs(const AttCase& c) {
  RngStream rng(seed_of(c), 0);
  const AttentionParams& p = c.p;
  Tensors t{test::random_buffer(p.qkv_shape(), rng),
            test::random_buffer(p.out_shape(), rng),
            c.accumulate ? test::random_buffer(p.qkv_shape(), rng) : Buffer(p.qkv_shape(), kNaN),
            {},
            {}};
  for (int64_t i = 0; i < p.n * p.T; ++i) {
    const bool padded = (p.n > 1 && i < p.T) || rng.below(2) == 0;
    if (c.padding == 1) t.pad32.push_back(padded ? 1 : 0);
    if (c.padding == 2) t.pad8.push_back(padded ? 1 : 0);
  }
  return t;
}

// Model b's slice of a case's inputs, as a B = 1 case.
Tensors slice(const AttCase& c, const Tensors& t, int64_t b) {
  auto part = [&](const Buffer& from) {
    const int64_t per = from.numel() / c.p.B;
    Buffer out(Shape{1, per});
    std::copy_n(from.values.begin() + b * per, per, out.values.begin());
    return out;
  };
  return {part(t.qkv), part(t.dout), part(t.dqkv_start), t.pad32, t.pad8};
}

struct Outputs {
  Buffer out, probs, mask, dqkv;
};

// Dropout streams of models first_model .. first_model + B - 1 of the array seeded `seed`.
std::vector<RngStream> streams_for(const AttCase& c, uint64_t seed, int64_t first_model) {
  std::vector<RngStream> s;
  for (int64_t b = 0; b < c.p.B; ++b)
    s.push_back(RngStream::for_model(seed, first_model + b, kRngDropout));
  return s;
}

AttentionForwardArgs forward_args(const AttCase& c, Tensors& t, Outputs& o,
                                  std::span<RngStream> streams) {
  return {.qkv = t.qkv.view(),
          .key_padding =
              c.padding == 1 ? IndexView(t.pad32.data(), c.p.key_padding_shape()) : IndexView(),
          .key_padding_u8 = c.padding == 2 ? View<uint8_t>(t.pad8.data(), c.p.key_padding_shape())
                                           : View<uint8_t>(),
          .streams = streams,
          .saved = {.probs = o.probs.view(),
                    .dropout_mask = c.p.dropout_active() ? o.mask.view() : TensorView()},
          .out = o.out.view()};
}

Outputs start_outputs(const AttCase& c, const Tensors& t) {
  return {Buffer(c.p.out_shape(), kNaN), Buffer(c.p.probs_shape(), kNaN),
          Buffer(c.p.probs_shape(), kNaN), t.dqkv_start};
}

Outputs reference(const AttCase& c, Tensors& t) {
  Outputs o = start_outputs(c, t);
  std::vector<RngStream> streams = streams_for(c, seed_of(c), 0);
  const AttentionForwardArgs f = forward_args(c, t, o, streams);
  ref::attention_forward(c.p, f);
  ref::attention_backward(c.p, {.qkv = t.qkv.view(),
                                .saved = f.saved,
                                .dout = t.dout.view(),
                                .dqkv = o.dqkv.view(),
                                .accumulate_dx = c.accumulate});
  return o;
}

void host_gemm(const cuda::AttentionGemm& e) { test::host_column_major_gemm(e.g, e.alpha); }

// The lanes' partials added as the kernels' __shfl_down_sync tree adds them (lane 0's total).
template <typename T, typename F>
T lane_tree(std::vector<T> v, F&& combine) {
  for (int stride = attention_math::kLanes / 2; stride > 0; stride /= 2)
    for (int l = 0; l < stride; ++l) v[l] = combine(v[l], v[l + stride]);
  return v[0];
}

// The op's pipeline (fused_ops/cuda/attention.cpp) on the host.
Outputs mirror(const AttCase& c, Tensors& t, bool per_model, uint64_t seed,
               int64_t first_model = 0) {
  using namespace attention_math;
  const AttentionParams& p = c.p;
  Outputs o = start_outputs(c, t);
  const int64_t n = p.probs_shape().numel(), rows = p.B * p.n * p.H * p.T;
  std::vector<float> scratch(static_cast<size_t>(n), kNaN);
  std::vector<RngStream> streams = streams_for(c, seed, first_model);
  if (p.dropout_active())
    cpu::dropout_draw_mask(DropoutParams::model_major(p.B, n / p.B, p.dropout_p, true), streams,
                           o.mask.data());
  cuda::AttentionGemmArgs g{.qkv = t.qkv.data(), .probs = o.probs.data(), .out = o.out.data()};
  cuda::attention_score_gemms(p, g, per_model, host_gemm);
  const SoftmaxShape s{.rows = rows,
                       .n = p.n,
                       .H = p.H,
                       .T = p.T,
                       .causal = p.causal,
                       .pad32 = c.padding == 1 ? t.pad32.data() : nullptr,
                       .pad8 = c.padding == 2 ? t.pad8.data() : nullptr};
  std::vector<float> m(kLanes);
  std::vector<double> sums(kLanes);
  for (int64_t r = 0; r < rows; ++r) {
    for (int l = 0; l < kLanes; ++l) m[l] = max_partial(s, o.probs.data(), r, l);
    const float row_max = lane_tree(m, max_of);
    for (int l = 0; l < kLanes; ++l) sums[l] = exp_partial(s, o.probs.data(), r, row_max, l);
    const double sum = lane_tree(sums, [](double a, double b) { return a + b; });
    for (int l = 0; l < kLanes; ++l) write_probs(s, o.probs.data(), r, row_max, sum, l);
  }
  g.weights = o.probs.data();
  if (p.dropout_active()) {
    for (int64_t i = 0; i < n; ++i) weight_at(o.probs.data(), o.mask.data(), scratch.data(), i);
    g.weights = scratch.data();
  }
  cuda::attention_output_gemms(p, g, per_model, host_gemm);
  // Backward, as the op runs it: weights into scratch, dV, dP over it, dS in place, dQ, dK.
  g.dout = t.dout.data();
  g.ds = scratch.data();
  g.dqkv = o.dqkv.data();
  g.accumulate_dx = c.accumulate;
  cuda::attention_dv_dp_gemms(p, g, per_model, host_gemm);
  const float* mask = p.dropout_active() ? o.mask.data() : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    for (int l = 0; l < kLanes; ++l)
      sums[l] = dot_partial(p.T, o.probs.data(), scratch.data(), mask, r, l);
    const double dot = lane_tree(sums, [](double a, double b) { return a + b; });
    for (int l = 0; l < kLanes; ++l) write_ds(p.T, o.probs.data(), scratch.data(), mask, r, dot, l);
  }
  cuda::attention_dq_dk_gemms(p, g, per_model, host_gemm);
  return o;
}

// Bounds against the double reference, u = 2^-24, |q|, |k|, |v|, |dout| <= 1 (the fill),
// s = 1/sqrt(dh), keep = 1/(1-p) (1 without dropout). A score is a float dot of dh terms, at most
// dh |s| in size, rounded: (dh + 2) s dh u on a float GEMM (u on the host's double sums), and the
// softmax turns a score error e into a relative error 2e in the probabilities, plus the double
// exp and sum rounded once: rel_p = 2 E_s + 2u. out = sum over T keys of P' v: keep (rel_p + (T +
// 2) u). The gradients: dv sums T products like out; dP = dout . v (dh terms, E_dp = (dh + 2) dh
// u keep); dS = P (dP - c) errs by E_dp + keep dh (rel_p + 2u) per element; dq, dk sum T of them
// times |k|, |q| <= 1 and s: T s (E_ds + (T + 2) dh keep u). Accumulating adds a rounding of the
// start and the gradient (4u). got against want within these, NaN meeting NaN.
void expect_matches_reference(const AttCase& c, const Tensors& t, const Outputs& got,
                              const Outputs& want, bool float_gemms) {
  const AttentionParams& p = c.p;
  const double dh = double(p.head_dim()), T = double(p.T), s = p.score_scale();
  const double keep = p.dropout_active() ? double(p.keep_scale()) : 1.0;
  const double gemm_u = float_gemms ? kU : 0.0;
  const double e_s = (dh + 2) * s * dh * gemm_u + 2 * kU * s * dh;
  const double rel_p = 2 * e_s + 2 * kU;
  const double e_out = keep * (rel_p + (T + 2) * kU) + 2 * kU;
  const double e_dp = (dh + 2) * dh * keep * (gemm_u + kU);
  const double e_ds = e_dp + keep * dh * (rel_p + 2 * kU);
  const double e_grad =
      std::max(T * keep * (rel_p + (T + 2) * kU), T * s * (e_ds + (T + 2) * dh * keep * kU)) +
      4 * kU;
  test::expect_close(got.probs.values.data(), want.probs.values.data(), got.probs.numel(), 1e-30,
                     rel_p, "probs");
  test::expect_close(got.out.values.data(), want.out.values.data(), got.out.numel(), e_out, 0.0,
                     "out");
  test::expect_close(got.dqkv.values.data(), want.dqkv.values.data(), got.dqkv.numel(), e_grad,
                     4 * kU, "dqkv");
  if (p.dropout_active()) test::expect_same_bits(got.mask.values, want.mask.values, "mask");
  (void)t;
}

class AttentionHostMirror : public ::testing::TestWithParam<AttCase> {};

TEST_P(AttentionHostMirror, MatchesTheReference) {
  const AttCase& c = GetParam();
  HFTA_CASE_TRACE(seed_of(c));
  Tensors t = inputs(c);
  const Outputs want = reference(c, t);
  const Outputs got = mirror(c, t, false, seed_of(c));
  expect_matches_reference(c, t, got, want, false);
  SCOPED_TRACE("deterministic mode's per-model calls");
  const Outputs per_model = mirror(c, t, true, seed_of(c));
  test::expect_same_bits(per_model.out.values, got.out.values, "out");
  test::expect_same_bits(per_model.probs.values, got.probs.values, "probs");
  test::expect_same_bits(per_model.dqkv.values, got.dqkv.values, "dqkv");
}

TEST_P(AttentionHostMirror, FusedEqualsEachModelAlone) {
  const AttCase& c = GetParam();
  HFTA_CASE_TRACE(seed_of(c));
  Tensors t = inputs(c);
  const Outputs fused = mirror(c, t, false, seed_of(c));
  for (int64_t b = 0; b < c.p.B; ++b) {
    SCOPED_TRACE(fmt::format("model b={}", b));
    AttCase one = c;
    one.p.B = 1;
    Tensors single = slice(c, t, b);
    const Outputs alone = mirror(one, single, false, seed_of(c), b);
    auto part = [&](const Buffer& from) {
      const int64_t per = from.numel() / c.p.B;
      return std::vector<float>(from.values.begin() + b * per, from.values.begin() + (b + 1) * per);
    };
    test::expect_same_bits(alone.out.values, part(fused.out), "out");
    test::expect_same_bits(alone.probs.values, part(fused.probs), "probs");
    test::expect_same_bits(alone.mask.values, part(fused.mask), "mask");
    test::expect_same_bits(alone.dqkv.values, part(fused.dqkv), "dqkv");
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionHostMirror, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

class CudaAttention : public ::testing::TestWithParam<AttCase> {};

TEST_P(CudaAttention, MatchesTheReference) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const AttCase& c = GetParam();
  HFTA_CASE_TRACE(seed_of(c));
  Tensors t = inputs(c);
  const Outputs want = reference(c, t);
  const AttentionParams& p = c.p;
  const Shape qs = p.qkv_shape(), os = p.out_shape(), ps = p.probs_shape(),
              ks = p.key_padding_shape();
  const auto bytes = [](const Shape& s) {
    return cuda::DeviceArena::align_up(static_cast<size_t>(s.numel()) * sizeof(float));
  };
  cuda::DeviceArena arena(2 * bytes(qs) + 2 * bytes(os) + 2 * bytes(ps) + bytes(ks),
                          "attention test");
  const TensorView qkv = arena.carve(qs), dqkv = arena.carve(qs), out = arena.carve(os),
                   dout = arena.carve(os), probs = arena.carve(ps), mask = arena.carve(ps);
  IndexView pad32;
  View<uint8_t> pad8;
  if (c.padding == 1) {
    pad32 = arena.carve<int32_t>(ks);
    copy_view(IndexView(t.pad32.data(), ks), pad32, "attention test padding");
  }
  if (c.padding == 2) {
    pad8 = arena.carve<uint8_t>(ks);
    copy_view(View<uint8_t>(t.pad8.data(), ks), pad8, "attention test padding");
  }
  Outputs start = start_outputs(c, t);
  cuda::copy_to_device(t.qkv.view(), qkv);
  cuda::copy_to_device(t.dout.view(), dout);
  cuda::copy_to_device(start.dqkv.view(), dqkv);
  cuda::copy_to_device(start.out.view(), out);
  cuda::copy_to_device(start.probs.view(), probs);
  cuda::copy_to_device(start.mask.view(), mask);
  std::vector<RngStream> streams = streams_for(c, seed_of(c), 0);
  const AttentionSaved saved{.probs = probs,
                             .dropout_mask = p.dropout_active() ? mask : TensorView()};
  attention_forward(p, {.qkv = qkv,
                        .key_padding = pad32,
                        .key_padding_u8 = pad8,
                        .streams = streams,
                        .saved = saved,
                        .out = out});
  attention_backward(
      p, {.qkv = qkv, .saved = saved, .dout = dout, .dqkv = dqkv, .accumulate_dx = c.accumulate});
  Outputs got{Buffer(os), Buffer(ps), Buffer(ps), Buffer(qs)};
  cuda::copy_to_host(out, got.out.view());
  cuda::copy_to_host(probs, got.probs.view());
  cuda::copy_to_host(mask, got.mask.view());
  cuda::copy_to_host(dqkv, got.dqkv.view());
  expect_matches_reference(c, t, got, want, true);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaAttention, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(AttentionDevices, TensorsOnTwoDevicesAreRefused) {
  const AttentionParams p{.B = 1, .n = 1, .T = 2, .D = 2, .H = 1};
  std::vector<float> qkv(12), out(4), probs(4);
  const TensorView on_device(out.data(), p.out_shape(), Device::kCuda);
  test::expect_error_containing_all(
      [&] {
        attention_forward(p, {.qkv = TensorView(qkv.data(), p.qkv_shape()),
                              .saved = {.probs = TensorView(probs.data(), p.probs_shape())},
                              .out = on_device});
      },
      {"attention output", "CUDA device"});
  std::vector<float> dqkv(12);
  test::expect_error_containing_all(
      [&] {
        attention_backward(p, {.qkv = TensorView(qkv.data(), p.qkv_shape()),
                               .saved = {.probs = TensorView(probs.data(), p.probs_shape())},
                               .dout = TensorView(out.data(), p.out_shape()),
                               .dqkv = TensorView(dqkv.data(), p.qkv_shape(), Device::kCuda)});
      },
      {"attention qkv gradient", "CUDA device"});
}

}  // namespace
}  // namespace hfta
