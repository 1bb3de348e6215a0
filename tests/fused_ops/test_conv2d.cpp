// Fused conv2d: fused(B) equals B reference single-model runs, forward and every gradient;
// reference gradients equal finite differences; bad shapes and sizes raise hfta::Error.
//
// Measurements (fused vs B single convolutions, the per-model strategy, the machine's peak) are
// in docs/benchmarks.md: `op_bench conv2d ...` reproduces them; tests do not time anything.

#include <omp.h>

#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/runtime.h"
#include "conv2d_cases.h"
#include "conv_test_util.h"
#include "core/parallel.h"
#include "fused_ops/conv2d.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::expect_error_containing;
using test::random_buffer;

using test::Conv2dOp;
using test::conv_case;
using test::ConvCase;
using test::OpCase;
using test::params_for;
using test::StrategyScope;
using test::SumTolerance;

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

// Every geometry under each way the CPU kernel maps the models onto oneDNN (its own choice,
// grouped, per model), B below / equal to / above the 2 threads; half of them accumulate dx
// (the blocked layouts' add-transposes, the plain layouts' sum reorders, a shared input's sum).
std::vector<OpCase<Conv2dParams>> geometry_cases() {
  // N, cin, cout, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups, bias, shared
  const ConvCase cases[] = {
      {2, 3, 4, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},     // 3x3 pad 1, odd H/W
      {3, 4, 6, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, false},     // stride 2
      {2, 3, 5, 8, 7, 3, 2, 2, 1, 0, 1, 1, 1, 1, true, false},     // non-square kernel/stride/pad
      {2, 3, 5, 9, 7, 3, 3, 1, 1, 2, 2, 2, 2, 1, true, false},     // dilation 2
      {2, 2, 3, 9, 8, 3, 3, 2, 3, 1, 0, 2, 1, 1, true, false},     // dilation with stride
      {2, 4, 6, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 2, true, false},     // groups 2
      {2, 6, 6, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1, 6, true, false},     // depthwise, stride 2
      {2, 6, 12, 5, 7, 3, 3, 1, 1, 1, 1, 1, 1, 6, false, false},   // depthwise x2, no bias
      {2, 3, 5, 7, 5, 5, 5, 1, 1, 2, 2, 1, 1, 1, false, false},    // 5x5, bias off
      {3, 16, 32, 5, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false},   // 1x1, blocked channels
      {2, 16, 32, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},   // blocked 3x3, 64 pixels
      {2, 16, 16, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},   // 16 pixels: one tile
      {2, 16, 16, 3, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},   // 15 pixels: below a tile
      {2, 16, 16, 1, 17, 1, 3, 1, 1, 0, 1, 1, 1, 1, true, false},  // 17 pixels: tile + 1
      {1, 32, 32, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, true, false},   // blocked groups
      {2, 2, 3, 8, 8, 3, 3, 3, 3, 2, 2, 1, 1, 1, true, false},     // stride leaves a remainder
      {2, 2, 3, 2, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},     // kernel larger than input
      {2, 2, 3, 4, 5, 3, 3, 1, 2, 4, 3, 1, 1, 1, true, false},     // padding wider than kernel
      {2, 3, 8, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true},      // shared input
      {2, 16, 16, 6, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, true},   // shared, stride, no bias
      {2, 4, 6, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1, 2, true, true},      // shared, groups 2
      {2, 4, 4, 7, 5, 3, 3, 1, 1, 2, 2, 2, 2, 4, false, true},     // shared depthwise, dilation
  };
  std::vector<OpCase<Conv2dParams>> out;
  int64_t k = 0;
  for (const ConvCase& cc : cases)
    for (auto strategy : {cpu::Conv2dStrategy::kAuto, cpu::Conv2dStrategy::kGrouped,
                          cpu::Conv2dStrategy::kPerModel})
      for (int64_t B : {1, 2, 3}) {
        OpCase<Conv2dParams> c = conv_case(cc, B, strategy, (k++ % 2) == 0, false);
        c.fd =
            B == 1 && strategy == cpu::Conv2dStrategy::kAuto && cc.N * cc.cin * cc.H * cc.W <= 64;
        out.push_back(c);
      }
  return out;
}

