// The CUDA BCE with logits (fused_ops/cuda/bce.cpp): B in {1, 2, 3, 8}, N around the forward's
// 256-thread blocks (1, 17, 128, 255, 256, 257, 2049), all-real, all-fake and soft targets,
// moderate ([-4, 4]) and saturating ([-30, 30]) logits, mean_sigmoid asked or skipped, dlogits
// written or accumulated, a NaN logit in the last model of some cases.
//   BceHostMirror (runs without a GPU): bce_math.h driven as the kernels run it (per-thread
//     partials, the block's fixed tree, one thread per logit), on NaN-filled outputs, against the
//     reference within the bounds of `bounds` below (the NaN confined to its model); and model b
//     of the fused mirror against the B = 1 mirror on model b's slice, bit for bit.
//   CudaBce (skipped without a GPU): the op through the dispatcher on device tensors against the
//     reference within the same bounds; a bad target on the device raises.
//   BceDevices: tensors on two devices raise (runs without a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "fused_ops/bce.h"
#include "fused_ops/cuda/bce_math.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct BceCase {
  int64_t B, N;
  int targets;  // 0 all real (1), 1 all fake (0), 2 soft with exact 0s and 1s
  float range;
  bool mean_sigmoid, accumulate, nan;
  std::string name() const {
    return fmt::format("B{}_N{}_{}_range{}{}{}{}", B, N,
                       targets == 0   ? "real"
                       : targets == 1 ? "fake"
                                      : "soft",
                       int(range), mean_sigmoid ? "" : "_nosig", accumulate ? "_acc" : "",
                       nan ? "_nan" : "");
  }
  BceWithLogitsParams params() const { return {B, N}; }
};

void PrintTo(const BceCase& c, std::ostream* os) { *os << c.name(); }

std::vector<BceCase> cases() {
  std::vector<BceCase> out;
  int k = 0;
  for (int64_t N : {1, 17, 128, 255, 256, 257, 2049})
    for (int64_t B : {1, 2, 3, 8}) {
      out.push_back(
          {B, N, k % 3, k % 2 == 0 ? 4.0f : 30.0f, k % 4 != 3, k % 3 == 1, B > 1 && k % 5 == 2});
      ++k;
    }
  return out;
}

struct Tensors {
  Buffer logits, targets, dlosses, dlogits_start;
};

Tensors inputs(const BceCase& c, uint64_t seed) {
  RngStream rng(seed, 0);
  const BceWithLogitsParams p = c.params();
  Tensors t{
      test::random_buffer(p.logits_shape(), rng, -c.range, c.range),
      test::random_buffer(p.targets_shape(), rng, 0.0f, 1.0f),
      test::random_buffer(p.losses_shape(), rng, 0.5f, 2.0f),
      c.accumulate ? test::random_buffer(p.logits_shape(), rng) : Buffer(p.logits_shape(), kNaN)};
  for (int64_t n = 0; n < c.N; ++n) {
    float& v = t.targets.values[static_cast<size_t>(n)];
    if (c.targets != 2)
      v = c.targets == 0 ? 1.0f : 0.0f;
    else if (n % 3 == 0)
      v = float(n % 2);
  }
  if (c.nan) t.logits.values[static_cast<size_t>((c.B - 1) * c.N + c.N / 2)] = kNaN;
  return t;
}

struct Outputs {
  Buffer losses, mean_sigmoid, dlogits;
};

// The kernels' work on the host: per model, kThreads partials in sample strides, the fixed tree,
// the mean; then every logit's gradient.
Outputs mirror(const BceCase& c, const Tensors& t) {
  constexpr int kThreads = 256;  // fused_ops/cuda/launch.cuh
  const BceWithLogitsParams p = c.params();
  Outputs o{Buffer(p.losses_shape(), kNaN), Buffer(p.losses_shape(), kNaN), t.dlogits_start};
  for (int64_t b = 0; b < c.B; ++b) {
    std::vector<bce_math::Partial> part(kThreads);
    for (int th = 0; th < kThreads; ++th)
      part[th] = bce_math::model_partial(t.logits.values.data(), t.targets.values.data(), c.N, b,
                                         th, kThreads);
    for (int stride = kThreads / 2; stride > 0; stride /= 2)
      for (int th = 0; th < stride; ++th) part[th] = bce_math::combine(part[th], part[th + stride]);
    o.losses.values[b] = bce_math::mean_of(part[0].loss, c.N);
    if (c.mean_sigmoid) o.mean_sigmoid.values[b] = bce_math::mean_of(part[0].sigmoid, c.N);
  }
  for (int64_t i = 0; i < c.B * c.N; ++i)
    bce_math::backward_at(t.logits.values.data(), t.targets.values.data(), t.dlosses.values.data(),
                          o.dlogits.values.data(), c.N, c.accumulate, i);
  return o;
}

