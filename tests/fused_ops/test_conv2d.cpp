// Fused conv2d: fused(B) equals B reference single-model runs, forward and every gradient;
// reference gradients equal finite differences; bad shapes and sizes raise hfta::Error.
//
// Measurements (fused vs B single convolutions, the per-model strategy, the machine's peak) are
// in docs/benchmarks.md: `op_bench conv2d ...` reproduces them; tests do not time anything.

#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/runtime.h"
#include "core/parallel.h"
#include "fused_ops/conv2d.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::random_buffer;

constexpr double kUnitRoundoff = 1.0 / 16777216.0;  // 2^-24, fp32

// Tolerance for a sum of K products of values in [-1, 1] (so sum |terms| <= K), computed in fp32
// by oneDNN in some blocked order and in double by the reference. Rounding errors of fp32
// summation grow like lambda * sqrt(K) * u * sum|terms| (Higham & Mary's probabilistic bound;
// lambda = 4 makes a miss vanishingly unlikely), hence 4 * sqrt(K) * K * u; the relative part
// covers the final rounding of both sides and the += of an accumulated gradient (a few u).
struct SumTolerance {
  double atol, rtol;
  explicit SumTolerance(int64_t K)
      : atol(4.0 * std::sqrt(double(K)) * double(K) * kUnitRoundoff), rtol(8.0 * kUnitRoundoff) {}
};

// Sets the CPU kernel's strategy for one scope, restoring the previous one after.
struct StrategyScope {
  cpu::Conv2dStrategy saved = cpu::conv2d_strategy();
  explicit StrategyScope(cpu::Conv2dStrategy s) { cpu::set_conv2d_strategy(s); }
  ~StrategyScope() { cpu::set_conv2d_strategy(saved); }
};

struct ConvCase {
  int64_t N, cin, cout, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  bool bias, shared;
};

Conv2dParams params_for(int64_t B, const ConvCase& c) {
  Conv2dParams p;
  p.B = B, p.N = c.N, p.in_channels = c.cin, p.out_channels = c.cout, p.H = c.H, p.W = c.W;
  p.kernel_h = c.kh, p.kernel_w = c.kw, p.stride_h = c.sh, p.stride_w = c.sw;
  p.pad_h = c.ph, p.pad_w = c.pw, p.dilation_h = c.dh, p.dilation_w = c.dw;
  p.groups = c.groups, p.bias = c.bias, p.shared_input = c.shared;
  return p;
}

// Model b's channels [b*C, (b+1)*C) of a fused [N, B*C, H, W] tensor, as its own [N, C, H, W].
Buffer channel_slice(const Buffer& t, int64_t b, int64_t C) {
  const int64_t N = t.shape[0], BC = t.shape[1], HW = t.shape[2] * t.shape[3];
  Buffer out(Shape{N, C, t.shape[2], t.shape[3]});
  for (int64_t n = 0; n < N; ++n)
    std::copy_n(t.values.data() + (n * BC + b * C) * HW, C * HW, out.data() + n * C * HW);
  return out;
}

// Model b's slice of a replica-major [B, ...] parameter, as a B=1 buffer.
Buffer replica_slice(const Buffer& t, int64_t b, Shape single) {
  Buffer out(single);
  std::copy_n(t.values.data() + b * single.numel_from(1), out.numel(), out.data());
  return out;
}

// Everything of one fused problem, filled from one seed.
struct Problem {
  Conv2dParams p;
  Buffer x, w, bias, dy, y, dx, dw, db, dw0, db0;
  Problem(const Conv2dParams& p_, uint64_t seed) : p(p_) {
    RngStream rng(seed, 0);
    x = random_buffer(p.x_shape(), rng), w = random_buffer(p.weight_shape(), rng);
    bias = random_buffer(p.bias_shape(), rng), dy = random_buffer(p.y_shape(), rng);
    y = random_buffer(p.y_shape(), rng);   // garbage: forward must overwrite it
    dx = random_buffer(p.x_shape(), rng);  // garbage: dx is written (=), not accumulated
    dw = random_buffer(p.weight_shape(), rng), db = random_buffer(p.bias_shape(), rng);
    dw0 = dw, db0 = db;  // accumulate semantics: parameter gradients start non-zero
  }
  TensorView bias_view() { return p.bias ? bias.view() : TensorView(); }
};