// Per-model runs spread over the threads (each thread its own single-threaded primitives and
// blocked copies) or one after another with every thread inside oneDNN, B not always a multiple
// of the threads.
std::vector<OpCase<Conv2dParams>> parallelism_cases() {
  const ConvCase cases[] = {
      {2, 16, 32, 6, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},  // blocked, our conversion
      {2, 3, 8, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},    // plain channels
      {2, 16, 16, 6, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, true},  // shared: dx sums the models
      {2, 4, 6, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1, 2, true, true},     // shared, groups 2
  };
  const std::pair<cpu::ModelParallelism, const char*> modes[] = {
      {cpu::ModelParallelism::kAcrossModels, "_across"},
      {cpu::ModelParallelism::kInsideOp, "_inside"},
      {cpu::ModelParallelism::kAuto, "_autopar"}};
  std::vector<OpCase<Conv2dParams>> out;
  for (const auto& [mode, name] : modes)
    for (int64_t B : {2, 3, 8})
      for (const ConvCase& cc : cases) {
        OpCase<Conv2dParams> c =
            conv_case(cc, B, cpu::Conv2dStrategy::kPerModel, B != 3, false, name);
        c.parallelism = mode;
        out.push_back(c);
      }
  return out;
}

// The direct kernel (a shared input with few channels, stride 1): output rows of 1 to 4 vectors
// of 16 with and without a partial last vector (15, 16, 17, 32, 33, 63, 64 pixels), output
// channels over all models not a multiple of the kernel's channel block, more taps than one
// backward chunk holds (2 x 5x5, 7x7), no bias, no padding; with and without the input
// gradient (training's first layer asks for none), and the same cases forced onto oneDNN.
const ConvCase kDirectCases[] = {
    // N, cin, cout, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups, bias, shared
    {3, 1, 32, 28, 28, 5, 5, 1, 1, 2, 2, 1, 1, 1, true, true},  // LeNet's conv1, 2 vectors
    {2, 1, 5, 6, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true},    // one full vector, 5 channels
    {2, 1, 4, 5, 15, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true},    // 15: one partial vector
    {2, 1, 4, 5, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true},    // 17: a vector and one
    {2, 1, 3, 4, 1, 3, 1, 1, 1, 1, 0, 1, 1, 1, false, true},    // 1 pixel wide, no bias
    {2, 1, 3, 3, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true},    // 2 full vectors
    {2, 1, 3, 3, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true},    // 2 vectors and one
    {2, 2, 6, 7, 40, 5, 5, 1, 1, 2, 2, 1, 1, 1, true, true},    // 3 vectors, 50 taps
    {1, 1, 2, 3, 63, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true},    // 63: 4 vectors, last partial
    {1, 3, 4, 5, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true},    // 4 full vectors
    {2, 1, 7, 9, 11, 7, 7, 1, 1, 3, 3, 1, 1, 1, true, true},    // 7x7: 49 taps
    {2, 4, 8, 6, 20, 3, 2, 1, 1, 0, 0, 1, 1, 1, true, true},    // 4 channels, no padding
};

std::vector<OpCase<Conv2dParams>> direct_cases() {
  std::vector<OpCase<Conv2dParams>> out;
  int64_t k = 0;
  for (auto strategy : {cpu::Conv2dStrategy::kDirect, cpu::Conv2dStrategy::kPerModel})
    for (const ConvCase& cc : kDirectCases)
      for (int64_t B : {1, 2, 3})
        for (bool no_dx : {true, false}) out.push_back(conv_case(cc, B, strategy, k++ % 2, no_dx));
  // Not for it: stride 2, 5 input channels, groups, a fused (unshared) input, rows wider than 64.
  const ConvCase others[] = {
      {2, 1, 4, 8, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, true},
      {2, 5, 4, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true},
      {2, 4, 4, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 2, true, true},
      {2, 1, 4, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},
      {1, 1, 2, 3, 66, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true},
  };
  for (const ConvCase& cc : others)
    out.push_back(conv_case(cc, 2, cpu::Conv2dStrategy::kDirect, false, true, "_notdirect"));
  return out;
}

