// The CUDA pooling (fused_ops/cuda/pool2d.cpp, kernels in pool2d_kernels.cu) against the CPU op
// (fused_ops/cpu/pool2d.cpp, through the dispatching pool2d_forward / pool2d_backward and the
// adaptive ones): max with argmax, average with and without count_include_pad, adaptive average.
// B in {1, 2, 3, 8}; padding, stride != kernel, overlapping windows (stride < kernel, where the
// gather backward sums several windows), ceil_mode, planes whose output count crosses the
// launch's 256-thread blocks; ties (inputs on a 0.25 grid) and a NaN for max; accumulate_dx on
// and off (dx starts as NaN without it, random with it).
//
// Without a GPU (this project's CI):
//   PoolHostMirror* / AdaptiveHostMirror*: pool2d_math.h's functions, driven over every output
//     (forward) or input element (backward) with the flat index the kernels use, on NaN-filled
//     outputs, against the CPU op. Bit for bit where the order of the arithmetic is the same:
//     max forward and argmax, max backward (the CPU adds dy to dx in flat output order, the
//     gather starts from dx and adds in that order), average forward (the CPU's padding zeros
//     add nothing), adaptive backward, and average backward when windows do not overlap along a
//     row. Average backward with kernel_w > stride_w: the CPU adds a row's shares in its vector
//     blocks' order, so the tolerance is (terms + 1) * 2^-23 * (max |dy| + max |dx|), terms the
//     most windows covering one element. Adaptive forward: the CPU's bin sum is an `omp simd`
//     reduction (any order), so count * 2^-23 * max |x|, count the largest bin.
// With a GPU: the real kernels against the mirror bit for bit (no multiply-add to contract, IEEE
// division), and so against the CPU op as above. Mixed devices raise without a GPU too.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/pool2d_geometry.h"
#include "fused_ops/cuda/pool2d_math.h"
#include "fused_ops/pool2d.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;

const float kNan = std::numeric_limits<float>::quiet_NaN();

struct PoolCase {
  PoolKind kind;
  int64_t B, N, C, H, W, kh, kw, sh, sw, ph, pw;
  bool ceil_mode, count_include_pad;

  Pool2dParams params() const {
    return {.kind = kind,
            .B = B,
            .N = N,
            .C = C,
            .H = H,
            .W = W,
            .kernel_h = kh,
            .kernel_w = kw,
            .stride_h = sh,
            .stride_w = sw,
            .pad_h = ph,
            .pad_w = pw,
            .ceil_mode = ceil_mode,
            .count_include_pad = count_include_pad};
  }
  std::string name() const {
    return fmt::format("{}_B{}_N{}_C{}_{}x{}_k{}x{}_s{}x{}_p{}x{}{}{}",
                       kind == PoolKind::kMax ? "max" : "avg", B, N, C, H, W, kh, kw, sh, sw, ph,
                       pw, ceil_mode ? "_ceil" : "",
                       kind == PoolKind::kAvg && !count_include_pad ? "_nopad" : "");
  }
};

// Geometries: {H, W, kh, kw, sh, sw, ph, pw, ceil_mode}, N and C per model.
struct Geometry {
  int64_t N, C, H, W, kh, kw, sh, sw, ph, pw;
  bool ceil_mode;
};
const std::vector<Geometry> kGeometries = {
    {2, 3, 8, 8, 2, 2, 2, 2, 0, 0, false},    // LeNet-style, windows tile the plane
    {2, 2, 17, 19, 3, 3, 2, 2, 1, 1, false},  // ResNet stem: overlapping, padded
    {1, 2, 9, 10, 3, 3, 1, 1, 1, 1, false},   // stride 1: each element in up to 9 windows
    {1, 3, 10, 9, 3, 2, 2, 1, 1, 0, true},    // stride != kernel per axis, ceil_mode
    {1, 1, 11, 23, 5, 5, 3, 3, 2, 2, true},   // ceil_mode with a clipped last window
    {2, 1, 7, 7, 2, 3, 3, 2, 1, 1, false},    // stride > kernel on one axis (gaps)
    {1, 1, 1, 256, 1, 3, 1, 1, 0, 1, false},  // 256 outputs a plane: launch block edges
    {1, 1, 16, 17, 2, 2, 1, 1, 1, 1, true},   // 17x18 outputs, > 256 per plane
};

