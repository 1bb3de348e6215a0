// Fused pooling (max, average, adaptive average) on the op harness (tests/op_harness.h): fused(B)
// equals B reference single-model runs, forward, argmax and input gradient; reference gradients
// equal finite differences; PyTorch's semantics on hand-computed cases; bad shapes and sizes
// raise hfta::Error.
//
// Measured once against oneDNN 2.6 pooling (jit:avx512_core) on the same plain NCHW buffers
// (2-core AVX-512 machine shared with other builds, min over 30 runs, +-30% run to run), forward
// with argmax (oneDNN: workspace) + backward, ms, "ours / oneDNN" (a throwaway driver: op_bench
// does not run pooling yet):
//                                    2 threads                  1 thread
//   max 2x2/2 28x28 N=64 C=6 B=1     0.18+0.07 / 0.54+0.61      0.19+0.08 / 0.85+0.89
//   max 2x2/2 28x28 N=64 C=6 B=8     1.47+0.70 / 2.11+2.37      1.67+0.86 / 3.31+3.42
//   max 3x3/2p1 32x32 N=32 C=64 B=1  1.08+0.62 / 1.82+2.08      1.42+0.72 / 2.89+3.37
//   max 3x3/2p1 32x32 N=32 C=64 B=8  9.4+4.9   / 14.6+17.2      15.2+8.5  / 25.0+31.6
//   avg 2x2/2 28x28 N=64 C=6 B=8     0.68+1.32 / 0.68+0.86      1.40+2.55 / 1.20+1.63
//   avg 3x3/2p1 32x32 N=32 C=64 B=8  7.2+12.3  / 7.7+14.2       10.8+26.4 / 10.0+21.8
// Max pooling, the common case, is 1.5-5x faster than oneDNN; average pooling is on par forward
// and up to 1.6x slower backward at B=8 (its windows overlap in the accumulator). Fused B=8 costs
// what 8 separate B=1 calls cost (1.47 vs 8 x 0.18 ms): pooling is per plane, so fusion neither
// helps nor hurts it.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "fused_ops/pool2d.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::expect_error_containing;
using test::random_buffer;

using test::Layout;
using test::OpCase;
using test::Role;
using test::TensorSpec;

constexpr double kUnitRoundoff = 1.0 / 16777216.0;  // 2^-24, fp32

// An owned int32 buffer (argmax), like test::Buffer.
struct IndexBuffer {
  std::vector<int32_t> values;
  Shape shape;
  IndexBuffer() = default;
  explicit IndexBuffer(Shape s, int32_t fill = -7)
      : values(static_cast<size_t>(s.numel()), fill), shape(s) {}
  IndexView view() { return IndexView(values.data(), shape); }
};

void expect_same_indices(const IndexBuffer& actual, const IndexBuffer& expected,
                         const std::string& what) {
  ASSERT_EQ(actual.values.size(), expected.values.size()) << what;
  int64_t misses = 0, first = -1;
  for (size_t i = 0; i < actual.values.size(); ++i)
    if (actual.values[i] != expected.values[i]) {
      if (misses++ == 0) first = static_cast<int64_t>(i);
    }
  EXPECT_EQ(misses, 0) << what << ": " << misses << " indices differ; first at " << first << ": "
                       << (first >= 0 ? actual.values[first] : 0) << " vs expected "
                       << (first >= 0 ? expected.values[first] : 0);
}

// ---- the op harness (tests/op_harness.h): fused(B) equals B reference single-model runs ----

// The op's parameters plus what a case varies besides them.
struct PoolP {
  int64_t B = 1;
  Pool2dParams pool;
  bool distinct = false;  // distinct inputs (finite differences across a max); else with ties
  Pool2dParams params() const {
    Pool2dParams p = pool;
    p.B = B;
    return p;
  }
};

// Largest number of windows that share one input element along each axis, multiplied.
int64_t max_overlap(const Pool2dParams& p) {
  auto per_axis = [](int64_t k, int64_t s) { return (k + s - 1) / s; };
  return per_axis(p.kernel_h, p.effective_stride_h()) *
         per_axis(p.kernel_w, p.effective_stride_w());
}

