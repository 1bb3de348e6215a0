// The depthwise conv kernel (fused_ops/cpu/conv2d_depthwise.h), called directly and through the
// public conv2d op, against the reference (ref::conv2d_*) and against oneDNN (the per-model
// strategy): forward, the input gradient written (=) and added (+=), the weight and bias
// gradients accumulated into non-zero buffers, each gradient skipped or alone.
//
// Every case is drawn from one case seed (its sizes from the seed's digits, so consecutive seeds
// cover every combination of width, stride, padding, B and thread count; the rest from an
// RngStream), and a failure prints the command that runs that case alone
// (HFTA_DEPTHWISE_CASE=<seed> with the test's filter).

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/runtime.h"
#include "conv_test_util.h"
#include "core/parallel.h"
#include "fused_ops/conv2d.h"
#include "fused_ops/cpu/conv2d_depthwise.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::random_buffer;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

using test::StrategyScope;
using test::SumTolerance;

struct ThreadsScope {
  int saved = num_threads();
  explicit ThreadsScope(int t) { cpu::set_num_threads(t); }
  ~ThreadsScope() { cpu::set_num_threads(saved); }
};

// Both sides of the AVX2 (8) and AVX-512 (16) vector widths, and of two vectors.
constexpr int64_t kWidths[] = {1, 7, 8, 9, 15, 16, 17, 32, 33};
constexpr int64_t kModelCounts[] = {1, 2, 3, 8};
// Digits of a case seed: width, stride, pad, B, threads. 288 consecutive seeds hold every
// combination once.
constexpr uint64_t kCombinations = std::size(kWidths) * 2 * 2 * std::size(kModelCounts) * 2;

struct Case {
  Conv2dParams p;
  int threads = 1;
};

Case case_from_seed(uint64_t seed) {
  Case c;
  Conv2dParams& p = c.p;
  uint64_t d = seed;
  p.W = kWidths[d % std::size(kWidths)], d /= std::size(kWidths);
  p.stride_h = p.stride_w = 1 + static_cast<int64_t>(d % 2), d /= 2;
  p.pad_h = p.pad_w = static_cast<int64_t>(d % 2), d /= 2;
  p.B = kModelCounts[d % std::size(kModelCounts)], d /= std::size(kModelCounts);
  c.threads = 1 + static_cast<int>(d % 2);
  RngStream rng(seed, 1);
  const int64_t k = rng.below(4) == 0 ? 5 : 3;
  p.kernel_h = p.kernel_w = k;
  // A width below the kernel needs padding to have an output at all.
  while (p.W + 2 * p.pad_w < k) ++p.pad_w;
  p.pad_h = p.pad_w;
  p.H = std::max<int64_t>(1, k - 2 * p.pad_h) + static_cast<int64_t>(rng.below(5));
  p.in_channels = p.out_channels = p.groups = 1 + static_cast<int64_t>(rng.below(33));
  p.N = rng.below(2) == 0 ? 1 : 5;
  p.bias = rng.below(2) == 0;
  return c;
}

std::string describe(const Conv2dParams& p, int threads) {
  return fmt::format("B={} N={} C={} {}x{} k={} s={} pad={} bias={} threads={}", p.B, p.N,
                     p.in_channels, p.H, p.W, p.kernel_h, p.stride_h, p.pad_h, p.bias, threads);
}

Buffer filled(Shape s, float v) { return Buffer(s, v); }

Buffer sum(const Buffer& a, const Buffer& b) {
  Buffer out = a;
  for (int64_t i = 0; i < out.numel(); ++i) out.values[i] += b.values[i];
  return out;
}