std::vector<PoolCase> pool_cases() {
  std::vector<PoolCase> cases;
  for (int64_t B : test::model_counts())
    for (const Geometry& g : kGeometries) {
      auto make = [&](PoolKind kind, bool cip) {
        return PoolCase{kind, B,    g.N,  g.C,  g.H,  g.W,         g.kh,
                        g.kw, g.sh, g.sw, g.ph, g.pw, g.ceil_mode, cip};
      };
      cases.push_back(make(PoolKind::kMax, true));
      cases.push_back(make(PoolKind::kAvg, true));
      cases.push_back(make(PoolKind::kAvg, false));
    }
  return cases;
}

// Equal as bits, or both NaN.
bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

void expect_bitwise(const std::vector<float>& got, const std::vector<float>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t misses = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i)
    if (!same_float(got[i], want[i])) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++misses;
    }
  EXPECT_EQ(misses, 0) << what << ": " << misses << " of " << got.size()
                       << " elements differ; first at " << first << ": got "
                       << (first >= 0 ? got[first] : 0.0f) << ", want "
                       << (first >= 0 ? want[first] : 0.0f);
}

float max_abs(const std::vector<float>& v) {
  float m = 0.0f;
  for (float x : v)
    if (!std::isnan(x)) m = std::max(m, std::fabs(x));
  return m;
}

// Inputs for one case: x on a 0.25 grid for max (ties), with a NaN; dy random; dx's start.
struct PoolData {
  Buffer x, dy, dx_start;
};

PoolData pool_data(const PoolCase& c, bool accumulate, uint64_t seed) {
  const Pool2dParams p = c.params();
  RngStream rng(seed, 0);
  PoolData d{test::random_buffer(p.x_shape(), rng), test::random_buffer(p.y_shape(), rng),
             accumulate ? test::random_buffer(p.x_shape(), rng) : Buffer(p.x_shape(), kNan)};
  if (c.kind == PoolKind::kMax) {
    for (float& v : d.x.values) v = std::round(v * 4.0f) / 4.0f;
    d.x.values[d.x.values.size() / 3] = kNan;
  }
  return d;
}

// What the CPU op computes, and what the kernels' arithmetic computes on the host.
struct PoolResults {
  std::vector<float> y, dx;
  std::vector<int32_t> argmax;
};

PoolResults cpu_pool(const PoolCase& c, PoolData d, bool accumulate) {
  const Pool2dParams p = c.params();
  Buffer y(p.y_shape(), kNan), dx = d.dx_start;
  std::vector<int32_t> argmax(static_cast<size_t>(p.y_shape().numel()), -7);
  const IndexView argmax_view(argmax.data(), p.argmax_shape());
  const Pool2dSaved saved{.argmax = c.kind == PoolKind::kMax ? argmax_view : IndexView()};
  pool2d_forward(p, {.x = d.x.view(), .saved = saved, .y = y.view()});
  pool2d_backward(
      p, {.saved = saved, .dy = d.dy.view(), .dx = dx.view(), .accumulate_dx = accumulate});
  return {y.values, dx.values, argmax};
}

