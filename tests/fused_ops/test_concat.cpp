// Concatenation along features (rows layout) and channels (channels layout) on the op harness
// (tests/op_harness.h): fused(B) equals B reference single-model runs exactly (y, and every dx
// written and accumulated), for 1 to 8 inputs, sizes on both sides of the 16-float vector width
// and of the kernel's 16K-float chunk; reference gradients equal finite differences; each dx
// follows its own accumulate flag and may be skipped; torch.cat by hand; bad shapes raise
// hfta::Error. The harness's cases run again on the GPU (OnCuda, skipped without one).
#include <functional>
#include <limits>

#include "fused_ops/concat.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::expect_error_containing;
using test::Layout;
using test::OpCase;
using test::random_buffer;
using test::Role;
using test::TensorSpec;

// Copies (and at most one addition per element): every comparison is exact.
struct ConcatOp {
  using Params = ConcatParams;
  static std::string describe(const ConcatParams& p) {
    return fmt::format("{} R={} N={} S={} C={}",
                       p.layout == ConcatLayout::kRows ? "rows" : "channels", p.R, p.N, p.S,
                       fmt::join(p.C.begin(), p.C.begin() + p.inputs, ","));
  }
  static std::vector<TensorSpec> tensors(const ConcatParams& p, const OpCase<ConcatParams>& c) {
    const Layout layout = p.layout == ConcatLayout::kRows ? Layout::kModelMajor : Layout::kChannels;
    auto spec = [&](std::string name, Shape shape, Role role, int64_t channels) {
      return TensorSpec{.name = std::move(name),
                        .shape = shape,
                        .layout = layout,
                        .role = role,
                        .atol = 0,
                        .rtol = 0,
                        .channels = channels};
    };
    std::vector<TensorSpec> t = {spec("y", p.y_shape(), Role::kOutput, p.total_C()),
                                 spec("dy", p.y_shape(), Role::kInput, p.total_C())};
    for (int i = 0; i < p.inputs; ++i) {
      t.push_back(spec(fmt::format("x{}", i), p.input_shape(i), Role::kInput, p.C[i]));
      // no_dx: input 0's gradient is not wanted (an empty view is skipped).
      if (!(c.no_dx && i == 0))
        t.push_back(spec(fmt::format("dx{}", i), p.input_shape(i), Role::kInputGrad, p.C[i]));
    }
    return t;
  }
  static void run(const ConcatParams& p, const test::Views& v, const test::RunContext& ctx) {
    ConcatForwardArgs f{.y = v("y")};
    ConcatBackwardArgs b{.dy = v("dy")};
    for (int i = 0; i < p.inputs; ++i) {
      f.x[i] = v(fmt::format("x{}", i));
      b.dx[i] = v(fmt::format("dx{}", i));
      b.accumulate_dx[i] = ctx.accumulate_dx;
    }
    (ctx.ref ? ref::concat_forward : concat_forward)(p, f);
    if (ctx.forward_only) return;
    (ctx.ref ? ref::concat_backward : concat_backward)(p, b);
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() {
    std::vector<std::pair<std::string, std::string>> g;
    for (int i = 0; i < kMaxConcatInputs; ++i)
      g.emplace_back(fmt::format("x{}", i), fmt::format("dx{}", i));
    return g;
  }
  // Linear: no truncation error; rounding of L (|y| <= 1, <= 60 outputs) over 2*eps.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 5e-4, 5e-4}; }
};

std::vector<OpCase<ConcatParams>> concat_cases() {
  struct Size {
    ConcatLayout layout;
    int64_t R_or_N, S;
    std::vector<int64_t> C;
    bool fd = false;
  };
  using enum ConcatLayout;
  const std::vector<Size> sizes = {
      {kRows, 1, 1, {3}},                           // one input: a copy
      {kRows, 7, 1, {15, 17}},                      // across a vector width
      {kRows, 5, 1, {16, 1, 64}},                   // PointNet-like and a single feature
      {kRows, 300, 1, {64, 128, 1024}},             // several 16K-float chunks
      {kRows, 3, 1, {1, 2, 3, 4, 5, 6, 7, 8}},      // the most inputs
      {kChannels, 2, 7, {3, 5}},                    // [N, B*C_i, S]
      {kChannels, 1, 1, {16, 17}},                  // S = 1: a channels vector per sample
      {kChannels, 3, 40, {2, 130, 1}},              // chunks of several samples
      {kChannels, 2, 3, {1, 2, 3, 4, 5, 6, 7, 8}},  // the most inputs
      {kRows, 2, 1, {2, 3}, true},                  // finite differences
      {kChannels, 2, 2, {1, 2, 1}, true},
  };
  std::vector<OpCase<ConcatParams>> cases;
  int k = 0;
  for (const Size& s : sizes)
    for (int64_t B : test::model_counts()) {
      OpCase<ConcatParams> c;
      c.p.layout = s.layout;
      c.p.R = s.layout == kRows ? s.R_or_N : 1;
      c.p.N = s.layout == kChannels ? s.R_or_N : 1;
      c.p.S = s.S;
      c.p.inputs = static_cast<int>(s.C.size());
      std::copy(s.C.begin(), s.C.end(), c.p.C.begin());
      c.B = B;
      c.threads = 1 + (k++ % 3);
      c.accumulate_dx = (s.R_or_N + s.S + B) % 2 == 1;
      c.no_dx = s.C.size() > 1 && B == 2;
      c.fd = s.fd && B == 1;
      c.name = fmt::format("{}_{}{}_S{}_C{}_B{}_t{}{}{}{}", s.layout == kRows ? "rows" : "channels",
                           s.layout == kRows ? "R" : "N", s.R_or_N, s.S, fmt::join(s.C, "_"), B,
                           c.threads, c.accumulate_dx ? "_acc" : "", c.no_dx ? "_nodx0" : "",
                           c.fd ? "_fd" : "");
      cases.push_back(c);
    }
  return cases;
}

class ConcatHarness : public ::testing::TestWithParam<OpCase<ConcatParams>> {};
TEST_P(ConcatHarness, FusedEqualsSerial) { test::run_case<ConcatOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, ConcatHarness, ::testing::ValuesIn(concat_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCuda, ConcatHarness,
                         ::testing::ValuesIn(test::device_cases<ConcatOp>(concat_cases(),
                                                                          Device::kCuda)),
                         test::CaseName());

// torch.cat(dim=1) per model, by hand, on the channels layout: B = 2, N = 1, S = 2, inputs of
// 1 and 2 channels. Model b's output channels: input 0's, then input 1's.
TEST(Concat, ChannelsLayoutByHand) {
  ConcatParams p{.layout = ConcatLayout::kChannels, .B = 2, .N = 1, .S = 2, .inputs = 2};
  p.C = {1, 2};
  Buffer a(p.input_shape(0)), b(p.input_shape(1)), y(p.y_shape());
  a.values = {1, 2, /* model 1 */ 3, 4};
  b.values = {10, 11, 12, 13, /* model 1 */ 14, 15, 16, 17};
  concat_forward(p, {.x = {a.view(), b.view()}, .y = y.view()});
  const std::vector<float> want = {1, 2, 10, 11, 12, 13, /* model 1 */ 3, 4, 14, 15, 16, 17};
  EXPECT_EQ(y.values, want);
}

// Each dx follows its own accumulate flag, and a skipped one is left untouched: fused B = 3 with
// three inputs against the reference, rows and channels layouts.
TEST(Concat, GradientsFollowTheirOwnAccumulateFlags) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 1);
  for (ConcatLayout layout : {ConcatLayout::kRows, ConcatLayout::kChannels}) {
    ConcatParams p{.layout = layout, .B = 3, .R = 5, .N = 2, .S = 3, .inputs = 3};
    p.C = {4, 17, 2};
    Buffer dy = random_buffer(p.y_shape(), rng);
    std::vector<Buffer> dx, dx_ref, before;
    for (int i = 0; i < 3; ++i) {
      Buffer start = random_buffer(p.input_shape(i), rng);
      if (i == 2) std::fill(start.values.begin(), start.values.end(), -7.0f);  // skipped
      if (i == 1)  // written: starts as NaN
        std::fill(start.values.begin(), start.values.end(),
                  std::numeric_limits<float>::quiet_NaN());
      dx.push_back(start), dx_ref.push_back(start), before.push_back(start);
    }
    concat_backward(p, {.dy = dy.view(),
                        .dx = {dx[0].view(), dx[1].view(), TensorView()},
                        .accumulate_dx = {true, false, true}});
    ref::concat_backward(p, {.dy = dy.view(),
                             .dx = {dx_ref[0].view(), dx_ref[1].view(), TensorView()},
                             .accumulate_dx = {true, false, true}});
    expect_close(dx[0], dx_ref[0], 0.0, 0.0, "dx0 (accumulated)");
    expect_close(dx[1], dx_ref[1], 0.0, 0.0, "dx1 (written)");
    expect_close(dx[2], before[2], 0.0, 0.0, "dx2 (skipped)");
    // Accumulated means start + slice of dy: the first model's first element of input 0.
    EXPECT_EQ(dx[0].values[0], before[0].values[0] + dy.values[0]);
  }
}