// Each model is run alone through the reference (B=1) and compared with its slice of the fused
// CPU result: the "fused equals serial" contract, literally. want_dx = false asks for no input
// gradient, as training asks of a first layer.
void check_fused_equals_serial(int64_t B, const ConvCase& c, uint64_t seed, bool want_dx = true) {
  HFTA_SEEDED_TRACE(seed);
  Problem f(params_for(B, c), seed);
  const Conv2dParams& p = f.p;
  const cpu::Conv2dStrategy chosen = cpu::conv2d_strategy_for(p);
  SCOPED_TRACE(std::string(chosen == cpu::Conv2dStrategy::kPerModel ? "per-model "
                           : chosen == cpu::Conv2dStrategy::kDirect ? "direct "
                                                                    : "grouped ") +
               fmt::format("B={} N={} C={}->{} {}x{} k={}x{} s={}x{} pad={}x{} dil={}x{} g={} "
                           "bias={} shared={}",
                           B, c.N, c.cin, c.cout, c.H, c.W, c.kh, c.kw, c.sh, c.sw, c.ph, c.pw,
                           c.dh, c.dw, c.groups, c.bias, c.shared));
  conv2d_forward(p,
                 {.x = f.x.view(), .weight = f.w.view(), .bias = f.bias_view(), .y = f.y.view()});
  const Buffer dx_before = f.dx;
  conv2d_backward(p, {.x = f.x.view(),
                      .weight = f.w.view(),
                      .dy = f.dy.view(),
                      .dx = want_dx ? f.dx.view() : TensorView(),
                      .dweight = f.dw.view(),
                      .dbias = c.bias ? f.db.view() : TensorView()});

  Conv2dParams one = p;
  one.B = 1;
  const SumTolerance fwd_tol(c.cin / c.groups * c.kh * c.kw + 1);
  const SumTolerance dx_tol((c.shared ? B : 1) * c.cout / c.groups * c.kh * c.kw);
  const SumTolerance param_tol(c.N * p.out_h() * p.out_w());
  Buffer dx_sum(p.x_shape());
  for (int64_t b = 0; b < B; ++b) {
    Buffer xb = c.shared ? f.x : channel_slice(f.x, b, c.cin);
    Buffer wb = replica_slice(f.w, b, one.weight_shape());
    Buffer biasb = replica_slice(f.bias, b, one.bias_shape());
    Buffer dyb = channel_slice(f.dy, b, c.cout);
    Buffer dwb = replica_slice(f.dw0, b, one.weight_shape());
    Buffer dbb = replica_slice(f.db0, b, one.bias_shape());
    Buffer yb(one.y_shape()), dxb(one.x_shape());
    ref::conv2d_forward(one, {.x = xb.view(),
                              .weight = wb.view(),
                              .bias = c.bias ? biasb.view() : TensorView(),
                              .y = yb.view()});
    ref::conv2d_backward(one, {.x = xb.view(),
                               .weight = wb.view(),
                               .dy = dyb.view(),
                               .dx = dxb.view(),
                               .dweight = dwb.view(),
                               .dbias = c.bias ? dbb.view() : TensorView()});
    SCOPED_TRACE(fmt::format("model b={}", b));
    expect_close(channel_slice(f.y, b, c.cout), yb, fwd_tol.atol, fwd_tol.rtol, "forward");
    expect_close(replica_slice(f.dw, b, one.weight_shape()), dwb, param_tol.atol, param_tol.rtol,
                 "weight grad (accumulated)");
    if (c.bias)
      expect_close(replica_slice(f.db, b, one.bias_shape()), dbb, param_tol.atol, param_tol.rtol,
                   "bias grad (accumulated)");
    else
      expect_close(replica_slice(f.db, b, one.bias_shape()),
                   replica_slice(f.db0, b, one.bias_shape()), 0.0, 0.0,
                   "bias grad untouched when bias=false");
    if (!want_dx) continue;
    if (c.shared)
      for (int64_t i = 0; i < dxb.numel(); ++i) dx_sum.values[i] += dxb.values[i];
    else
      expect_close(channel_slice(f.dx, b, c.cin), dxb, dx_tol.atol, dx_tol.rtol, "input grad");
  }
  if (!want_dx)
    expect_close(f.dx, dx_before, 0.0, 0.0, "skipped input grad untouched");
  else if (c.shared)
    expect_close(f.dx, dx_sum, dx_tol.atol, dx_tol.rtol, "shared input grad (sum)");
}