// The kernels' loops, one index at a time. Backward reads the CPU's argmax, so a wrong argmax
// fails forward's comparison without hiding a backward bug.
PoolResults mirror_pool(const PoolCase& c, const PoolData& d, bool accumulate,
                        const std::vector<int32_t>& cpu_argmax) {
  const Pool2dParams p = c.params();
  const pool_math::PoolGeometry g = cuda::pool_geometry(p);
  PoolResults r{std::vector<float>(static_cast<size_t>(p.y_shape().numel()), kNan),
                d.dx_start.values,
                std::vector<int32_t>(static_cast<size_t>(p.y_shape().numel()), -7)};
  const int64_t outputs = g.planes * g.OH * g.OW, inputs = g.planes * g.H * g.W;
  for (int64_t i = 0; i < outputs; ++i) {
    if (c.kind == PoolKind::kMax)
      pool_math::max_pool_forward_at(g, d.x.values.data(), r.y.data(), r.argmax.data(), i);
    else
      pool_math::avg_pool_forward_at(g, d.x.values.data(), r.y.data(), i);
  }
  for (int64_t i = 0; i < inputs; ++i) {
    if (c.kind == PoolKind::kMax)
      pool_math::max_pool_backward_at(g, cpu_argmax.data(), d.dy.values.data(), r.dx.data(),
                                      accumulate, i);
    else
      pool_math::avg_pool_backward_at(g, d.dy.values.data(), r.dx.data(), accumulate, i);
  }
  return r;
}

// Most windows covering one input element along both axes.
int64_t covering_terms(const PoolCase& c) {
  return ((c.kh + c.sh - 1) / c.sh) * ((c.kw + c.sw - 1) / c.sw);
}

// got against the CPU op's results, by the rules at the top of this file.
void expect_matches_cpu(const PoolCase& c, const PoolData& d, const PoolResults& got,
                        const PoolResults& cpu) {
  expect_bitwise(got.y, cpu.y, "y");
  if (c.kind == PoolKind::kMax) {
    EXPECT_EQ(got.argmax, cpu.argmax) << "argmax";
    expect_bitwise(got.dx, cpu.dx, "dx");
  } else if (c.kw <= c.sw) {
    expect_bitwise(got.dx, cpu.dx, "dx");
  } else {
    const double atol = double(covering_terms(c) + 1) * std::ldexp(1.0, -23) *
                        (max_abs(d.dy.values) + max_abs(d.dx_start.values));
    test::expect_close(got.dx.data(), cpu.dx.data(), static_cast<int64_t>(got.dx.size()), atol, 0.0,
                       "dx (overlapping windows along a row)");
  }
}

class PoolHostMirror : public ::testing::TestWithParam<std::tuple<PoolCase, bool>> {};

TEST_P(PoolHostMirror, KernelArithmeticMatchesCpuOp) {
  const auto& [c, accumulate] = GetParam();
  const uint64_t seed = test::case_seed(fmt::format("pool_{}_{}", c.name(), accumulate));
  HFTA_CASE_TRACE(seed);
  const PoolData d = pool_data(c, accumulate, seed);
  const PoolResults cpu = cpu_pool(c, d, accumulate);
  const PoolResults mirror = mirror_pool(c, d, accumulate, cpu.argmax);
  expect_matches_cpu(c, d, mirror, cpu);
}

std::string pool_case_name(const ::testing::TestParamInfo<std::tuple<PoolCase, bool>>& info) {
  return std::get<0>(info.param).name() + (std::get<1>(info.param) ? "_acc" : "");
}

INSTANTIATE_TEST_SUITE_P(Cases, PoolHostMirror,
                         ::testing::Combine(::testing::ValuesIn(pool_cases()), ::testing::Bool()),
                         pool_case_name);

// The real kernels through the dispatching op, on NaN-filled outputs.
class CudaPool : public ::testing::TestWithParam<std::tuple<PoolCase, bool>> {};

