// Fused conv_transpose2d on the op harness (tests/op_harness.h): the oneDNN deconvolution on B
// models equals the reference on each model alone, forward and every gradient, grouped and per
// model, for every layer of DCGAN's generators (64x64 and 28x28) at small N and for odd sizes,
// strides 1-3, paddings 0-2, bias on and off, shared input; the reference equals finite
// differences and conv2d's input gradient (the adjoint), and puts PyTorch's weight where PyTorch
// does; bad shapes raise hfta::Error.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "conv_test_util.h"
#include "fused_ops/conv2d.h"
#include "fused_ops/conv_transpose2d.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::expect_error_containing;
using test::Layout;
using test::OpCase;
using test::Role;
using test::SumTolerance;
using test::TensorSpec;
using Strategy = cpu::ConvTranspose2dStrategy;

// Sets the CPU kernel's strategy for one scope, restoring the previous one after.
struct StrategyScope {
  Strategy saved = cpu::conv_transpose2d_strategy();
  explicit StrategyScope(Strategy s) { cpu::set_conv_transpose2d_strategy(s); }
  ~StrategyScope() { cpu::set_conv_transpose2d_strategy(saved); }
};

struct DeconvCase {
  int64_t N, cin, cout, H, W, kh, kw, sh, sw, ph, pw;
  bool bias, shared;
};

ConvTranspose2dParams params_for(int64_t B, const DeconvCase& c) {
  ConvTranspose2dParams p;
  p.B = B, p.N = c.N, p.in_channels = c.cin, p.out_channels = c.cout, p.H = c.H, p.W = c.W;
  p.kernel_h = c.kh, p.kernel_w = c.kw, p.stride_h = c.sh, p.stride_w = c.sw;
  p.pad_h = c.ph, p.pad_w = c.pw, p.bias = c.bias, p.shared_input = c.shared;
  return p;
}

// The harness's params: the op's, and the strategy the fast path runs under.
struct TP {
  int64_t B = 1;
  ConvTranspose2dParams p;
  Strategy strategy = Strategy::kAuto;
  ConvTranspose2dParams params() const {
    ConvTranspose2dParams q = p;
    q.B = B;
    return q;
  }
};