TEST(Conv2d, FusedEqualsSerial) {
  // N, cin, cout, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups, bias, shared
  const ConvCase cases[] = {
      {2, 3, 4, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},    // 3x3 pad 1, odd H/W
      {3, 4, 6, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, false},    // stride 2
      {2, 3, 5, 8, 7, 3, 2, 2, 1, 0, 1, 1, 1, 1, true, false},    // non-square kernel/stride/pad
      {2, 3, 5, 9, 7, 3, 3, 1, 1, 2, 2, 2, 2, 1, true, false},    // dilation 2
      {2, 2, 3, 9, 8, 3, 3, 2, 3, 1, 0, 2, 1, 1, true, false},    // dilation with stride
      {2, 4, 6, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 2, true, false},    // groups 2
      {2, 6, 6, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1, 6, true, false},    // depthwise, stride 2
      {2, 6, 12, 5, 7, 3, 3, 1, 1, 1, 1, 1, 1, 6, false, false},  // depthwise x2, no bias
      {2, 3, 5, 7, 5, 5, 5, 1, 1, 2, 2, 1, 1, 1, false, false},   // 5x5, bias off
      {3, 16, 32, 5, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false},  // 1x1, blocked channels
      {2, 16, 32, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},  // blocked 3x3
      {1, 32, 32, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, true, false},  // blocked groups
      {2, 2, 3, 8, 8, 3, 3, 3, 3, 2, 2, 1, 1, 1, true, false},    // stride leaves a remainder
      {2, 2, 3, 2, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},    // kernel larger than input
      {2, 2, 3, 4, 5, 3, 3, 1, 2, 4, 3, 1, 1, 1, true, false},    // padding wider than kernel
      {2, 3, 8, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true},     // shared input
      {2, 16, 16, 6, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, true},  // shared, stride, no bias
      {2, 4, 6, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1, 2, true, true},     // shared, groups 2
      {2, 4, 4, 7, 5, 3, 3, 1, 1, 2, 2, 2, 2, 4, false, true},    // shared depthwise, dilation
  };
  // Every case under both ways the CPU kernel maps the models onto oneDNN, and its own choice.
  for (auto strategy : {cpu::Conv2dStrategy::kAuto, cpu::Conv2dStrategy::kGrouped,
                        cpu::Conv2dStrategy::kPerModel}) {
    StrategyScope scope(strategy);
    uint64_t seed = test::seed_for_test();
    for (int64_t B : test::model_counts())
      for (const auto& c : cases) check_fused_equals_serial(B, c, seed++);
  }
}

// Per-model runs spread over the threads (each thread its own single-threaded primitives and
// blocked copies) or one after another with every thread inside oneDNN: both equal the
// reference, with two threads whatever the machine has, and B not a multiple of the threads.
TEST(Conv2d, PerModelRunsAcrossThreads) {
  const ConvCase cases[] = {
      {2, 16, 32, 6, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},  // blocked, our conversion
      {2, 3, 8, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},    // plain channels
      {2, 16, 16, 6, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, true},  // shared: dx sums the models
      {2, 4, 6, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1, 2, true, true},     // shared, groups 2
  };
  const int saved_threads = num_threads();
  const cpu::ModelParallelism saved_mode = cpu::model_parallelism();
  StrategyScope scope(cpu::Conv2dStrategy::kPerModel);
  cpu::set_num_threads(2);
  uint64_t seed = test::seed_for_test();
  for (auto mode : {cpu::ModelParallelism::kAcrossModels, cpu::ModelParallelism::kInsideOp,
                    cpu::ModelParallelism::kAuto}) {
    cpu::set_model_parallelism(mode);
    SCOPED_TRACE(fmt::format("model parallelism {}", static_cast<int>(mode)));
    for (int64_t B : {2, 3, 8})
      for (const auto& c : cases) check_fused_equals_serial(B, c, seed++);
  }
  cpu::set_model_parallelism(saved_mode);
  cpu::set_num_threads(saved_threads);
}