class Conv2dHarness : public ::testing::TestWithParam<OpCase<Conv2dParams>> {};
TEST_P(Conv2dHarness, FusedEqualsSerial) { test::run_case<Conv2dOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Geometry, Conv2dHarness, ::testing::ValuesIn(geometry_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCudaGeometry, Conv2dHarness,
                         ::testing::ValuesIn(test::device_cases<Conv2dOp>(geometry_cases(),
                                                                          Device::kCuda)),
                         test::CaseName());
INSTANTIATE_TEST_SUITE_P(Parallelism, Conv2dHarness, ::testing::ValuesIn(parallelism_cases()),
                         test::CaseName());
INSTANTIATE_TEST_SUITE_P(Direct, Conv2dHarness, ::testing::ValuesIn(direct_cases()),
                         test::CaseName());
// The direct kernel is chosen exactly where it applies.
TEST(Conv2d, DirectKernelAppliesToASharedInputWithFewChannels) {
#if !defined(__AVX512F__) && !(defined(__AVX2__) && defined(__FMA__))
  GTEST_SKIP() << "the direct kernel needs AVX-512 or AVX2 with FMA, which this build lacks";
#endif
  for (const ConvCase& c : kDirectCases)
    EXPECT_EQ(cpu::conv2d_strategy_for(params_for(2, c)), cpu::Conv2dStrategy::kDirect)
        << fmt::format("cin={} W={} k={}x{}", c.cin, c.W, c.kh, c.kw);
  const ConvCase others[] = {
      {2, 1, 4, 8, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, true},
      {2, 5, 4, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true},
      {2, 4, 4, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 2, true, true},
      {2, 1, 4, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},
      {1, 1, 2, 3, 66, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true},
  };
  StrategyScope scope(cpu::Conv2dStrategy::kDirect);
  for (const ConvCase& c : others)
    EXPECT_NE(cpu::conv2d_strategy_for(params_for(2, c)), cpu::Conv2dStrategy::kDirect)
        << fmt::format("cin={} W={} stride={} groups={} shared={}", c.cin, c.W, c.sh, c.groups,
                       c.shared);
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

// The cache is bounded: every last-batch size N is a problem of its own, and the least
// recently used problem is evicted beyond the capacity; a problem evicted and built again (and
// one still cached while others come and go) gives the right results.
TEST(Conv2d, PrimitiveCacheEvictsTheLeastRecentlyUsedProblem) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  EXPECT_EQ(cpu::conv2d_cache_capacity(), 32);
  const ConvCase base{2, 16, 16, 6, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false};
  for (int64_t n = 1; n <= 40; ++n) {  // 40 last-batch sizes
    ConvCase c = base;
    c.N = n;
    Problem f(params_for(2, c), seed);
    conv2d_forward(f.p,
                   {.x = f.x.view(), .weight = f.w.view(), .bias = f.bias.view(), .y = f.y.view()});
    EXPECT_LE(cpu::conv2d_cached_problems(), 32);
  }
  EXPECT_EQ(cpu::conv2d_cached_problems(), 32);

  struct CapacityScope {
    int64_t saved = cpu::conv2d_cache_capacity();
    ~CapacityScope() { cpu::set_conv2d_cache_capacity(saved); }
  } restore;
  cpu::set_conv2d_cache_capacity(2);
  EXPECT_EQ(cpu::conv2d_cached_problems(), 2);
  ConvCase a = base, b = base, d = base;
  b.H = 9;
  d.N = 3;
  // a, b cached; a used again (b is now the oldest); d evicts b; b evicts a; a evicts d.
  for (const ConvCase* c : {&a, &b, &a, &d, &b, &a, &d, &a}) {
    Problem f(params_for(2, *c), seed), r(params_for(2, *c), seed);
    conv2d_forward(f.p,
                   {.x = f.x.view(), .weight = f.w.view(), .bias = f.bias.view(), .y = f.y.view()});
    conv2d_backward(f.p, {.x = f.x.view(),
                          .weight = f.w.view(),
                          .dy = f.dy.view(),
                          .dx = f.dx.view(),
                          .dweight = f.dw.view(),
                          .dbias = f.db.view()});
    ref::conv2d_forward(
        r.p, {.x = r.x.view(), .weight = r.w.view(), .bias = r.bias.view(), .y = r.y.view()});
    ref::conv2d_backward(r.p, {.x = r.x.view(),
                               .weight = r.w.view(),
                               .dy = r.dy.view(),
                               .dx = r.dx.view(),
                               .dweight = r.dw.view(),
                               .dbias = r.db.view()});
    EXPECT_LE(cpu::conv2d_cached_problems(), 2);
    const SumTolerance tol(c->N * c->H * c->W * c->cin * 9);
    const std::string what = fmt::format("N={} H={}", c->N, c->H);
    expect_close(f.y, r.y, tol.atol, tol.rtol, what + " forward");
    expect_close(f.dx, r.dx, tol.atol, tol.rtol, what + " dx");
    expect_close(f.dw, r.dw, tol.atol, tol.rtol, what + " dweight");
    expect_close(f.db, r.db, tol.atol, tol.rtol, what + " dbias");
  }
}

// The capacity bounds each calling thread's problems alone: two threads of a parallel region
// (as the threads plans run whole models per thread) that each use 20 problems keep all 40
// cached. A bound over all callers kept 32, so the threads evicted each other's entries and
// rebuilt them on every pass.
TEST(Conv2d, PrimitiveCacheCapacityAppliesPerCallingThread) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  struct CapacityScope {
    int64_t saved = cpu::conv2d_cache_capacity();
    ~CapacityScope() { cpu::set_conv2d_cache_capacity(saved); }
  } restore;
  cpu::set_conv2d_cache_capacity(1);  // at most one problem of earlier tests per caller
  cpu::set_conv2d_cache_capacity(32);
  const int64_t before = cpu::conv2d_cached_problems();
  const ConvCase base{2, 16, 16, 6, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false};
  const int kCallers = 2;
  const int64_t kProblems = 20, kOverCapacity = 40;
  std::vector<int64_t> called(kCallers, 0);
#pragma omp parallel num_threads(kCallers)
  {
    const int caller = omp_get_thread_num();
    const int64_t problems = caller == 0 ? kProblems : kOverCapacity;
    for (int64_t n = 1; n <= problems; ++n) {
      ConvCase c = base;
      c.N = n;
      Problem f(params_for(2, c), seed);
      conv2d_forward(
          f.p, {.x = f.x.view(), .weight = f.w.view(), .bias = f.bias.view(), .y = f.y.view()});
    }
    called[static_cast<size_t>(caller)] = problems;
  }
  ASSERT_EQ(called[1], kOverCapacity) << "the region ran on one thread";
  // Thread 0 keeps its 20, thread 1 its 32 most recent of 40 (plus what earlier tests left).
  EXPECT_GE(cpu::conv2d_cached_problems(), kProblems + 32);
  EXPECT_LE(cpu::conv2d_cached_problems(), before + kProblems + 32);
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
  // This plane saves nothing for backward (conv2d_saved_floats is 0): a saved buffer is an error.
  Buffer stray_saved(Shape{3});
  expect_error_containing(
      [&] {
        conv2d_forward(p, {.x = f.x.view(),
                           .weight = f.w.view(),
                           .bias = f.bias.view(),
                           .y = f.y.view(),
                           .saved = stray_saved.view()});
      },
      "conv2d saved weights has shape [3], expected [0]");
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