// Bounds against the double reference, u = 2^-24, every libm call (expf, log1pf) within
// 4 ulp = 8u (CUDA documents 2 and 1 ulp; glibc's are within 1 and 2):
//   a loss term: x t and the two sums round (u |x t|, u |max(x, 0) - x t|, u |term|);
//     e = exp(-|x|) within 8u e moves log1p(e) by 8u e / (1 + e), and log1pf adds
//     8u log1p(e); the double sum and the mean add nothing that counts; the float mean rounds,
//     and so does the reference: the terms' bounds over N, plus 2u |loss|.
//   sigmoid: 1/(1+e) within 8u e/(1+e) + 2u, e/(1+e) within 8u + 8u e/(1+e) + 2u (relative):
//     at most 14u s; mean_sigmoid the mean of those plus 2u |mean|.
//   dlogits: scale = float(dlosses / N) (u), s - t (u |s - t|), the product (u): |scale| (14u s +
//     u |s - t|) + 2u |g|, and the reference's rounding u |g|; accumulating rounds once more on
//     each side: 2u (|dlogits| + bound).
struct Bounds {
  std::vector<double> losses, mean_sigmoid, dlogits;
};

Bounds bounds(const BceCase& c, const Tensors& t, const Outputs& want) {
  constexpr double u = 1.0 / (1 << 24), L = 8 * u;
  Bounds out{std::vector<double>(c.B), std::vector<double>(c.B), std::vector<double>(c.B * c.N)};
  for (int64_t b = 0; b < c.B; ++b) {
    double loss = 0.0, sig = 0.0;
    const double scale = double(t.dlosses.values[b]) / double(c.N);
    for (int64_t n = 0; n < c.N; ++n) {
      const double x = t.logits.values[b * c.N + n], tn = t.targets.values[n];
      const double e = std::exp(-std::fabs(x)), s = x >= 0 ? 1 / (1 + e) : e / (1 + e);
      const double term = std::fmax(x, 0.0) - x * tn + std::log1p(e);
      loss += u * (std::fabs(x * tn) + std::fabs(std::fmax(x, 0.0) - x * tn) + std::fabs(term)) +
              L * e / (1 + e) + L * std::log1p(e);
      const double s_err = 14 * u * s;
      sig += s_err;
      const double g = scale * (s - tn);
      double& d = out.dlogits[b * c.N + n];
      d = std::fabs(scale) * (s_err + u * std::fabs(s - tn)) + 3 * u * std::fabs(g) + 1e-37;
      if (c.accumulate) d += 2 * u * (std::fabs(want.dlogits.values[b * c.N + n]) + d);
    }
    out.losses[b] = loss / double(c.N) + 2 * u * std::fabs(want.losses.values[b]);
    out.mean_sigmoid[b] = sig / double(c.N) + 2 * u * std::fabs(want.mean_sigmoid.values[b]);
  }
  return out;
}

// The reference's outputs for the case, from the same starting values.
Outputs reference(const BceCase& c, Tensors& t) {
  const BceWithLogitsParams p = c.params();
  Outputs o{Buffer(p.losses_shape(), kNaN), Buffer(p.losses_shape(), kNaN), t.dlogits_start};
  ref::bce_with_logits_forward(
      p, {.logits = t.logits.view(),
          .targets = t.targets.view(),
          .losses = o.losses.view(),
          .mean_sigmoid = c.mean_sigmoid ? o.mean_sigmoid.view() : TensorView()});
  ref::bce_with_logits_backward(p, {.logits = t.logits.view(),
                                    .targets = t.targets.view(),
                                    .dlosses = t.dlosses.view(),
                                    .dlogits = o.dlogits.view(),
                                    .accumulate_dx = c.accumulate});
  return o;
}

// got against want within bound[i]; NaN must meet NaN.
void expect_within(const std::vector<float>& got, const std::vector<float>& want,
                   const std::vector<double>& bound, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < want.size() && reported < 5; ++i) {
    const bool ok =
        std::isnan(want[i]) ? std::isnan(got[i]) : std::fabs(double(got[i]) - want[i]) <= bound[i];
    if (ok) continue;
    ++reported;
    ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", expected " << want[i] << " within "
                  << bound[i];
  }
}

void expect_matches_reference(const BceCase& c, Tensors& t, const Outputs& got) {
  const Outputs want = reference(c, t);
  const Bounds bound = bounds(c, t, want);
  expect_within(got.losses.values, want.losses.values, bound.losses, "losses");
  if (c.mean_sigmoid)
    expect_within(got.mean_sigmoid.values, want.mean_sigmoid.values, bound.mean_sigmoid,
                  "mean_sigmoid");
  else
    for (float v : got.mean_sigmoid.values) EXPECT_TRUE(std::isnan(v)) << "mean_sigmoid written";
  expect_within(got.dlogits.values, want.dlogits.values, bound.dlogits, "dlogits");
}

class BceHostMirror : public ::testing::TestWithParam<BceCase> {};

TEST_P(BceHostMirror, MatchesTheReference) {
  const BceCase& c = GetParam();
  const uint64_t seed = test::case_seed("cuda_bce_" + c.name());
  HFTA_CASE_TRACE(seed);
  Tensors t = inputs(c, seed);
  expect_matches_reference(c, t, mirror(c, t));
}