// The direct kernel (a shared input with few channels, stride 1): row widths of 1 to 4 vectors
// with and without a partial last vector, output channels over all models not a multiple of the
// kernel's channel block, more taps than one backward chunk holds (2 x 5x5, 7x7), no bias, no
// padding; with and without the input gradient (training's first layer asks for none), and the
// same cases forced onto oneDNN.
TEST(Conv2d, DirectKernelForASharedInput) {
  // N, cin, cout, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups, bias, shared
  const ConvCase cases[] = {
      {3, 1, 32, 28, 28, 5, 5, 1, 1, 2, 2, 1, 1, 1, true, true},  // LeNet's conv1, 2 vectors
      {2, 1, 5, 6, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true},    // one full vector, 5 channels
      {2, 1, 3, 4, 1, 3, 1, 1, 1, 1, 0, 1, 1, 1, false, true},    // 1 pixel wide, no bias
      {2, 2, 6, 7, 40, 5, 5, 1, 1, 2, 2, 1, 1, 1, true, true},    // 3 vectors, 50 taps
      {1, 3, 4, 5, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true},    // 4 full vectors
      {2, 1, 7, 9, 11, 7, 7, 1, 1, 3, 3, 1, 1, 1, true, true},    // 7x7: 49 taps
      {2, 4, 8, 6, 20, 3, 2, 1, 1, 0, 0, 1, 1, 1, true, true},    // 4 channels, no padding
  };
  uint64_t seed = test::seed_for_test();
  for (const ConvCase& c : cases)
    EXPECT_EQ(cpu::conv2d_strategy_for(params_for(2, c)), cpu::Conv2dStrategy::kDirect)
        << fmt::format("cin={} W={} k={}x{}", c.cin, c.W, c.kh, c.kw);
  for (auto strategy : {cpu::Conv2dStrategy::kDirect, cpu::Conv2dStrategy::kPerModel}) {
    StrategyScope scope(strategy);
    for (int64_t B : test::model_counts())
      for (const auto& c : cases)
        for (bool want_dx : {false, true}) check_fused_equals_serial(B, c, seed++, want_dx);
  }
  // Not for it: stride 2, 5 input channels, groups, a fused (unshared) input, rows wider than 64.
  const ConvCase others[] = {
      {2, 1, 4, 8, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, true},
      {2, 5, 4, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true},
      {2, 4, 4, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 2, true, true},
      {2, 1, 4, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},
      {1, 1, 2, 3, 66, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true},
  };
  StrategyScope scope(cpu::Conv2dStrategy::kDirect);
  for (const ConvCase& c : others) {
    EXPECT_NE(cpu::conv2d_strategy_for(params_for(2, c)), cpu::Conv2dStrategy::kDirect)
        << fmt::format("cin={} W={} stride={} groups={} shared={}", c.cin, c.W, c.sh, c.groups,
                       c.shared);
    check_fused_equals_serial(2, c, seed++, /*want_dx=*/false);
  }
}