TEST_P(CudaPool, MatchesMirrorAndCpuOp) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const auto& [c, accumulate] = GetParam();
  const uint64_t seed = test::case_seed(fmt::format("pool_{}_{}", c.name(), accumulate));
  HFTA_CASE_TRACE(seed);
  const Pool2dParams p = c.params();
  const PoolData d = pool_data(c, accumulate, seed);
  const PoolResults cpu = cpu_pool(c, d, accumulate);
  const PoolResults mirror = mirror_pool(c, d, accumulate, cpu.argmax);

  const Shape xs = p.x_shape(), ys = p.y_shape();
  const auto bytes = [](const Shape& s) {
    return cuda::DeviceArena::align_up(static_cast<size_t>(s.numel()) * sizeof(float));
  };
  cuda::DeviceArena arena(2 * bytes(xs) + 3 * bytes(ys), "pool test");
  const TensorView x = arena.carve(xs), dx = arena.carve(xs), y = arena.carve(ys),
                   dy = arena.carve(ys);
  const IndexView argmax = arena.carve<int32_t>(ys);
  const TensorView argmax_bits(reinterpret_cast<float*>(argmax.data), ys, Device::kCuda);
  PoolResults got{std::vector<float>(static_cast<size_t>(ys.numel()), kNan), d.dx_start.values,
                  std::vector<int32_t>(static_cast<size_t>(ys.numel()), -7)};
  cuda::copy_to_device(const_cast<Buffer&>(d.x).view(), x);
  cuda::copy_to_device(const_cast<Buffer&>(d.dy).view(), dy);
  cuda::copy_to_device(TensorView(got.y.data(), ys), y);
  cuda::copy_to_device(TensorView(got.dx.data(), xs), dx);
  cuda::copy_to_device(TensorView(reinterpret_cast<float*>(got.argmax.data()), ys), argmax_bits);
  const Pool2dSaved saved{.argmax = c.kind == PoolKind::kMax ? argmax : IndexView()};
  pool2d_forward(p, {.x = x, .saved = saved, .y = y});
  pool2d_backward(p, {.saved = saved, .dy = dy, .dx = dx, .accumulate_dx = accumulate});
  cuda::copy_to_host(y, TensorView(got.y.data(), ys));
  cuda::copy_to_host(dx, TensorView(got.dx.data(), xs));
  cuda::copy_to_host(argmax_bits, TensorView(reinterpret_cast<float*>(got.argmax.data()), ys));

  expect_bitwise(got.y, mirror.y, "y against the mirror");
  expect_bitwise(got.dx, mirror.dx, "dx against the mirror");
  if (c.kind == PoolKind::kMax) {
    EXPECT_EQ(got.argmax, mirror.argmax) << "argmax";
  }
  expect_matches_cpu(c, d, got, cpu);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaPool,
                         ::testing::Combine(::testing::ValuesIn(pool_cases()), ::testing::Bool()),
                         pool_case_name);

// Adaptive average pooling: {N, C, H, W, out_h, out_w} per model.
struct AdaptiveCase {
  int64_t B, N, C, H, W, OH, OW;
  AdaptiveAvgPool2dParams params() const {
    return {.B = B, .N = N, .C = C, .H = H, .W = W, .out_h = OH, .out_w = OW};
  }
  std::string name() const {
    return fmt::format("B{}_N{}_C{}_{}x{}_to_{}x{}", B, N, C, H, W, OH, OW);
  }
  // Largest bin: ceil(H/OH) + 1 rows by ceil(W/OW) + 1 columns at most.
  int64_t max_bin() const { return ((H + OH - 1) / OH + 1) * ((W + OW - 1) / OW + 1); }
};

std::vector<AdaptiveCase> adaptive_cases() {
  const std::vector<AdaptiveCase> shapes = {
      {0, 2, 3, 7, 7, 1, 1},      // ResNet's global average pooling
      {0, 1, 2, 8, 8, 2, 2},      // bins tile the plane
      {0, 2, 2, 10, 7, 3, 4},     // overlapping bins
      {0, 1, 1, 5, 5, 7, 6},      // more outputs than inputs
      {0, 1, 1, 16, 17, 16, 17},  // identity, > 256 elements a plane
      {0, 1, 130, 3, 3, 1, 1},    // 130 * B planes of one output: block edges
  };
  std::vector<AdaptiveCase> cases;
  for (int64_t B : test::model_counts())
    for (AdaptiveCase c : shapes) {
      c.B = B;
      cases.push_back(c);
    }
  return cases;
}