// Everything of one case, and the reference results.
struct Problem {
  Conv2dParams p;
  Buffer x, w, bias, dy, dw0, db0, dx0;  // inputs; starting values of the gradients
  Buffer y_ref, dx_ref, dw_ref, db_ref;  // reference: y, dx (=), dw0 + dW, db0 + dB
  Buffer dx_only_ref, db_only_ref;       // reference: dx0 + dX, db0 + dB
  SumTolerance fwd_tol, dx_tol, param_tol;
  explicit Problem(const Conv2dParams& p_, uint64_t seed)
      : p(p_),
        fwd_tol(p.kernel_h * p.kernel_w + 1),
        dx_tol(p.kernel_h * p.kernel_w),
        param_tol(p.N * p.out_h() * p.out_w()) {
    RngStream rng(seed, 2);
    x = random_buffer(p.x_shape(), rng), w = random_buffer(p.weight_shape(), rng);
    bias = random_buffer(p.bias_shape(), rng), dy = random_buffer(p.y_shape(), rng);
    dw0 = random_buffer(p.weight_shape(), rng), db0 = random_buffer(p.bias_shape(), rng);
    dx0 = random_buffer(p.x_shape(), rng);
    y_ref = Buffer(p.y_shape()), dx_ref = Buffer(p.x_shape());
    dw_ref = dw0, db_ref = db0;
    ref::conv2d_forward(p, {.x = x.view(),
                            .weight = w.view(),
                            .bias = p.bias ? bias.view() : TensorView(),
                            .y = y_ref.view()});
    ref::conv2d_backward(p, {.x = x.view(),
                             .weight = w.view(),
                             .dy = dy.view(),
                             .dx = dx_ref.view(),
                             .dweight = dw_ref.view(),
                             .dbias = p.bias ? db_ref.view() : TensorView()});
    dx_only_ref = sum(dx0, dx_ref);
    Buffer db_sum = db0;
    Conv2dParams with_bias = p;  // the kernel's bias gradient does not look at p.bias
    with_bias.bias = true;
    ref::conv2d_backward(
        with_bias, {.x = x.view(), .weight = w.view(), .dy = dy.view(), .dbias = db_sum.view()});
    db_only_ref = db_sum;
  }
  const float* bias_or_null() const { return p.bias ? bias.values.data() : nullptr; }
};

using ForwardFn = void (*)(const Conv2dParams&, const float*, const float*, const float*, float*);
using BackwardFn = void (*)(const Conv2dParams&, const float*, const float*, const float*, float*,
                            float*, float*, bool);

// The raw-pointer kernel (the AVX-512 or AVX2 tiles, or the portable loops) against the reference.
void check_kernel(Problem& f, ForwardFn forward, BackwardFn backward, const std::string& what) {
  SCOPED_TRACE(what);
  const Conv2dParams& p = f.p;
  Buffer y = filled(p.y_shape(), kNaN);  // garbage: must be overwritten
  forward(p, f.x.data(), f.w.data(), f.bias_or_null(), y.data());
  expect_close(y, f.y_ref, f.fwd_tol.atol, f.fwd_tol.rtol, "forward");

  // Everything at once: dx written over NaNs, dw and db accumulated.
  Buffer dx = filled(p.x_shape(), kNaN), dw = f.dw0, db = f.db0;
  backward(p, f.x.data(), f.w.data(), f.dy.data(), dx.data(), dw.data(),
           p.bias ? db.data() : nullptr, false);
  expect_close(dx, f.dx_ref, f.dx_tol.atol, f.dx_tol.rtol, "input grad (written)");
  expect_close(dw, f.dw_ref, f.param_tol.atol, f.param_tol.rtol, "weight grad (accumulated)");
  expect_close(db, p.bias ? f.db_ref : f.db0, f.param_tol.atol, f.param_tol.rtol,
               "bias grad (accumulated, or untouched without bias)");

  // dx alone, added to random values; the skipped gradients are untouched.
  Buffer dx_acc = f.dx0;
  dw = f.dw0, db = f.db0;
  backward(p, f.x.data(), f.w.data(), f.dy.data(), dx_acc.data(), nullptr, nullptr, true);
  expect_close(dx_acc, f.dx_only_ref, f.dx_tol.atol, f.dx_tol.rtol, "input grad (accumulated)");

  // dw alone, then db alone.
  backward(p, f.x.data(), f.w.data(), f.dy.data(), nullptr, dw.data(), nullptr, false);
  expect_close(dw, f.dw_ref, f.param_tol.atol, f.param_tol.rtol, "weight grad alone");
  expect_close(db, f.db0, 0.0, 0.0, "skipped bias grad untouched");
  backward(p, f.x.data(), f.w.data(), f.dy.data(), nullptr, nullptr, db.data(), false);
  expect_close(db, f.db_only_ref, f.param_tol.atol, f.param_tol.rtol, "bias grad alone");
}