TEST(Concat, BadShapesRaiseClearErrors) {
  ConcatParams p{.B = 2, .R = 5, .inputs = 2};
  p.C = {3, 4};
  Buffer a(p.input_shape(0)), b(p.input_shape(1)), y(p.y_shape());
  expect_error_containing(
      [&] {
        concat_forward(p, {.x = {a.view(), a.view()}, .y = y.view()});
      },
      "concat input 1 has shape [2, 5, 3], expected [2, 5, 4]");
  expect_error_containing(
      [&] {
        concat_forward(p, {.x = {a.view(), b.view()}, .y = a.view()});
      },
      "concat output has shape [2, 5, 3], expected [2, 5, 7]");
  expect_error_containing([&] { concat_forward(p, {.x = {a.view()}, .y = y.view()}); },
                          "concat input 1 is missing");
  expect_error_containing(
      [&] {
        concat_forward(p, {.x = {a.view(), b.view(), a.view()}, .y = y.view()});
      },
      "concat x[2] is given but inputs=2");
  ConcatParams bad = p;
  bad.inputs = 9;
  expect_error_containing([&] { concat_forward(bad, {.y = y.view()}); },
                          "concat has inputs=9, expected 1 to 8");
  bad = p;
  bad.C[1] = 0;
  expect_error_containing(
      [&] {
        concat_forward(bad, {.x = {a.view(), b.view()}, .y = y.view()});
      },
      "concat input 1 has C[1]=0 features");
  ConcatParams channels{.layout = ConcatLayout::kChannels, .B = 2, .N = 5, .S = 0, .inputs = 1};
  channels.C = {3};
  expect_error_containing([&] { concat_forward(channels, {.x = {a.view()}, .y = y.view()}); },
                          "concat (channels) sizes must be positive");
  expect_error_containing(
      [&] {
        concat_backward(p, {.dy = y.view(), .dx = {b.view(), TensorView()}});
      },
      "concat input gradient 0 has shape [2, 5, 4], expected [2, 5, 3]");
  expect_error_containing([&] { concat_backward(p, {.dy = a.view()}); },
                          "concat output gradient has shape");
}

}  // namespace
}  // namespace hfta