TEST_P(BceHostMirror, FusedEqualsEachModelAlone) {
  const BceCase& c = GetParam();
  const uint64_t seed = test::case_seed("cuda_bce_" + c.name());
  HFTA_CASE_TRACE(seed);
  const Tensors t = inputs(c, seed);
  const Outputs fused = mirror(c, t);
  for (int64_t b = 0; b < c.B; ++b) {
    SCOPED_TRACE(fmt::format("model b={}", b));
    BceCase one = c;
    one.B = 1;
    const auto slice = [&](const Buffer& from, int64_t per_model) {
      Buffer out(Shape{per_model});
      std::copy_n(from.values.begin() + b * per_model, per_model, out.values.begin());
      return out;
    };
    const Tensors single{slice(t.logits, c.N), t.targets, slice(t.dlosses, 1),
                         slice(t.dlogits_start, c.N)};
    const Outputs alone = mirror(one, single);
    test::expect_same_bits(alone.losses.values, slice(fused.losses, 1).values, "losses");
    test::expect_same_bits(alone.mean_sigmoid.values, slice(fused.mean_sigmoid, 1).values,
                           "mean_sigmoid");
    test::expect_same_bits(alone.dlogits.values, slice(fused.dlogits, c.N).values, "dlogits");
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, BceHostMirror, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

class CudaBce : public ::testing::TestWithParam<BceCase> {};

TEST_P(CudaBce, MatchesTheReference) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const BceCase& c = GetParam();
  const uint64_t seed = test::case_seed("cuda_bce_" + c.name());
  HFTA_CASE_TRACE(seed);
  Tensors t = inputs(c, seed);
  const BceWithLogitsParams p = c.params();
  const auto bytes = [](const Shape& s) {
    return cuda::DeviceArena::align_up(static_cast<size_t>(s.numel()) * sizeof(float));
  };
  cuda::DeviceArena arena(
      2 * bytes(p.logits_shape()) + bytes(p.targets_shape()) + 3 * bytes(p.losses_shape()),
      "bce test");
  const TensorView logits = arena.carve(p.logits_shape()), dlogits = arena.carve(p.logits_shape()),
                   targets = arena.carve(p.targets_shape()), losses = arena.carve(p.losses_shape()),
                   sig = arena.carve(p.losses_shape()), dlosses = arena.carve(p.losses_shape());
  cuda::copy_to_device(t.logits.view(), logits);
  cuda::copy_to_device(t.targets.view(), targets);
  cuda::copy_to_device(t.dlosses.view(), dlosses);
  cuda::copy_to_device(t.dlogits_start.view(), dlogits);
  cuda::copy_to_device(Buffer(p.losses_shape(), kNaN).view(), losses);
  cuda::copy_to_device(Buffer(p.losses_shape(), kNaN).view(), sig);
  bce_with_logits_forward(p, {.logits = logits,
                              .targets = targets,
                              .losses = losses,
                              .mean_sigmoid = c.mean_sigmoid ? sig : TensorView()});
  bce_with_logits_backward(p, {.logits = logits,
                               .targets = targets,
                               .dlosses = dlosses,
                               .dlogits = dlogits,
                               .accumulate_dx = c.accumulate});
  Outputs got{Buffer(p.losses_shape()), Buffer(p.losses_shape()), Buffer(p.logits_shape())};
  cuda::copy_to_host(losses, got.losses.view());
  cuda::copy_to_host(sig, got.mean_sigmoid.view());
  cuda::copy_to_host(dlogits, got.dlogits.view());
  expect_matches_reference(c, t, got);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaBce, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(CudaBceErrors, BadDeviceTargetRaises) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const BceWithLogitsParams p{2, 3};
  cuda::DeviceArena arena(4096, "bce errors");
  const TensorView logits = arena.carve(p.logits_shape()), targets = arena.carve(p.targets_shape()),
                   losses = arena.carve(p.losses_shape());
  Buffer bad(p.targets_shape(), 1.0f);
  bad.values[2] = 1.5f;
  cuda::copy_to_device(bad.view(), targets);
  test::expect_error_containing_all(
      [&] { bce_with_logits_forward(p, {.logits = logits, .targets = targets, .losses = losses}); },
      {"target 1.5", "outside [0, 1]"});
}

TEST(BceDevices, TensorsOnTwoDevicesRaise) {
  const BceWithLogitsParams p{2, 3};
  Buffer logits(p.logits_shape()), targets(p.targets_shape(), 1.0f), losses(p.losses_shape());
  TensorView on_device = losses.view();
  on_device.device = Device::kCuda;
  test::expect_error_containing_all(
      [&] {
        bce_with_logits_forward(
            p, {.logits = logits.view(), .targets = targets.view(), .losses = on_device});
      },
      {"bce_with_logits losses", "one device"});
  TensorView dlogits = logits.view();
  dlogits.device = Device::kCuda;
  EXPECT_THROW(bce_with_logits_backward(p, {.logits = logits.view(),
                                            .targets = targets.view(),
                                            .dlosses = losses.view(),
                                            .dlogits = dlogits}),
               Error);
}

}  // namespace
}  // namespace hfta