// The public op under the automatic strategy (which must pick the depthwise kernel) and under
// oneDNN's per-model strategy: both equal the reference, so they equal each other.
void check_public_op(Problem& f) {
  const Conv2dParams& p = f.p;
  for (auto strategy : {cpu::Conv2dStrategy::kAuto, cpu::Conv2dStrategy::kPerModel}) {
    StrategyScope scope(strategy);
    const cpu::Conv2dStrategy runs_as = cpu::conv2d_strategy_for(p);
    const bool onednn = strategy == cpu::Conv2dStrategy::kPerModel;
    EXPECT_EQ(runs_as == cpu::Conv2dStrategy::kDepthwise, !onednn && cpu::depthwise_applies(p));
    SCOPED_TRACE(onednn ? "public op, oneDNN per model" : "public op, auto");
    Buffer y = filled(p.y_shape(), kNaN), dx = filled(p.x_shape(), kNaN), dw = f.dw0, db = f.db0;
    conv2d_forward(p, {.x = f.x.view(),
                       .weight = f.w.view(),
                       .bias = p.bias ? f.bias.view() : TensorView(),
                       .y = y.view()});
    conv2d_backward(p, {.x = f.x.view(),
                        .weight = f.w.view(),
                        .dy = f.dy.view(),
                        .dx = dx.view(),
                        .dweight = dw.view(),
                        .dbias = p.bias ? db.view() : TensorView()});
    expect_close(y, f.y_ref, f.fwd_tol.atol, f.fwd_tol.rtol, "forward");
    expect_close(dx, f.dx_ref, f.dx_tol.atol, f.dx_tol.rtol, "input grad");
    expect_close(dw, f.dw_ref, f.param_tol.atol, f.param_tol.rtol, "weight grad");
    if (p.bias) expect_close(db, f.db_ref, f.param_tol.atol, f.param_tol.rtol, "bias grad");
  }
}

// repro: how to run this case alone.
void run_case(uint64_t seed, const Case& c, const std::string& repro) {
  SCOPED_TRACE(fmt::format("{}; this case alone: {}", describe(c.p, c.threads), repro));
  ThreadsScope threads(c.threads);
  Problem f(c.p, seed);
  if (cpu::depthwise_applies(c.p))
    check_kernel(f, cpu::depthwise_conv2d_forward, cpu::depthwise_conv2d_backward, "kernel");
  check_kernel(f, cpu::detail::depthwise_conv2d_forward_portable,
               cpu::detail::depthwise_conv2d_backward_portable, "portable loops");
  check_public_op(f);
}

// HFTA_DEPTHWISE_CASE=<seed>: that case alone.
bool single_case(uint64_t* seed) {
  const char* env = std::getenv("HFTA_DEPTHWISE_CASE");
  if (env == nullptr) return false;
  *seed = std::strtoull(env, nullptr, 10);
  return true;
}

TEST(Conv2dDepthwise, RandomCasesAgainstReferenceAndOneDnn) {
  uint64_t only = 0;
  auto repro = [](uint64_t seed) {
    return fmt::format(
        "HFTA_DEPTHWISE_CASE={} test_conv2d_depthwise "
        "--gtest_filter=Conv2dDepthwise.RandomCasesAgainstReferenceAndOneDnn",
        seed);
  };
  if (single_case(&only)) return run_case(only, case_from_seed(only), repro(only));
  const uint64_t base = test::seed_for_test() * kCombinations;  // digits start at 0
  for (uint64_t seed = base; seed < base + kCombinations; ++seed) {
    run_case(seed, case_from_seed(seed), repro(seed));
    if (HasFailure()) return;  // one failing case is enough to print
  }
}