TEST(Conv2d, StrategyChoice) {
  ConvCase shared_groups{2, 4, 6, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 2, true, true};
  ConvCase plain{2, 4, 6, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false};
  StrategyScope scope(cpu::Conv2dStrategy::kGrouped);
  EXPECT_EQ(cpu::conv2d_strategy_for(params_for(3, shared_groups)),
            cpu::Conv2dStrategy::kPerModel);  // cannot be one primitive
  EXPECT_EQ(cpu::conv2d_strategy_for(params_for(3, plain)), cpu::Conv2dStrategy::kGrouped);
  cpu::set_conv2d_strategy(cpu::Conv2dStrategy::kPerModel);
  EXPECT_EQ(cpu::conv2d_strategy_for(params_for(3, plain)), cpu::Conv2dStrategy::kPerModel);
  EXPECT_EQ(cpu::conv2d_strategy_for(params_for(1, plain)), cpu::Conv2dStrategy::kGrouped);
  // The default: per model for B > 1 (see fused_ops/cpu/conv2d.cpp), the single-model
  // convolution for B = 1.
  const ConvCase blocked{2, 16, 32, 6, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false};
  cpu::set_conv2d_strategy(cpu::Conv2dStrategy::kAuto);
  EXPECT_EQ(cpu::conv2d_strategy_for(params_for(8, blocked)), cpu::Conv2dStrategy::kPerModel);
  EXPECT_EQ(cpu::conv2d_strategy_for(params_for(1, blocked)), cpu::Conv2dStrategy::kGrouped);
}

// Skipped gradients (empty views) are neither computed nor touched; the bias gradient alone takes
// its own path (no weight gradient to compute it alongside); each gradient alone is right.
TEST(Conv2d, SkippedGradients) {
  const ConvCase cases[] = {
      {2, 4, 6, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 2, true, false},
      {2, 4, 6, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 2, true, true},
      {2, 16, 32, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},  // blocked layouts
      {2, 1, 8, 9, 20, 5, 5, 1, 1, 2, 2, 1, 1, 1, true, true},    // the direct kernel
  };
  for (const ConvCase& c : cases) {
    uint64_t seed = test::seed_for_test();
    HFTA_SEEDED_TRACE(seed);
    Problem f(params_for(3, c), seed), r(params_for(3, c), seed);
    conv2d_backward(f.p, {.x = f.x.view(),
                          .weight = f.w.view(),
                          .dy = f.dy.view(),
                          .dx = TensorView(),
                          .dweight = TensorView(),
                          .dbias = f.db.view()});
    ref::conv2d_backward(r.p, {.x = r.x.view(),
                               .weight = r.w.view(),
                               .dy = r.dy.view(),
                               .dx = TensorView(),
                               .dweight = TensorView(),
                               .dbias = r.db.view()});
    const SumTolerance tol(c.N * f.p.out_h() * f.p.out_w());
    expect_close(f.db, r.db, tol.atol, tol.rtol, "bias grad alone");
    expect_close(f.dw, f.dw0, 0.0, 0.0, "skipped weight grad untouched");
    conv2d_backward(f.p, {.x = f.x.view(),
                          .weight = f.w.view(),
                          .dy = f.dy.view(),
                          .dx = f.dx.view(),
                          .dweight = TensorView(),
                          .dbias = TensorView()});
    ref::conv2d_backward(r.p, {.x = r.x.view(),
                               .weight = r.w.view(),
                               .dy = r.dy.view(),
                               .dx = r.dx.view(),
                               .dweight = TensorView(),
                               .dbias = TensorView()});
    const SumTolerance dx_tol(3 * c.cout / c.groups * c.kh * c.kw);
    expect_close(f.dx, r.dx, dx_tol.atol, dx_tol.rtol, "input grad alone");
    expect_close(f.db, r.db, tol.atol, tol.rtol, "bias grad untouched by the dx-only call");
    // Weight grad alone, after a dx call, with a new dy: the kernel shares dy's blocked copy
    // between its two backward primitives, so this catches a stale copy.
    for (Problem* q : {&f, &r})
      for (float& v : q->dy.values) v = 0.5f - v;
    conv2d_backward(f.p, {.x = f.x.view(),
                          .weight = f.w.view(),
                          .dy = f.dy.view(),
                          .dx = TensorView(),
                          .dweight = f.dw.view(),
                          .dbias = TensorView()});
    ref::conv2d_backward(r.p, {.x = r.x.view(),
                               .weight = r.w.view(),
                               .dy = r.dy.view(),
                               .dx = TensorView(),
                               .dweight = r.dw.view(),
                               .dbias = TensorView()});
    const SumTolerance dw_tol(c.N * f.p.out_h() * f.p.out_w() * 2);  // |dy| < 1.5 here
    expect_close(f.dw, r.dw, dw_tol.atol, dw_tol.rtol, "weight grad alone");
  }
}