struct Pool2dOp {
  using Params = PoolP;
  static std::string describe(const PoolP& q) {
    const Pool2dParams p = q.params();
    return fmt::format(
        "{} N={} C={} {}x{} k={}x{} s={}x{} pad={}x{} ceil={} include_pad={} -> {}x{}",
        p.kind == PoolKind::kMax ? "max" : "avg", p.N, p.C, p.H, p.W, p.kernel_h, p.kernel_w,
        p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.ceil_mode, p.count_include_pad, p.out_h(),
        p.out_w());
  }
  static std::vector<TensorSpec> tensors(const PoolP& q, const OpCase<PoolP>& c) {
    const Pool2dParams p = q.params();
    // Max: forward and argmax are exact (a selection); dx sums at most M = max_overlap dy's in
    // fp32 (error <= (M-1) u sum|dy| <= M^2 u, |dy| <= 1) against the double reference.
    // Avg: a window sum of K = kh*kw values in [-1, 1] in fp32 errs by <= (K-1) u K before the
    // division by a divisor >= 1; the relative part covers both sides' final roundings. dx sums
    // M shares dy/divisor (|share| <= 1), each rounded once, so (M+1)^2 u.
    const int64_t K = p.kernel_h * p.kernel_w, M = max_overlap(p);
    const bool is_max = p.kind == PoolKind::kMax;
    const double fwd_atol = is_max ? 0.0 : double(K * K) * kUnitRoundoff;
    const double fwd_rtol = is_max ? 0.0 : 4.0 * kUnitRoundoff;
    const double dx_atol = (is_max ? double(M * M) : double((M + 1) * (M + 1))) * kUnitRoundoff;
    auto channels = [&](std::string name, Shape shape, Role role) {
      return TensorSpec{.name = std::move(name),
                        .shape = shape,
                        .layout = Layout::kChannels,
                        .role = role,
                        .channels = p.C};
    };
    TensorSpec x = channels("x", p.x_shape(), Role::kInput);
    x.fill = q.distinct ? test::Fill::kDistinct : test::Fill::kTies;
    TensorSpec y = channels("y", p.y_shape(), Role::kOutput);
    y.atol = fwd_atol, y.rtol = fwd_rtol;
    std::vector<TensorSpec> t = {x, y, channels("dy", p.y_shape(), Role::kInput)};
    if (is_max) {
      TensorSpec argmax = channels("argmax", p.argmax_shape(), Role::kSaved);
      argmax.is_index = true;
      t.push_back(argmax);
    }
    TensorSpec dx = channels("dx", p.x_shape(), Role::kInputGrad);
    dx.atol = dx_atol, dx.rtol = 4.0 * kUnitRoundoff;
    t.push_back(dx);
    return t;
  }
  static void run(const PoolP& q, const test::Views& v, const test::RunContext& ctx) {
    const Pool2dParams p = q.params();
    const Pool2dSaved saved{.argmax = v.index("argmax")};
    const Pool2dForwardArgs f{.x = v("x"), .saved = saved, .y = v("y")};
    (ctx.ref ? ref::pool2d_forward : pool2d_forward)(p, f);
    if (ctx.forward_only) return;
    const Pool2dBackwardArgs b{
        .saved = saved, .dy = v("dy"), .dx = v("dx"), .accumulate_dx = ctx.accumulate_dx};
    (ctx.ref ? ref::pool2d_backward : pool2d_backward)(p, b);
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() { return {{"x", "dx"}}; }
  // Piecewise linear with no kink within eps (distinct inputs >= 0.04 apart): no truncation
  // error. Rounding: each output (|y| <= 8 here) is rounded to fp32 (u|y| <= 5e-7) and a
  // perturbed element touches at most 4 outputs, over 2*eps = 0.02: <= 1e-4.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 2e-4, 2e-4}; }
};

// N, C, H, W, kh, kw, sh, sw, ph, pw, ceil_mode, count_include_pad, finite differences
struct PoolCase {
  int64_t N, C, H, W, kh, kw, sh, sw, ph, pw;
  bool ceil_mode, count_include_pad;
  bool fd = false;
};
const PoolCase kPoolCases[] = {
    {2, 3, 7, 5, 3, 3, 2, 2, 0, 0, false, true},     // odd 7x5, kernel 3 stride 2
    {3, 2, 8, 6, 2, 2, 0, 0, 0, 0, false, true},     // PyTorch default stride (= kernel)
    {2, 3, 9, 7, 3, 2, 1, 2, 1, 1, false, true},     // stride != kernel, overlapping rows, padding
    {2, 2, 7, 5, 3, 3, 2, 2, 1, 1, false, false},    // padding excluded from the average
    {2, 3, 7, 9, 2, 2, 2, 2, 0, 0, true, true},      // ceil_mode adds a partial last window
    {2, 2, 5, 5, 3, 3, 3, 3, 1, 1, true, true},      // ceil_mode drops a window starting in padding
    {2, 2, 8, 7, 3, 3, 2, 2, 1, 1, true, false},     // ceil_mode with padding, exclude padding
    {1, 3, 6, 11, 4, 5, 3, 2, 2, 2, true, true},     // pad = kernel/2, non-square everything
    {2, 4, 5, 6, 5, 6, 0, 0, 0, 0, false, true},     // one window covers the whole plane
    {2, 3, 4, 5, 1, 1, 1, 1, 0, 0, false, true},     // 1x1 kernel: identity
    {2, 3, 3, 20, 1, 3, 1, 1, 0, 1, false, false},   // stride 1, 20 outputs: 16-lane blocks
    {4, 16, 16, 16, 2, 2, 2, 2, 0, 0, false, true},  // the common 2x2/2 block
    // 2x2/2 without padding, read straight from the rows: LeNet's 28x28 (14 per row), odd planes
    // in floor mode (last row and column dropped: the general backward), and 15, 16, 17 and 33
    // outputs per row (one or two input vectors per block, partial and whole blocks)
    {2, 3, 28, 28, 2, 2, 2, 2, 0, 0, false, true},
    {2, 2, 7, 9, 2, 2, 2, 2, 0, 0, false, true},
    {1, 2, 6, 30, 2, 2, 0, 0, 0, 0, false, true},
    {1, 2, 4, 32, 2, 2, 0, 0, 0, 0, true, true},
    {1, 2, 6, 34, 2, 2, 2, 2, 0, 0, false, true},
    {1, 2, 3, 67, 2, 2, 2, 2, 0, 0, true, true},  // ceil mode adding partial windows: general
    {1, 2, 2, 66, 2, 2, 2, 2, 0, 0, false, true},
    {2, 2, 9, 40, 3, 3, 2, 2, 1, 1, true, false},       // 21 outputs per row: a full and a partial
                                                        // 16-lane block, with padding and ceil
    {1, 2, 5, 50, 2, 4, 1, 3, 1, 2, false, true},       // run-time stride 3 over two blocks
    {2, 2, 12, 32, 3, 3, 1, 1, 1, 1, false, true},      // 3x3/1 "same" pooling, 32 per row
    {2, 3, 9, 19, 3, 3, 1, 1, 1, 1, false, true},       // 19 per row, stride 1, padding
    {1, 2, 5, 4, 3, 2, 2, 1, 1, 1, false, true, true},  // finite differences
    {1, 1, 5, 5, 3, 3, 2, 2, 1, 1, true, false, true},
    {1, 1, 4, 5, 2, 2, 0, 0, 1, 0, true, true, true},
};

// Every case for max and average pooling, B in {1, 2, 3, 8}, 1 to 3 threads (the planes N*B*C
// below, at and above the thread count for the small shapes).
std::vector<OpCase<PoolP>> pool_cases() {
  std::vector<OpCase<PoolP>> cases;
  int k = 0;
  for (PoolKind kind : {PoolKind::kMax, PoolKind::kAvg})
    for (const PoolCase& s : kPoolCases)
      for (int64_t B : test::model_counts()) {
        if (s.fd && B > 2) continue;
        OpCase<PoolP> c;
        c.p.pool = Pool2dParams{.kind = kind,
                                .N = s.N,
                                .C = s.C,
                                .H = s.H,
                                .W = s.W,
                                .kernel_h = s.kh,
                                .kernel_w = s.kw,
                                .stride_h = s.sh,
                                .stride_w = s.sw,
                                .pad_h = s.ph,
                                .pad_w = s.pw,
                                .ceil_mode = s.ceil_mode,
                                .count_include_pad = s.count_include_pad};
        c.p.distinct = s.fd;
        c.B = B;
        c.threads = 1 + (k++ % 3);
        c.accumulate_dx = (s.H + s.W + B) % 2 == 1;
        c.fd = s.fd && B == 1;
        c.name = fmt::format("{}_N{}_C{}_{}x{}_k{}x{}_s{}x{}_p{}x{}{}{}_B{}_t{}{}{}",
                             kind == PoolKind::kMax ? "max" : "avg", s.N, s.C, s.H, s.W, s.kh, s.kw,
                             s.sh, s.sw, s.ph, s.pw, s.ceil_mode ? "_ceil" : "",
                             s.count_include_pad ? "" : "_nopadcount", B, c.threads,
                             c.accumulate_dx ? "_acc" : "", c.fd ? "_fd" : "");
        cases.push_back(c);
      }
  return cases;
}

class Pool2dHarness : public ::testing::TestWithParam<OpCase<PoolP>> {};
TEST_P(Pool2dHarness, FusedEqualsSerial) { test::run_case<Pool2dOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, Pool2dHarness, ::testing::ValuesIn(pool_cases()), test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCuda, Pool2dHarness,
                         ::testing::ValuesIn(test::device_cases<Pool2dOp>(pool_cases(),
                                                                          Device::kCuda)),
                         test::CaseName());

struct AdaptiveOp {
  using Params = AdaptiveAvgPool2dParams;
  static std::string describe(const AdaptiveAvgPool2dParams& p) {
    return fmt::format("adaptive N={} C={} {}x{} -> {}x{}", p.N, p.C, p.H, p.W, p.out_h, p.out_w);
  }
  static std::vector<TensorSpec> tensors(const AdaptiveAvgPool2dParams& p,
                                         const OpCase<AdaptiveAvgPool2dParams>& c) {
    // Bins span at most ceil(H/out_h)+1 rows, so K elements; an input element lies in at most
    // ceil(out_h/H)+1 row bins, so M bins. Same arithmetic as average pooling above.
    auto span = [](int64_t a, int64_t b) { return (a + b - 1) / b + 1; };
    const int64_t K = span(p.H, p.out_h) * span(p.W, p.out_w);
    const int64_t M = span(p.out_h, p.H) * span(p.out_w, p.W);
    const double fwd = double(K * K) * kUnitRoundoff,
                 dx = double((M + 1) * (M + 1)) * kUnitRoundoff;
    auto channels = [&](std::string name, Shape shape, Role role, double atol) {
      return TensorSpec{.name = std::move(name),
                        .shape = shape,
                        .layout = Layout::kChannels,
                        .role = role,
                        .atol = atol,
                        .rtol = 4.0 * kUnitRoundoff,
                        .channels = p.C};
    };
    return {channels("x", p.x_shape(), Role::kInput, 0),
            channels("dy", p.y_shape(), Role::kInput, 0),
            channels("y", p.y_shape(), Role::kOutput, fwd),
            channels("dx", p.x_shape(), Role::kInputGrad, dx)};
  }
  static void run(const AdaptiveAvgPool2dParams& p, const test::Views& v,
                  const test::RunContext& ctx) {
    const AdaptiveAvgPool2dForwardArgs f{.x = v("x"), .y = v("y")};
    (ctx.ref ? ref::adaptive_avg_pool2d_forward : adaptive_avg_pool2d_forward)(p, f);
    if (ctx.forward_only) return;
    const AdaptiveAvgPool2dBackwardArgs b{
        .dy = v("dy"), .dx = v("dx"), .accumulate_dx = ctx.accumulate_dx};
    (ctx.ref ? ref::adaptive_avg_pool2d_backward : adaptive_avg_pool2d_backward)(p, b);
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() { return {{"x", "dx"}}; }
  // Linear: no truncation error; rounding of the few touched outputs (|y| <= 1) over 2*eps.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 2e-4, 2e-4}; }
};

std::vector<OpCase<AdaptiveAvgPool2dParams>> adaptive_cases() {
  struct Size {
    int64_t N, C, H, W, out_h, out_w;
    bool fd = false;
  };
  const Size sizes[] = {
      {2, 3, 5, 7, 3, 2},   // non-divisible: overlapping bins
      {3, 2, 6, 6, 1, 1},   // global average pooling
      {2, 5, 7, 7, 1, 1},   // global, odd
      {2, 3, 8, 8, 4, 4},   // divisible: plain 2x2 average pooling
      {1, 2, 4, 5, 6, 7},   // output larger than input: bins repeat elements
      {2, 2, 7, 5, 7, 5},   // identity
      {4, 40, 1, 1, 1, 1},  // identity of 1x1 planes (MobileNetV2's and ResNet-18's last pool)
      {2, 16, 13, 13, 6, 6},    {1, 1, 3, 20, 2, 17},  // rows past a 16-lane block
      {2, 2, 5, 7, 3, 2, true},                        // finite differences
      {1, 2, 3, 2, 4, 3, true}, {2, 1, 4, 3, 1, 1, true},
  };
  std::vector<OpCase<AdaptiveAvgPool2dParams>> cases;
  int k = 0;
  for (const Size& s : sizes)
    for (int64_t B : test::model_counts()) {
      OpCase<AdaptiveAvgPool2dParams> c;
      c.p = AdaptiveAvgPool2dParams{
          .N = s.N, .C = s.C, .H = s.H, .W = s.W, .out_h = s.out_h, .out_w = s.out_w};
      c.B = B;
      c.threads = 1 + (k++ % 3);
      c.accumulate_dx = (s.H + s.out_w + B) % 2 == 1;
      c.fd = s.fd && B == 1;
      c.name = fmt::format("N{}_C{}_{}x{}_to_{}x{}_B{}_t{}{}{}", s.N, s.C, s.H, s.W, s.out_h,
                           s.out_w, B, c.threads, c.accumulate_dx ? "_acc" : "", c.fd ? "_fd" : "");
      cases.push_back(c);
    }
  return cases;
}

class AdaptiveAvgPool2dHarness : public ::testing::TestWithParam<OpCase<AdaptiveAvgPool2dParams>> {
};
TEST_P(AdaptiveAvgPool2dHarness, FusedEqualsSerial) { test::run_case<AdaptiveOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, AdaptiveAvgPool2dHarness, ::testing::ValuesIn(adaptive_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCuda, AdaptiveAvgPool2dHarness,
                         ::testing::ValuesIn(test::device_cases<AdaptiveOp>(adaptive_cases(),
                                                                            Device::kCuda)),
                         test::CaseName());

// ---- hand-computed cases, errors ----

Pool2dParams params_for(PoolKind kind, int64_t B, const PoolCase& c) {
  Pool2dParams p;
  p.kind = kind, p.B = B, p.N = c.N, p.C = c.C, p.H = c.H, p.W = c.W;
  p.kernel_h = c.kh, p.kernel_w = c.kw, p.stride_h = c.sh, p.stride_w = c.sw;
  p.pad_h = c.ph, p.pad_w = c.pw, p.ceil_mode = c.ceil_mode;
  p.count_include_pad = c.count_include_pad;
  return p;
}

// Output sizes PyTorch gives for well-known layers (torch.nn.MaxPool2d / AvgPool2d).
TEST(Pool2d, OutputSizesMatchPyTorch) {
  EXPECT_EQ(pool_output_size(7, 3, 2, 0, false), 3);
  EXPECT_EQ(pool_output_size(5, 3, 2, 0, false), 2);
  EXPECT_EQ(pool_output_size(7, 2, 2, 0, false), 3);
  EXPECT_EQ(pool_output_size(7, 2, 2, 0, true), 4);
  EXPECT_EQ(pool_output_size(112, 3, 2, 1, false), 56);  // ResNet stem
  EXPECT_EQ(pool_output_size(112, 3, 2, 0, true), 56);   // GoogLeNet, ceil_mode
  EXPECT_EQ(pool_output_size(55, 3, 2, 0, false), 27);   // AlexNet
  // Naive ceil((5+2-3)/3)+1 = 3, but the third window would start at 6 = H + pad, inside the
  // right padding only, so PyTorch drops it.
  EXPECT_EQ(pool_output_size(5, 3, 3, 1, true), 2);
  Pool2dParams p;
  p.H = 7, p.W = 5, p.kernel_h = 2, p.kernel_w = 3;  // stride 0: "= kernel"
  EXPECT_EQ(p.effective_stride_h(), 2);
  EXPECT_EQ(p.effective_stride_w(), 3);
  EXPECT_EQ(p.y_shape(), (Shape{1, 1, 3, 1}));
}

// One 1-channel plane through the fused op (B=2, both models given the same plane), checked
// against hand-computed values.
struct Hand {
  Pool2dParams p;
  Buffer x, y;
  IndexBuffer argmax;
  Hand(PoolKind kind, int64_t H, int64_t W, std::vector<float> plane, int64_t k_h, int64_t k_w,
       int64_t s_h, int64_t s_w, int64_t pad_h, int64_t pad_w, bool ceil_mode = false,
       bool count_include_pad = true) {
    p.kind = kind, p.B = 2, p.H = H, p.W = W, p.kernel_h = k_h, p.kernel_w = k_w;
    p.stride_h = s_h, p.stride_w = s_w, p.pad_h = pad_h, p.pad_w = pad_w;
    p.ceil_mode = ceil_mode, p.count_include_pad = count_include_pad;
    x = Buffer(p.x_shape()), y = Buffer(p.y_shape()), argmax = IndexBuffer(p.argmax_shape());
    for (int b = 0; b < 2; ++b) std::copy(plane.begin(), plane.end(), x.data() + b * H * W);
    pool2d_forward(p, {.x = x.view(), .saved = {argmax.view()}, .y = y.view()});
    // The reference must agree bit for bit (a selection or a tiny average; NaNs included).
    Buffer y_ref(p.y_shape());
    IndexBuffer argmax_ref(p.argmax_shape());
    ref::pool2d_forward(p, {.x = x.view(), .saved = {argmax_ref.view()}, .y = y_ref.view()});
    EXPECT_EQ(std::memcmp(y.data(), y_ref.data(), sizeof(float) * y.numel()), 0) << "reference";
    if (kind == PoolKind::kMax) expect_same_indices(argmax, argmax_ref, "reference argmax");
  }
  float out(int64_t i) const { return y.values[y.values.size() / 2 + i]; }  // model 1's plane
  int32_t at(int64_t i) const { return argmax.values[argmax.values.size() / 2 + i]; }
};

TEST(Pool2d, PyTorchSemanticsByHand) {
  // Ties: the first maximum in scan order wins.
  Hand ties(PoolKind::kMax, 2, 2, {1, 3, 3, 2}, 2, 2, 0, 0, 0, 0);
  EXPECT_EQ(ties.out(0), 3.0f);
  EXPECT_EQ(ties.at(0), 1);
  Hand flat(PoolKind::kMax, 2, 2, {5, 5, 5, 5}, 2, 2, 0, 0, 0, 0);
  EXPECT_EQ(flat.at(0), 0);
  // Padding is -inf for max pooling: an all-negative plane never yields 0.
  Hand negative(PoolKind::kMax, 2, 2, {-4, -3, -2, -1}, 3, 3, 1, 1, 1, 1);
  EXPECT_EQ(negative.out(0), -1.0f);
  EXPECT_EQ(negative.at(0), 3);
  // An all -inf window reports its first input element (never a padding position).
  const float inf = std::numeric_limits<float>::infinity();
  Hand all_inf(PoolKind::kMax, 2, 3, {-inf, -inf, -inf, -inf, -inf, -inf}, 3, 3, 1, 1, 1, 1);
  EXPECT_EQ(all_inf.out(0), -inf);
  EXPECT_EQ(all_inf.at(0), 0);  // window rows [-1, 2), columns [-1, 2): first element (0, 0)
  EXPECT_EQ(all_inf.at(3), 0);  // rows [0, 3), columns [-1, 2)
  EXPECT_EQ(all_inf.at(5), 1);  // rows [0, 3), columns [1, 4): first element (0, 1)
  // A NaN propagates.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Hand with_nan(PoolKind::kMax, 1, 4, {1, nan, 2, 0}, 1, 4, 0, 0, 0, 0);
  EXPECT_TRUE(std::isnan(with_nan.out(0)));
  EXPECT_EQ(with_nan.at(0), 1);
  // Average with padding: 3x3 windows over a 2x2 plane of ones, padding 1: the divisor is 9
  // with count_include_pad and the 4 real elements without it.
  Hand include(PoolKind::kAvg, 2, 2, {1, 1, 1, 1}, 3, 3, 1, 1, 1, 1, false, true);
  EXPECT_FLOAT_EQ(include.out(0), 4.0f / 9.0f);
  Hand exclude(PoolKind::kAvg, 2, 2, {1, 1, 1, 1}, 3, 3, 1, 1, 1, 1, false, false);
  EXPECT_FLOAT_EQ(exclude.out(0), 1.0f);
  // ceil_mode: the last window [2, 4) hangs past the input (no padding); PyTorch divides by the
  // part inside the padded input (1), even with count_include_pad.
  Hand partial(PoolKind::kAvg, 1, 3, {1, 2, 6}, 1, 2, 1, 2, 0, 0, true, true);
  ASSERT_EQ(partial.p.out_w(), 2);
  EXPECT_FLOAT_EQ(partial.out(0), 1.5f);
  EXPECT_FLOAT_EQ(partial.out(1), 6.0f);
}

// Forward without argmax (evaluation) computes the same output.
TEST(Pool2d, MaxForwardWithoutArgmax) {
  uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 2);
  const Pool2dParams p = params_for(PoolKind::kMax, 3, {2, 3, 9, 7, 3, 2, 1, 2, 1, 1, true, true});
  Buffer x = test::random_buffer(p.x_shape(), rng), y(p.y_shape()), y_eval(p.y_shape());
  IndexBuffer argmax(p.argmax_shape());
  pool2d_forward(p, {.x = x.view(), .saved = {argmax.view()}, .y = y.view()});
  pool2d_forward(p, {.x = x.view(), .saved = {}, .y = y_eval.view()});
  expect_close(y_eval, y, 0.0, 0.0, "forward without argmax");
}

TEST(Pool2d, BadShapesAndSizesRaiseClearErrors) {
  const Pool2dParams p = params_for(PoolKind::kMax, 2, {2, 3, 7, 5, 3, 3, 2, 2, 1, 1, false, true});
  Buffer x(p.x_shape()), y(p.y_shape()), dx(p.x_shape());
  IndexBuffer argmax(p.argmax_shape());
  auto forward_with = [&](const Pool2dParams& q) {
    return [&, q] { pool2d_forward(q, {.x = x.view(), .saved = {argmax.view()}, .y = y.view()}); };
  };
  Buffer wrong_x(Shape{2, 3, 7, 5});
  expect_error_containing(
      [&] { pool2d_forward(p, {.x = wrong_x.view(), .saved = {argmax.view()}, .y = y.view()}); },
      "max_pool2d input has shape [2, 3, 7, 5], expected [2, 6, 7, 5]");
  Pool2dParams bad = p;
  bad.pad_h = 2;
  expect_error_containing(forward_with(bad), "pad_h=2 is more than half of kernel_h=3");
  bad = p;
  bad.kernel_w = 8, bad.pad_w = 0;
  expect_error_containing(forward_with(bad),
                          "max_pool2d has no output along w: the input is 5 (plus 2*pad_w=0) but "
                          "kernel_w=8 is larger");
  bad = p;
  bad.kind = PoolKind::kAvg, bad.kernel_h = 0;
  expect_error_containing(forward_with(bad), "avg_pool2d kernel_h=0 must be positive");
  bad = p;
  bad.stride_w = -1;
  expect_error_containing(forward_with(bad), "stride_w=-1");
  bad = p;
  bad.pad_w = -1;
  expect_error_containing(forward_with(bad), "pad_w=-1 must be zero or positive");
  bad = p;
  bad.C = 0;
  expect_error_containing(forward_with(bad), "max_pool2d sizes must be positive");
  IndexBuffer wrong_argmax(Shape{2, 6, 3, 3});
  expect_error_containing(
      [&] { pool2d_forward(p, {.x = x.view(), .saved = {wrong_argmax.view()}, .y = y.view()}); },
      "max_pool2d saved argmax has shape [2, 6, 3, 3], expected [2, 6, 4, 3]");
  expect_error_containing(
      [&] { pool2d_backward(p, {.saved = {}, .dy = y.view(), .dx = dx.view()}); },
      "max_pool2d backward needs the saved argmax");
  expect_error_containing(
      [&] { pool2d_backward(p, {.saved = {argmax.view()}, .dy = x.view(), .dx = dx.view()}); },
      "max_pool2d output gradient has shape");
  Pool2dParams avg = p;
  avg.kind = PoolKind::kAvg;
  expect_error_containing(
      [&] { pool2d_backward(avg, {.saved = {}, .dy = y.view(), .dx = y.view()}); },
      "avg_pool2d input gradient has shape");
}

// ---- adaptive average pooling ----

TEST(AdaptiveAvgPool2d, PyTorchBinsByHand) {
  // 1x5 -> 1x3: bins [0,2), [1,4), [3,5) (floor(i*5/3), ceil((i+1)*5/3)).
  AdaptiveAvgPool2dParams p{2, 1, 1, 1, 5, 1, 3};
  Buffer x(p.x_shape()), y(p.y_shape());
  for (int64_t i = 0; i < x.numel(); ++i) x.values[i] = float(i % 5) * 3.0f;  // 0 3 6 9 12
  adaptive_avg_pool2d_forward(p, {.x = x.view(), .y = y.view()});
  for (int b = 0; b < 2; ++b) {
    EXPECT_FLOAT_EQ(y.values[b * 3 + 0], 1.5f);
    EXPECT_FLOAT_EQ(y.values[b * 3 + 1], 6.0f);
    EXPECT_FLOAT_EQ(y.values[b * 3 + 2], 10.5f);
  }
}

TEST(AdaptiveAvgPool2d, BadShapesAndSizesRaiseClearErrors) {
  AdaptiveAvgPool2dParams p{2, 3, 4, 5, 7, 3, 2};
  Buffer x(p.x_shape()), y(p.y_shape());
  expect_error_containing([&] { adaptive_avg_pool2d_forward(p, {.x = y.view(), .y = y.view()}); },
                          "adaptive_avg_pool2d input has shape [3, 8, 3, 2], expected "
                          "[3, 8, 5, 7]");
  AdaptiveAvgPool2dParams bad = p;
  bad.out_w = 0;
  expect_error_containing([&] { adaptive_avg_pool2d_forward(bad, {.x = x.view(), .y = y.view()}); },
                          "output size must be positive, got out_h=3 out_w=0");
  expect_error_containing(
      [&] { adaptive_avg_pool2d_backward(p, {.dy = y.view(), .dx = y.view()}); },
      "adaptive_avg_pool2d input gradient has shape");
}

}  // namespace
}  // namespace hfta