// MobileNetV2's depthwise shapes (at small N): wide planes of many 16-pixel chunks, channel
// counts that are and are not multiples of 16 over the B models, stride 2 on even and odd sizes.
TEST(Conv2dDepthwise, MobileNetShapes) {
  struct Shape2 {
    int64_t C, H, stride;
  };
  const Shape2 shapes[] = {{32, 16, 1}, {96, 16, 2}, {144, 8, 1}, {24, 28, 1},
                           {40, 14, 2}, {20, 11, 2}, {960, 1, 1}, {576, 2, 2}};
  // HFTA_DEPTHWISE_CASE=<seed> runs the case with that seed alone.
  uint64_t only = 0;
  const bool single = single_case(&only);
  uint64_t seed = test::seed_for_test() * 100;
  for (const Shape2& s : shapes)
    for (int64_t B : {1, 3}) {
      if (single && seed != only) {
        ++seed;
        continue;
      }
      Case c;
      c.p.B = B, c.p.N = 2, c.p.in_channels = c.p.out_channels = c.p.groups = s.C;
      c.p.H = c.p.W = s.H, c.p.kernel_h = c.p.kernel_w = 3, c.p.pad_h = c.p.pad_w = 1;
      c.p.stride_h = c.p.stride_w = s.stride, c.p.bias = false, c.threads = 2;
      run_case(seed, c,
               fmt::format("HFTA_DEPTHWISE_CASE={} test_conv2d_depthwise "
                           "--gtest_filter=Conv2dDepthwise.MobileNetShapes",
                           seed));
      ++seed;
    }
}

// Model b of an array is the model alone bit for bit, without deterministic mode: forward, the
// input gradient and the weight and bias gradients (whose image ranges follow one model's channel
// blocks and the thread count, never B), on 1 and 2 threads, channel counts that do and do not
// fill the AVX2 and AVX-512 vectors (a tile then spans two models), stride 1 and 2.
TEST(Conv2dDepthwise, ModelOfAnArrayEqualsTheModelAloneBitForBit) {
  Conv2dParams alone;
  alone.N = 5, alone.H = alone.W = 9, alone.kernel_h = alone.kernel_w = 3;
  alone.pad_h = alone.pad_w = 1, alone.bias = true;
  if (!cpu::depthwise_applies([&] {
        Conv2dParams q = alone;
        q.in_channels = q.out_channels = q.groups = 8;
        return q;
      }()))
    GTEST_SKIP() << "neither AVX-512 nor AVX2 with FMA in this build";
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  for (int threads : {1, 2})
    for (int64_t C : {8, 12, 40})
      for (int64_t stride : {1, 2})
        for (int64_t B : {2, 3, 8}) {
          SCOPED_TRACE(fmt::format("threads={} C={} stride={} B={}", threads, C, stride, B));
          ThreadsScope scope(threads);
          Conv2dParams one = alone;
          one.in_channels = one.out_channels = one.groups = C;
          one.stride_h = one.stride_w = stride;
          Conv2dParams array = one;
          array.B = B;
          RngStream rng(seed, static_cast<uint64_t>(C * 100 + stride * 10 + B));
          Buffer x = random_buffer(array.x_shape(), rng),
                 w = random_buffer(array.weight_shape(), rng);
          Buffer bias = random_buffer(array.bias_shape(), rng),
                 dy = random_buffer(array.y_shape(), rng);
          Buffer y(array.y_shape(), kNaN), dx(array.x_shape(), kNaN), dw(array.weight_shape()),
              db(array.bias_shape());
          cpu::depthwise_conv2d_forward(array, x.data(), w.data(), bias.data(), y.data());
          cpu::depthwise_conv2d_backward(array, x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                                         db.data(), false);
          const int64_t hw = one.H * one.W, ohw = one.out_h() * one.out_w(), taps = 9;
          for (int64_t b = 0; b < B; ++b) {
            // Model b's channel slices of each image, as the model alone holds them.
            auto slice = [&](Buffer& from, Shape shape, int64_t plane) {
              Buffer out(shape);
              for (int64_t n = 0; n < one.N; ++n)
                std::copy_n(from.data() + (n * B + b) * C * plane, C * plane,
                            out.data() + n * C * plane);
              return out;
            };
            Buffer xb = slice(x, one.x_shape(), hw), dyb = slice(dy, one.y_shape(), ohw);
            Buffer yb(one.y_shape(), kNaN), dxb(one.x_shape(), kNaN), dwb(one.weight_shape()),
                dbb(one.bias_shape());
            const float* wb = w.data() + b * C * taps;
            const float* biasb = bias.data() + b * C;
            cpu::depthwise_conv2d_forward(one, xb.data(), wb, biasb, yb.data());
            cpu::depthwise_conv2d_backward(one, xb.data(), wb, dyb.data(), dxb.data(), dwb.data(),
                                           dbb.data(), false);
            EXPECT_EQ(slice(y, one.y_shape(), ohw).values, yb.values) << "forward, model " << b;
            EXPECT_EQ(slice(dx, one.x_shape(), hw).values, dxb.values)
                << "input gradient, model " << b;
            EXPECT_TRUE(
                std::equal(dwb.values.begin(), dwb.values.end(), dw.values.begin() + b * C * taps))
                << "weight gradient, model " << b;
            EXPECT_TRUE(std::equal(dbb.values.begin(), dbb.values.end(), db.values.begin() + b * C))
                << "bias gradient, model " << b;
          }
          if (HasFailure()) return;
        }
}