struct AdaptiveResults {
  std::vector<float> y, dx;
};

class AdaptiveHostMirror : public ::testing::TestWithParam<std::tuple<AdaptiveCase, bool>> {};
class CudaAdaptivePool : public ::testing::TestWithParam<std::tuple<AdaptiveCase, bool>> {};

PoolData adaptive_data(const AdaptiveCase& c, bool accumulate, uint64_t seed) {
  const AdaptiveAvgPool2dParams p = c.params();
  RngStream rng(seed, 0);
  return {test::random_buffer(p.x_shape(), rng), test::random_buffer(p.y_shape(), rng),
          accumulate ? test::random_buffer(p.x_shape(), rng) : Buffer(p.x_shape(), kNan)};
}

AdaptiveResults cpu_adaptive(const AdaptiveCase& c, PoolData d, bool accumulate) {
  const AdaptiveAvgPool2dParams p = c.params();
  Buffer y(p.y_shape(), kNan), dx = d.dx_start;
  adaptive_avg_pool2d_forward(p, {.x = d.x.view(), .y = y.view()});
  adaptive_avg_pool2d_backward(p,
                               {.dy = d.dy.view(), .dx = dx.view(), .accumulate_dx = accumulate});
  return {y.values, dx.values};
}

AdaptiveResults mirror_adaptive(const AdaptiveCase& c, const PoolData& d, bool accumulate) {
  const pool_math::AdaptiveGeometry g = cuda::adaptive_pool_geometry(c.params());
  AdaptiveResults r{std::vector<float>(static_cast<size_t>(g.planes * g.OH * g.OW), kNan),
                    d.dx_start.values};
  for (int64_t i = 0; i < g.planes * g.OH * g.OW; ++i)
    pool_math::adaptive_avg_forward_at(g, d.x.values.data(), r.y.data(), i);
  for (int64_t i = 0; i < g.planes * g.H * g.W; ++i)
    pool_math::adaptive_avg_backward_at(g, d.dy.values.data(), r.dx.data(), accumulate, i);
  return r;
}

void expect_adaptive_matches_cpu(const AdaptiveCase& c, const PoolData& d,
                                 const AdaptiveResults& got, const AdaptiveResults& cpu) {
  const double atol = double(c.max_bin()) * std::ldexp(1.0, -23) * max_abs(d.x.values);
  test::expect_close(got.y.data(), cpu.y.data(), static_cast<int64_t>(got.y.size()), atol, 0.0,
                     "y (the CPU's bin sum is an omp simd reduction)");
  expect_bitwise(got.dx, cpu.dx, "dx");
}

TEST_P(AdaptiveHostMirror, KernelArithmeticMatchesCpuOp) {
  const auto& [c, accumulate] = GetParam();
  const uint64_t seed = test::case_seed(fmt::format("adaptive_{}_{}", c.name(), accumulate));
  HFTA_CASE_TRACE(seed);
  const PoolData d = adaptive_data(c, accumulate, seed);
  expect_adaptive_matches_cpu(c, d, mirror_adaptive(c, d, accumulate),
                              cpu_adaptive(c, d, accumulate));
}