// The CPU kernel caches primitives per Conv2dParams: alternating shapes must each get their own
// primitives (a wrong key would run one shape's primitive on another's buffers).
TEST(Conv2d, PrimitiveCacheIsKeyedByTheWholeProblem) {
  uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  ConvCase a{2, 4, 6, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false};
  ConvCase b = a;
  b.H = 9;  // differs only in H
  ConvCase d = a;
  d.sh = 2;  // differs only in stride
  const int64_t before = cpu::conv2d_cached_problems();
  for (const ConvCase* c : {&a, &b, &d, &a, &b, &d}) {
    Problem f(params_for(2, *c), seed), r(params_for(2, *c), seed);
    conv2d_forward(f.p,
                   {.x = f.x.view(), .weight = f.w.view(), .bias = f.bias.view(), .y = f.y.view()});
    ref::conv2d_forward(
        r.p, {.x = r.x.view(), .weight = r.w.view(), .bias = r.bias.view(), .y = r.y.view()});
    const SumTolerance tol(c->cin * c->kh * c->kw + 1);
    expect_close(f.y, r.y, tol.atol, tol.rtol, fmt::format("forward H={} stride={}", c->H, c->sh));
  }
  EXPECT_LE(cpu::conv2d_cached_problems() - before, 3);
  Conv2dParams p = params_for(2, a);
  EXPECT_EQ(p, params_for(2, a));
  p.dilation_w = 2;
  EXPECT_NE(p, params_for(2, a));
}

// Two threads running the same problem share one cache entry (its blocked copies and scratch):
// the entry's mutex must serialize them.
TEST(Conv2d, ConcurrentCallsOnOneProblem) {
  uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  const ConvCase c{2, 16, 32, 6, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false};
  std::vector<Problem> fused, expected;
  for (uint64_t t = 0; t < 2; ++t) {
    fused.emplace_back(params_for(2, c), seed + t);
    expected.emplace_back(params_for(2, c), seed + t);
    Problem& r = expected.back();
    ref::conv2d_forward(
        r.p, {.x = r.x.view(), .weight = r.w.view(), .bias = r.bias.view(), .y = r.y.view()});
  }
  auto run = [&](Problem* f) {
    for (int i = 0; i < 20; ++i)
      conv2d_forward(
          f->p,
          {.x = f->x.view(), .weight = f->w.view(), .bias = f->bias.view(), .y = f->y.view()});
  };
  std::thread first(run, &fused[0]), second(run, &fused[1]);
  first.join(), second.join();
  const SumTolerance tol(c.cin * c.kh * c.kw + 1);
  for (int t = 0; t < 2; ++t)
    expect_close(fused[t].y, expected[t].y, tol.atol, tol.rtol, fmt::format("thread {}", t));
}

TEST(Conv2d, ReferenceGradientsMatchFiniteDifferences) {
  // N, cin, cout, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups, bias, shared
  const ConvCase cases[] = {
      {2, 2, 2, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, false},
      {2, 2, 4, 5, 4, 2, 2, 1, 1, 1, 0, 2, 1, 2, true, false},
      {2, 2, 2, 4, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, true, true},
      {1, 2, 4, 4, 4, 3, 3, 2, 1, 1, 1, 1, 1, 2, true, true},
  };
  uint64_t seed = test::seed_for_test();
  for (const ConvCase& c : cases) {
    HFTA_SEEDED_TRACE(seed);
    Problem f(params_for(2, c), seed++);
    Buffer g = f.dy;
    for (float& v : f.dw.values) v = 0.0f;
    for (float& v : f.db.values) v = 0.0f;
    auto forward = [&] {
      ref::conv2d_forward(
          f.p, {.x = f.x.view(), .weight = f.w.view(), .bias = f.bias.view(), .y = f.y.view()});
    };
    forward();
    ref::conv2d_backward(f.p, {.x = f.x.view(),
                               .weight = f.w.view(),
                               .dy = g.view(),
                               .dx = f.dx.view(),
                               .dweight = f.dw.view(),
                               .dbias = f.db.view()});
    // Linear in every input, so no truncation error; what is left is the rounding of the few
    // outputs a perturbed element touches (|y| <~ 10, u|y| ~ 1e-6 each) over 2*eps.
    const double eps = 1e-2, tol = 1e-3;
    test::expect_gradient_matches_finite_differences(forward, f.x, f.y, g, f.dx, eps, tol, tol,
                                                     "dx");
    test::expect_gradient_matches_finite_differences(forward, f.w, f.y, g, f.dw, eps, tol, tol,
                                                     "dw");
    test::expect_gradient_matches_finite_differences(forward, f.bias, f.y, g, f.db, eps, tol, tol,
                                                     "db");
  }
}