TEST(Conv2dDepthwise, AppliesOnlyToDepthwise) {
  Conv2dParams p;
  p.B = 2, p.N = 2, p.in_channels = p.out_channels = p.groups = 8, p.H = p.W = 8;
  p.kernel_h = p.kernel_w = 3, p.pad_h = p.pad_w = 1;
  EXPECT_TRUE(cpu::detail::depthwise_shape_applies(p));
  auto with = [&](auto change) {
    Conv2dParams q = p;
    change(q);
    return cpu::detail::depthwise_shape_applies(q);
  };
  EXPECT_TRUE(with([](Conv2dParams& q) { q.kernel_h = q.kernel_w = 5; }));
  EXPECT_TRUE(with([](Conv2dParams& q) { q.stride_h = q.stride_w = 2; }));
  EXPECT_TRUE(with([](Conv2dParams& q) { q.pad_h = 3, q.pad_w = 0; }));
  EXPECT_FALSE(with([](Conv2dParams& q) { q.out_channels = 16; }));  // channel multiplier 2
  EXPECT_FALSE(with([](Conv2dParams& q) { q.groups = 4; }));
  EXPECT_FALSE(with([](Conv2dParams& q) { q.shared_input = true; }));
  EXPECT_FALSE(with([](Conv2dParams& q) { q.dilation_w = 2; }));
  EXPECT_FALSE(with([](Conv2dParams& q) { q.kernel_w = 5; }));
  EXPECT_FALSE(with([](Conv2dParams& q) { q.kernel_h = q.kernel_w = 7; }));
  EXPECT_FALSE(with([](Conv2dParams& q) { q.stride_h = q.stride_w = 3; }));
  EXPECT_FALSE(with([](Conv2dParams& q) { q.stride_w = 2; }));
  // Forcing a oneDNN strategy takes the op off the kernel; forcing it on a problem it does not
  // apply to is the automatic choice.
  if (!cpu::depthwise_applies(p)) GTEST_SKIP() << "neither AVX-512 nor AVX2 with FMA in this build";
  {
    StrategyScope scope(cpu::Conv2dStrategy::kAuto);
    EXPECT_EQ(cpu::conv2d_strategy_for(p), cpu::Conv2dStrategy::kDepthwise);
  }
  {
    StrategyScope scope(cpu::Conv2dStrategy::kGrouped);
    EXPECT_EQ(cpu::conv2d_strategy_for(p), cpu::Conv2dStrategy::kGrouped);
  }
  {
    StrategyScope scope(cpu::Conv2dStrategy::kDepthwise);
    EXPECT_EQ(cpu::conv2d_strategy_for(p), cpu::Conv2dStrategy::kDepthwise);
    Conv2dParams dense = p;
    dense.groups = 1;
    EXPECT_EQ(cpu::conv2d_strategy_for(dense), cpu::Conv2dStrategy::kPerModel);
  }
}

}  // namespace
}  // namespace hfta