TEST_P(CudaAdaptivePool, MatchesMirrorAndCpuOp) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const auto& [c, accumulate] = GetParam();
  const uint64_t seed = test::case_seed(fmt::format("adaptive_{}_{}", c.name(), accumulate));
  HFTA_CASE_TRACE(seed);
  const AdaptiveAvgPool2dParams p = c.params();
  const PoolData d = adaptive_data(c, accumulate, seed);
  const Shape xs = p.x_shape(), ys = p.y_shape();
  const auto bytes = [](const Shape& s) {
    return cuda::DeviceArena::align_up(static_cast<size_t>(s.numel()) * sizeof(float));
  };
  cuda::DeviceArena arena(2 * bytes(xs) + 2 * bytes(ys), "adaptive pool test");
  const TensorView x = arena.carve(xs), dx = arena.carve(xs), y = arena.carve(ys),
                   dy = arena.carve(ys);
  AdaptiveResults got{std::vector<float>(static_cast<size_t>(ys.numel()), kNan), d.dx_start.values};
  cuda::copy_to_device(const_cast<Buffer&>(d.x).view(), x);
  cuda::copy_to_device(const_cast<Buffer&>(d.dy).view(), dy);
  cuda::copy_to_device(TensorView(got.y.data(), ys), y);
  cuda::copy_to_device(TensorView(got.dx.data(), xs), dx);
  adaptive_avg_pool2d_forward(p, {.x = x, .y = y});
  adaptive_avg_pool2d_backward(p, {.dy = dy, .dx = dx, .accumulate_dx = accumulate});
  cuda::copy_to_host(y, TensorView(got.y.data(), ys));
  cuda::copy_to_host(dx, TensorView(got.dx.data(), xs));
  const AdaptiveResults mirror = mirror_adaptive(c, d, accumulate);
  expect_bitwise(got.y, mirror.y, "y against the mirror");
  expect_bitwise(got.dx, mirror.dx, "dx against the mirror");
  expect_adaptive_matches_cpu(c, d, got, cpu_adaptive(c, d, accumulate));
}

std::string adaptive_case_name(
    const ::testing::TestParamInfo<std::tuple<AdaptiveCase, bool>>& info) {
  return std::get<0>(info.param).name() + (std::get<1>(info.param) ? "_acc" : "");
}

INSTANTIATE_TEST_SUITE_P(Cases, AdaptiveHostMirror,
                         ::testing::Combine(::testing::ValuesIn(adaptive_cases()),
                                            ::testing::Bool()),
                         adaptive_case_name);
INSTANTIATE_TEST_SUITE_P(Cases, CudaAdaptivePool,
                         ::testing::Combine(::testing::ValuesIn(adaptive_cases()),
                                            ::testing::Bool()),
                         adaptive_case_name);

// Checked before dispatch, so no GPU is needed: host memory labelled as CUDA memory is never
// touched.
TEST(CudaPoolDevices, TensorsOnTwoDevicesRaise) {
  const Pool2dParams p{.kind = PoolKind::kMax, .H = 4, .W = 4, .kernel_h = 2, .kernel_w = 2};
  std::vector<float> x(16), y(4), dy(4), dx(16);
  std::vector<int32_t> argmax(4);
  test::expect_error_containing_all(
      [&] {
        pool2d_forward(p, {.x = TensorView(x.data(), p.x_shape(), Device::kCuda),
                           .y = TensorView(y.data(), p.y_shape())});
      },
      {"max_pool2d output is on the CPU", "runs on the CUDA device"});
  test::expect_error_containing_all(
      [&] {
        pool2d_forward(p, {.x = TensorView(x.data(), p.x_shape(), Device::kCuda),
                           .saved = {.argmax = IndexView(argmax.data(), p.argmax_shape())},
                           .y = TensorView(y.data(), p.y_shape(), Device::kCuda)});
      },
      {"max_pool2d saved argmax is on the CPU"});
  test::expect_error_containing_all(
      [&] {
        pool2d_backward(p, {.saved = {.argmax = IndexView(argmax.data(), p.argmax_shape())},
                            .dy = TensorView(dy.data(), p.y_shape()),
                            .dx = TensorView(dx.data(), p.x_shape(), Device::kCuda)});
      },
      {"max_pool2d input gradient is on the CUDA device", "runs on the CPU"});
  const AdaptiveAvgPool2dParams a{.H = 4, .W = 4};
  test::expect_error_containing_all(
      [&] {
        adaptive_avg_pool2d_forward(a, {.x = TensorView(x.data(), a.x_shape()),
                                        .y = TensorView(y.data(), a.y_shape(), Device::kCuda)});
      },
      {"adaptive_avg_pool2d output is on the CUDA device"});
}

}  // namespace
}  // namespace hfta