void expect_error_containing(const std::function<void()>& call, const std::string& text) {
  try {
    call();
    ADD_FAILURE() << "expected hfta::Error containing: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(Conv2d, BadShapesAndSizesRaiseClearErrors) {
  const ConvCase c{2, 4, 6, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 2, true, false};
  Conv2dParams p = params_for(2, c);
  Problem f(p, test::seed_for_test());
  auto forward_with = [&](const Conv2dParams& q) {
    return [&f, q] {
      conv2d_forward(
          q, {.x = f.x.view(), .weight = f.w.view(), .bias = f.bias.view(), .y = f.y.view()});
    };
  };
  Buffer wrong_w(Shape{2, 6, 4, 3, 3});
  expect_error_containing(
      [&] {
        conv2d_forward(
            p, {.x = f.x.view(), .weight = wrong_w.view(), .bias = f.bias.view(), .y = f.y.view()});
      },
      "conv2d weight has shape [2, 6, 4, 3, 3], expected [2, 6, 2, 3, 3]");
  expect_error_containing(
      [&] {
        conv2d_forward(p, {.x = f.x.view(), .weight = f.w.view(), .bias = {}, .y = f.y.view()});
      },
      "conv2d bias is missing");
  Conv2dParams bad = p;
  bad.groups = 4;
  expect_error_containing(forward_with(bad), "must both be divisible by groups=4");
  bad = p;
  bad.kernel_h = 11;
  expect_error_containing(forward_with(bad), "conv2d has no output along h");
  bad = p;
  bad.dilation_w = 0;
  expect_error_containing(forward_with(bad), "dilation_w=0 must be positive");
  bad = p;
  bad.stride_h = 0;
  expect_error_containing(forward_with(bad), "stride_h=0");
  bad = p;
  bad.pad_w = -1;
  expect_error_containing(forward_with(bad), "pad_w=-1");
  bad = p;
  bad.N = 0;
  expect_error_containing(forward_with(bad), "conv2d sizes must be positive");
  bad = p;
  bad.groups = 0;
  expect_error_containing(forward_with(bad), "groups=0 must be positive");
  // A shared input is [N, C_in, H, W]; passing the fused [N, B*C_in, H, W] is a shape error.
  bad = p;
  bad.shared_input = true;
  expect_error_containing(forward_with(bad), "conv2d input has shape [2, 8, 7, 5], expected");
  Buffer wrong_dx(Shape{2, 8, 5, 7});
  expect_error_containing(
      [&] {
        conv2d_backward(p, {.x = f.x.view(),
                            .weight = f.w.view(),
                            .dy = f.dy.view(),
                            .dx = wrong_dx.view(),
                            .dweight = f.dw.view(),
                            .dbias = f.db.view()});
      },
      "conv2d input gradient has shape [2, 8, 5, 7]");
  expect_error_containing(
      [&] {
        conv2d_backward(p, {.x = f.x.view(),
                            .weight = f.w.view(),
                            .dy = f.x.view(),
                            .dx = f.dx.view(),
                            .dweight = f.dw.view(),
                            .dbias = f.db.view()});
      },
      "conv2d output gradient has shape");
}

}  // namespace
}  // namespace hfta