struct ConvTranspose2dOp {
  using Params = TP;
  static std::string describe(const TP& t) {
    const ConvTranspose2dParams p = t.params();
    StrategyScope scope(t.strategy);
    return fmt::format(
        "{} N={} C={}->{} {}x{} k={}x{} s={}x{} pad={}x{} bias={} shared={}",
        cpu::conv_transpose2d_strategy_for(p) == Strategy::kGrouped ? "grouped" : "per-model", p.N,
        p.in_channels, p.out_channels, p.H, p.W, p.kernel_h, p.kernel_w, p.stride_h, p.stride_w,
        p.pad_h, p.pad_w, p.bias, p.shared_input);
  }
  // Sums of products of values in [-1, 1] (SumTolerance): an output pixel sums at most
  // C_in * kH * kW products and the bias, an input gradient C_out * kH * kW, a weight gradient
  // N * H * W, a bias gradient N * OH * OW.
  static std::vector<TensorSpec> tensors(const TP& t, const OpCase<TP>& c) {
    const ConvTranspose2dParams p = t.params();
    const int64_t taps = p.kernel_h * p.kernel_w;
    const SumTolerance fwd(p.in_channels * taps + 1), dx(p.out_channels * taps);
    const SumTolerance param(p.N * std::max(p.H * p.W, p.out_h() * p.out_w()));
    const Layout xl = p.shared_input ? Layout::kShared : Layout::kChannels;
    std::vector<TensorSpec> v = {
        {.name = "x", .shape = p.x_shape(), .layout = xl, .channels = p.in_channels},
        {.name = "weight", .shape = p.weight_shape()},
        {.name = "dy",
         .shape = p.y_shape(),
         .layout = Layout::kChannels,
         .channels = p.out_channels},
        {.name = "y",
         .shape = p.y_shape(),
         .layout = Layout::kChannels,
         .role = Role::kOutput,
         .atol = fwd.atol,
         .rtol = fwd.rtol,
         .channels = p.out_channels},
        {.name = "dweight",
         .shape = p.weight_shape(),
         .role = Role::kParamGrad,
         .atol = param.atol,
         .rtol = param.rtol},
    };
    if (p.bias) {
      v.push_back({.name = "bias", .shape = p.bias_shape()});
      v.push_back({.name = "dbias",
                   .shape = p.bias_shape(),
                   .role = Role::kParamGrad,
                   .atol = param.atol,
                   .rtol = param.rtol});
    }
    if (!c.no_dx)
      v.push_back({.name = "dx",
                   .shape = p.x_shape(),
                   .layout = xl,
                   .role = Role::kInputGrad,
                   .atol = dx.atol,
                   .rtol = dx.rtol,
                   .channels = p.in_channels});
    return v;
  }
  static void run(const TP& t, const test::Views& v, const test::RunContext& ctx) {
    const ConvTranspose2dParams p = t.params();
    const ConvTranspose2dForwardArgs f{
        .x = v("x"), .weight = v("weight"), .bias = v("bias"), .y = v("y")};
    const ConvTranspose2dBackwardArgs b{.x = v("x"),
                                        .weight = v("weight"),
                                        .dy = v("dy"),
                                        .dx = v("dx"),
                                        .dweight = v("dweight"),
                                        .dbias = v("dbias"),
                                        .accumulate_dx = ctx.accumulate_dx};
    if (ctx.ref) {
      ref::conv_transpose2d_forward(p, f);
      if (!ctx.forward_only) ref::conv_transpose2d_backward(p, b);
    } else {
      StrategyScope scope(t.strategy);
      conv_transpose2d_forward(p, f);
      conv_transpose2d_backward(p, b);
    }
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() {
    return {{"x", "dx"}, {"weight", "dweight"}, {"bias", "dbias"}};
  }
  // Linear in every input: no truncation error; the rounding of the few outputs a perturbed
  // element touches (|y| <~ 10, u|y| ~ 1e-6 each) over 2*eps.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 1e-3, 1e-3}; }
};

const char* strategy_name(Strategy s) {
  return s == Strategy::kGrouped ? "grouped" : s == Strategy::kPerModel ? "permodel" : "auto";
}

OpCase<TP> deconv_case(const DeconvCase& dc, int64_t B, Strategy strategy, bool accumulate,
                       bool no_dx, int threads, const std::string& suffix = "") {
  OpCase<TP> c;
  c.p.p = params_for(B, dc);
  c.p.strategy = strategy;
  c.B = B;
  c.threads = threads;
  c.accumulate_dx = accumulate && !no_dx;
  c.no_dx = no_dx;
  c.name =
      fmt::format("N{}_c{}to{}_{}x{}_k{}x{}_s{}x{}_p{}x{}{}{}_B{}_{}_t{}{}{}{}", dc.N, dc.cin,
                  dc.cout, dc.H, dc.W, dc.kh, dc.kw, dc.sh, dc.sw, dc.ph, dc.pw,
                  dc.bias ? "" : "_nobias", dc.shared ? "_shared" : "", B, strategy_name(strategy),
                  threads, c.accumulate_dx ? "_acc" : "", no_dx ? "_nodx" : "", suffix);
  return c;
}

// Odd and small geometries under each strategy, B in {1, 2, 3, 8}, 1 and 2 threads, half of them
// accumulating dx; finite differences on the smallest.
std::vector<OpCase<TP>> geometry_cases() {
  // N, cin, cout, H, W, kh, kw, sh, sw, ph, pw, bias, shared
  const DeconvCase cases[] = {
      {2, 3, 4, 5, 4, 3, 3, 1, 1, 0, 0, true, false},    // stride 1, pad 0, odd sizes
      {2, 3, 5, 4, 5, 3, 3, 2, 2, 1, 1, true, false},    // stride 2, pad 1
      {2, 4, 3, 3, 3, 4, 4, 2, 2, 1, 1, false, false},   // DCGAN's k4 s2 p1, no bias
      {1, 2, 3, 5, 3, 3, 2, 2, 1, 0, 1, true, false},    // non-square kernel, stride, padding
      {2, 3, 2, 3, 4, 2, 2, 3, 3, 0, 0, true, false},    // stride > kernel: outputs no tap hits
      {2, 2, 3, 3, 3, 3, 3, 2, 2, 2, 2, true, false},    // padding trims most of the kernel
      {2, 5, 7, 1, 1, 4, 4, 1, 1, 0, 0, true, false},    // 1x1 -> 4x4, DCGAN's first layer
      {2, 16, 16, 4, 4, 4, 4, 2, 2, 1, 1, true, false},  // one channel block
      {2, 17, 15, 3, 3, 4, 4, 2, 2, 1, 1, true, false},  // around the 16-channel block
      {2, 32, 8, 3, 5, 3, 3, 1, 1, 1, 1, false, false},  // blocked input, 8 outputs
      {2, 5, 6, 1, 1, 4, 4, 1, 1, 0, 0, true, true},     // shared noise -> 4x4
      {2, 3, 4, 3, 4, 4, 4, 2, 2, 1, 1, false, true},    // shared, stride 2, no bias
      {1, 16, 32, 2, 3, 4, 4, 2, 2, 1, 1, true, true},   // shared, blocked
  };
  std::vector<OpCase<TP>> out;
  int64_t k = 0;
  for (const DeconvCase& dc : cases)
    for (Strategy strategy : {Strategy::kAuto, Strategy::kGrouped, Strategy::kPerModel})
      for (int64_t B : test::model_counts()) {
        if (B == 8 && strategy != Strategy::kAuto) continue;
        OpCase<TP> c = deconv_case(dc, B, strategy, k % 2 == 0, false, 1 + int(k % 3 != 0));
        ++k;
        c.fd = B == 1 && strategy == Strategy::kAuto && dc.N * dc.cin * dc.H * dc.W <= 80;
        out.push_back(c);
      }
  return out;
}

// Every layer of DCGAN's generator at small N: 64x64 images (nz = 100, ngf = 64, nc = 3) and
// the 28x28 variant (7x7 start), two models, with the first layer also on a shared input and
// without dx (training asks none of the noise).
std::vector<OpCase<TP>> dcgan_cases() {
  // N, cin, cout, H, W, kh, kw, sh, sw, ph, pw, bias, shared
  const DeconvCase layers[] = {
      {2, 100, 512, 1, 1, 4, 4, 1, 1, 0, 0, false, false},   // 1x1 -> 4x4
      {2, 512, 256, 4, 4, 4, 4, 2, 2, 1, 1, false, false},   // 4 -> 8
      {2, 256, 128, 8, 8, 4, 4, 2, 2, 1, 1, false, false},   // 8 -> 16
      {2, 128, 64, 16, 16, 4, 4, 2, 2, 1, 1, false, false},  // 16 -> 32
      {2, 64, 3, 32, 32, 4, 4, 2, 2, 1, 1, false, false},    // 32 -> 64
      {2, 100, 256, 1, 1, 7, 7, 1, 1, 0, 0, true, false},    // 28x28: 1x1 -> 7x7
      {2, 256, 128, 7, 7, 4, 4, 2, 2, 1, 1, true, false},    // 7 -> 14
      {2, 128, 1, 14, 14, 4, 4, 2, 2, 1, 1, true, false},    // 14 -> 28
  };
  std::vector<OpCase<TP>> out;
  int k = 0;
  for (const DeconvCase& dc : layers) {
    out.push_back(deconv_case(dc, 2, Strategy::kAuto, k % 2 == 1, false, 2));
    ++k;
  }
  DeconvCase first = layers[0];
  out.push_back(deconv_case(first, 1, Strategy::kAuto, false, true, 2));
  out.push_back(deconv_case(first, 3, Strategy::kAuto, false, true, 1));
  out.push_back(deconv_case(first, 3, Strategy::kPerModel, true, false, 2));
  first.shared = true;
  out.push_back(deconv_case(first, 3, Strategy::kAuto, false, true, 2));
  out.push_back(deconv_case(layers[4], 3, Strategy::kPerModel, false, false, 1));
  return out;
}

class ConvTranspose2dHarness : public ::testing::TestWithParam<OpCase<TP>> {};
TEST_P(ConvTranspose2dHarness, FusedEqualsSerial) { test::run_case<ConvTranspose2dOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Geometry, ConvTranspose2dHarness, ::testing::ValuesIn(geometry_cases()),
                         test::CaseName());
INSTANTIATE_TEST_SUITE_P(Dcgan, ConvTranspose2dHarness, ::testing::ValuesIn(dcgan_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one). The CPU strategy is no device setting: only
// the kAuto cases go (describe() names the CPU strategy, so device_cases would keep each).
bool auto_strategy(const OpCase<TP>& c) { return c.p.strategy == Strategy::kAuto; }
INSTANTIATE_TEST_SUITE_P(OnCudaGeometry, ConvTranspose2dHarness,
                         ::testing::ValuesIn(test::device_cases<ConvTranspose2dOp>(geometry_cases(),
                                                                                   Device::kCuda,
                                                                                   auto_strategy)),
                         test::CaseName());
INSTANTIATE_TEST_SUITE_P(OnCudaDcgan, ConvTranspose2dHarness,
                         ::testing::ValuesIn(test::device_cases<ConvTranspose2dOp>(dcgan_cases(),
                                                                                   Device::kCuda,
                                                                                   auto_strategy)),
                         test::CaseName());

// Everything of one fused problem, filled from one seed.
struct Problem {
  ConvTranspose2dParams p;
  Buffer x, w, bias, dy, y, dx, dw, db;
  Problem(const ConvTranspose2dParams& p_, uint64_t seed) : p(p_) {
    RngStream rng(seed, 0);
    x = test::random_buffer(p.x_shape(), rng), w = test::random_buffer(p.weight_shape(), rng);
    bias = test::random_buffer(p.bias_shape(), rng), dy = test::random_buffer(p.y_shape(), rng);
    y = test::random_buffer(p.y_shape(), rng), dx = test::random_buffer(p.x_shape(), rng);
    dw = test::random_buffer(p.weight_shape(), rng), db = test::random_buffer(p.bias_shape(), rng);
  }
  ConvTranspose2dForwardArgs forward_args() {
    return {.x = x.view(), .weight = w.view(), .bias = bias.view(), .y = y.view()};
  }
};

// PyTorch's layout, independently of the reference: one input pixel with x = 1 on channel c
// scatters weight[b, c] (PyTorch's ConvTranspose2d.weight[c], [C_out, kH, kW]) into the output
// as is, plus the bias; fused grouped, per model and reference alike.
TEST(ConvTranspose2d, OnePixelScattersPyTorchsWeightSlice) {
  const DeconvCase dc{1, 3, 5, 1, 1, 4, 3, 1, 1, 0, 0, true, false};
  const ConvTranspose2dParams p = params_for(2, dc);
  Problem f(p, test::seed_for_test());
  const int64_t c = 1, taps = p.kernel_h * p.kernel_w;
  std::fill(f.x.values.begin(), f.x.values.end(), 0.0f);
  for (int64_t b = 0; b < p.B; ++b) f.x.values[b * p.in_channels + c] = 1.0f;
  for (Strategy s : {Strategy::kGrouped, Strategy::kPerModel}) {
    StrategyScope scope(s);
    for (bool use_ref : {false, true}) {
      SCOPED_TRACE(fmt::format("{} ref={}", strategy_name(s), use_ref));
      if (use_ref)
        ref::conv_transpose2d_forward(p, f.forward_args());
      else
        conv_transpose2d_forward(p, f.forward_args());
      for (int64_t b = 0; b < p.B; ++b)
        for (int64_t o = 0; o < p.out_channels; ++o)
          for (int64_t t = 0; t < taps; ++t) {
            const float want =
                f.w.values[((b * p.in_channels + c) * p.out_channels + o) * taps + t] +
                f.bias.values[b * p.out_channels + o];
            EXPECT_FLOAT_EQ(f.y.values[(b * p.out_channels + o) * taps + t], want)
                << "b=" << b << " o=" << o << " tap=" << t;
          }
    }
  }
}

// The transposed convolution is the adjoint of Conv2d: its forward is Conv2d's input gradient for
// Conv2d(C_out -> C_in, same kernel, stride and padding) on the output-sized input, with the very
// same weight bytes ([C_in, C_out, kH, kW] is that Conv2d's [out, in, kH, kW]). Checks the
// reference against conv2d's, an independent implementation.
TEST(ConvTranspose2d, ReferenceForwardIsConv2dInputGradient) {
  // N, cin, cout, H, W, kh, kw, sh, sw, ph, pw, bias, shared
  const DeconvCase cases[] = {{2, 3, 4, 5, 4, 3, 3, 1, 1, 0, 0, false, false},
                              {2, 3, 5, 4, 5, 3, 3, 2, 2, 1, 1, false, false},
                              {1, 4, 3, 3, 3, 4, 4, 2, 2, 1, 1, false, false},
                              {2, 3, 2, 3, 4, 2, 3, 3, 2, 0, 1, false, false},
                              {1, 2, 3, 3, 3, 3, 3, 2, 2, 2, 2, false, false}};
  uint64_t seed = test::seed_for_test();
  for (const DeconvCase& dc : cases) {
    HFTA_SEEDED_TRACE(seed);
    Problem f(params_for(2, dc), seed++);
    ref::conv_transpose2d_forward(f.p, f.forward_args());
    Conv2dParams q;
    q.B = f.p.B, q.N = f.p.N, q.in_channels = f.p.out_channels, q.out_channels = f.p.in_channels;
    q.H = f.p.out_h(), q.W = f.p.out_w(), q.kernel_h = f.p.kernel_h, q.kernel_w = f.p.kernel_w;
    q.stride_h = f.p.stride_h, q.stride_w = f.p.stride_w, q.pad_h = f.p.pad_h, q.pad_w = f.p.pad_w,
    q.bias = false;
    ASSERT_EQ(q.y_shape(), f.p.x_shape());
    Buffer conv_x(q.x_shape()), conv_dx(q.x_shape());
    ref::conv2d_backward(q, {.x = conv_x.view(),
                             .weight = f.w.view(),  // [B, C_in, C_out, kH, kW] == conv's weight
                             .dy = f.x.view(),
                             .dx = conv_dx.view()});
    expect_close(f.y, conv_dx, 1e-6, 1e-6, "deconv forward vs conv2d input gradient");
  }
}

// The cached primitives run again on new buffers and values: a second call with other data
// equals the reference; skipped gradients (empty views) are left alone, and the bias gradient
// alone (no weight gradient) still accumulates.
TEST(ConvTranspose2d, RepeatedCallsAndSkippedGradients) {
  const DeconvCase dc{2, 16, 8, 3, 4, 4, 4, 2, 2, 1, 1, true, false};
  uint64_t seed = test::seed_for_test();
  for (Strategy s : {Strategy::kGrouped, Strategy::kPerModel}) {
    StrategyScope scope(s);
    for (int call = 0; call < 2; ++call) {
      HFTA_SEEDED_TRACE(seed);
      SCOPED_TRACE(fmt::format("{} call {}", strategy_name(s), call));
      Problem f(params_for(3, dc), seed++), r = f;
      conv_transpose2d_forward(f.p, f.forward_args());
      ref::conv_transpose2d_forward(r.p, r.forward_args());
      const SumTolerance fwd(f.p.in_channels * 16 + 1);
      expect_close(f.y, r.y, fwd.atol, fwd.rtol, "y");
      // Bias gradient alone; dx and dweight untouched.
      const Buffer dx0 = f.dx, dw0 = f.dw;
      conv_transpose2d_backward(
          f.p, {.x = f.x.view(), .weight = f.w.view(), .dy = f.dy.view(), .dbias = f.db.view()});
      ref::conv_transpose2d_backward(
          r.p, {.x = r.x.view(), .weight = r.w.view(), .dy = r.dy.view(), .dbias = r.db.view()});
      const SumTolerance param(f.p.N * f.p.out_h() * f.p.out_w());
      expect_close(f.db, r.db, param.atol, param.rtol, "dbias alone");
      expect_close(f.dx, dx0, 0.0, 0.0, "dx untouched");
      expect_close(f.dw, dw0, 0.0, 0.0, "dweight untouched");
      // Input gradient alone.
      const Buffer db0 = f.db;
      conv_transpose2d_backward(
          f.p, {.x = f.x.view(), .weight = f.w.view(), .dy = f.dy.view(), .dx = f.dx.view()});
      ref::conv_transpose2d_backward(
          r.p, {.x = r.x.view(), .weight = r.w.view(), .dy = r.dy.view(), .dx = r.dx.view()});
      const SumTolerance dx(f.p.out_channels * 16);
      expect_close(f.dx, r.dx, dx.atol, dx.rtol, "dx alone");
      expect_close(f.db, db0, 0.0, 0.0, "dbias untouched");
    }
  }
  EXPECT_GE(cpu::conv_transpose2d_cached_problems(), 1);
  EXPECT_LE(cpu::conv_transpose2d_cached_problems(), 32);
}

TEST(ConvTranspose2d, StrategyChoice) {
  const DeconvCase plain{2, 16, 8, 3, 4, 4, 4, 2, 2, 1, 1, true, false};
  DeconvCase shared = plain;
  shared.shared = true;
  StrategyScope scope(Strategy::kAuto);
  EXPECT_EQ(cpu::conv_transpose2d_strategy_for(params_for(4, plain)), Strategy::kGrouped);
  EXPECT_EQ(cpu::conv_transpose2d_strategy_for(params_for(4, shared)), Strategy::kPerModel);
  EXPECT_EQ(cpu::conv_transpose2d_strategy_for(params_for(1, shared)), Strategy::kGrouped);
  cpu::set_conv_transpose2d_strategy(Strategy::kGrouped);
  EXPECT_EQ(cpu::conv_transpose2d_strategy_for(params_for(4, shared)), Strategy::kPerModel);
  cpu::set_conv_transpose2d_strategy(Strategy::kPerModel);
  EXPECT_EQ(cpu::conv_transpose2d_strategy_for(params_for(4, plain)), Strategy::kPerModel);
  EXPECT_EQ(cpu::conv_transpose2d_strategy_for(params_for(1, plain)), Strategy::kGrouped);
}

TEST(ConvTranspose2d, BadShapesAndSizesRaiseClearErrors) {
  const DeconvCase dc{2, 4, 6, 3, 5, 4, 4, 2, 2, 1, 1, true, false};
  const ConvTranspose2dParams p = params_for(2, dc);
  Problem f(p, test::seed_for_test());
  auto forward_with = [&](const ConvTranspose2dParams& q) {
    return [&f, q] { conv_transpose2d_forward(q, f.forward_args()); };
  };
  // PyTorch's [C_in, C_out] order: the conv2d order [C_out, C_in] is a shape error.
  Buffer conv_order_w(Shape{2, 6, 4, 4, 4});
  expect_error_containing(
      [&] {
        conv_transpose2d_forward(p, {.x = f.x.view(),
                                     .weight = conv_order_w.view(),
                                     .bias = f.bias.view(),
                                     .y = f.y.view()});
      },
      "conv_transpose2d weight has shape [2, 6, 4, 4, 4], expected [2, 4, 6, 4, 4]");
  expect_error_containing(
      [&] {
        conv_transpose2d_forward(
            p, {.x = f.x.view(), .weight = f.w.view(), .bias = {}, .y = f.y.view()});
      },
      "conv_transpose2d bias is missing");
  ConvTranspose2dParams bad = p;
  bad.pad_h = 4;  // (3-1)*2 + 4 = 8 rows, all trimmed
  expect_error_containing(forward_with(bad), "conv_transpose2d has no output along h");
  bad = p;
  bad.stride_w = 0;
  expect_error_containing(forward_with(bad), "stride_w=0 must be positive");
  bad = p;
  bad.kernel_h = -1;
  expect_error_containing(forward_with(bad), "kernel_h=-1");
  bad = p;
  bad.pad_w = -1;
  expect_error_containing(forward_with(bad), "pad_w=-1 must be zero or positive");
  bad = p;
  bad.in_channels = 0;
  expect_error_containing(forward_with(bad), "conv_transpose2d sizes must be positive");
  bad = p;
  bad.shared_input = true;  // a shared input is [N, C_in, H, W]
  expect_error_containing(forward_with(bad),
                          "conv_transpose2d input has shape [2, 8, 3, 5], expected [2, 4, 3, 5]");
  // The output size is PyTorch's (H-1)*s - 2p + k: 6 x 10 here, not the conv formula's.
  Buffer wrong_y(Shape{2, 12, 5, 9});
  expect_error_containing(
      [&] {
        conv_transpose2d_forward(
            p, {.x = f.x.view(), .weight = f.w.view(), .bias = f.bias.view(), .y = wrong_y.view()});
      },
      "conv_transpose2d output has shape [2, 12, 5, 9], expected [2, 12, 6, 10]");
  Buffer wrong_dx(Shape{2, 8, 5, 3});
  expect_error_containing(
      [&] {
        conv_transpose2d_backward(
            p, {.x = f.x.view(), .weight = f.w.view(), .dy = f.dy.view(), .dx = wrong_dx.view()});
      },
      "conv_transpose2d input gradient has shape [2, 8, 5, 3]");
  expect_error_containing(
      [&] {
        conv_transpose2d_backward(
            p, {.x = f.x.view(), .weight = f.w.view(), .dy = f.x.view(), .dx = f.dx.view()});
      },
      "conv_transpose2d output gradient has shape");
}

}  // namespace
}  // namespace hfta
