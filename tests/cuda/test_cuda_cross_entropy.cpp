// The CUDA cross-entropy (fused_ops/cuda/cross_entropy.cpp, kernels in
// cross_entropy_kernels.cu) against the CPU op (fused_ops/cpu/cross_entropy.cpp, through the
// dispatching cross_entropy_forward / cross_entropy_backward): B in {1, 2, 3, 8}; K on both sides
// of the 256-thread row blocks (1, 2, 10, 255, 256, 257, 1000); no ignore_index, ignore_index
// -100 on some rows, ignore_index equal to a class, every row ignored (M = 0); a NaN logit in the
// last model (its loss goes NaN, the others do not); wide logits (|x| up to 60) for K = 10;
// dlogits in its own buffer or in probs; per-model dlosses.
//
// Without a GPU: CrossEntropyHostMirror* drives cross_entropy_math.h's functions as the kernels
// do (each row's kThreads column partials and the fixed tree that combines them, then the model
// sums, then the label slots), on NaN-filled outputs. Forward against the CPU op within the
// error of the CPU's exp polynomial (8.4e-8 relative) and of the parked float log-likelihood
// (|l| e^l 2^-24 <= 2.2e-8 absolute on the label's probability): probs 5e-8 absolute plus
// 10 * 2^-24 relative, losses 3e-7 absolute plus 2^-22 relative (the CPU's log of a sum that is
// 1.5e-7 off, and the float rounding of each log-likelihood). Backward bit for bit on the same
// probs (the same float arithmetic).
// With a GPU: CudaCrossEntropy* runs the kernels: forward against the mirror and the CPU op with
// the forward's tolerance (the device's double exp and log may round differently in the last
// place), backward bit for bit against the mirror's backward on the device's own probs.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "fused_ops/cross_entropy.h"
#include "fused_ops/cuda/cross_entropy_math.h"
#include "fused_ops/cuda/launch.cuh"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;

const float kNan = std::numeric_limits<float>::quiet_NaN();

enum class Ignore { kNone, kPadding, kClass, kAll };

struct CeCase {
  int64_t B, N, K;
  Ignore ignore;
  bool alias;  // dlogits is probs
  CrossEntropyParams params() const {
    CrossEntropyParams p{.B = B, .N = N, .K = K};
    if (ignore == Ignore::kPadding || ignore == Ignore::kAll) p.ignore_index = -100;
    if (ignore == Ignore::kClass) p.ignore_index = 1;
    return p;
  }
  std::string name() const {
    const char* ig[] = {"", "_pad", "_class", "_all"};
    return fmt::format("B{}_N{}_K{}{}{}", B, N, K, ig[static_cast<int>(ignore)],
                       alias ? "_inplace" : "");
  }
};

std::vector<CeCase> ce_cases() {
  std::vector<CeCase> cases;
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{1, 1},   {5, 2},   {7, 10},  {3, 255},
                                                          {2, 256}, {4, 257}, {3, 1000}};
  for (int64_t B : test::model_counts())
    for (const auto& [N, K] : sizes)
      for (Ignore ig : {Ignore::kNone, Ignore::kPadding, Ignore::kClass, Ignore::kAll})
        cases.push_back({B, N, K, ig, (N + K + B) % 2 == 0});
  return cases;
}

struct CeData {
  Buffer logits, dlosses;
  std::vector<int32_t> labels;
};

CeData ce_data(const CeCase& c, uint64_t seed) {
  const CrossEntropyParams p = c.params();
  RngStream rng(seed, 0);
  const float scale = c.K == 10 ? 20.0f : 1.0f;
  CeData d{test::random_buffer(p.logits_shape(), rng, -3.0f * scale, 3.0f * scale),
           test::random_buffer(p.losses_shape(), rng, 0.5f, 2.0f),
           std::vector<int32_t>(static_cast<size_t>(c.N))};
  for (int64_t n = 0; n < c.N; ++n) {
    int32_t label = static_cast<int32_t>(rng.uniform() * static_cast<float>(c.K));
    if (label >= c.K) label = static_cast<int32_t>(c.K - 1);
    if (c.ignore == Ignore::kAll || (c.ignore == Ignore::kPadding && n % 3 == 1)) label = -100;
    d.labels[static_cast<size_t>(n)] = label;
  }
  // A NaN in the last model's first row; with B > 1 the other models must stay finite.
  if (c.K > 1) d.logits.values[static_cast<size_t>(((c.B - 1) * c.N) * c.K + c.K / 2)] = kNan;
  return d;
}

struct CeResults {
  std::vector<float> probs, losses, dlogits;
};

CeResults cpu_ce(const CeCase& c, CeData d) {
  const CrossEntropyParams p = c.params();
  Buffer probs(p.logits_shape(), kNan), losses(p.losses_shape(), kNan),
      dlogits(p.logits_shape(), kNan);
  const IndexView labels(d.labels.data(), p.labels_shape());
  cross_entropy_forward(p, {.logits = d.logits.view(),
                            .labels = labels,
                            .losses = losses.view(),
                            .saved = {.probs = probs.view()}});
  const std::vector<float> saved_probs = probs.values;
  cross_entropy_backward(p, {.saved = {.probs = probs.view()},
                             .labels = labels,
                             .dlosses = d.dlosses.view(),
                             .dlogits = c.alias ? probs.view() : dlogits.view()});
  return {saved_probs, losses.values, c.alias ? probs.values : dlogits.values};
}

ce_math::CeShape ce_shape(const CeCase& c, const std::vector<int32_t>& labels) {
  const CrossEntropyParams p = c.params();
  const IndexView view(const_cast<int32_t*>(labels.data()), p.labels_shape());
  return {.B = c.B,
          .N = c.N,
          .K = c.K,
          .M = cross_entropy_target_rows(p, view),
          .has_ignore_index = p.ignore_index.has_value(),
          .ignore_index = p.ignore_index.value_or(0)};
}

// The forward kernels' work, in their order: per row the kThreads partials and the tree.
void mirror_forward(const ce_math::CeShape& s, const float* logits, const int32_t* labels,
                    float* probs, float* losses) {
  constexpr int T = cuda::kernels::kThreads;
  std::vector<float> max_part(T);
  std::vector<double> sum_part(T);
  for (int64_t row = 0; row < s.B * s.N; ++row) {
    const float* x = logits + row * s.K;
    float* p = probs + row * s.K;
    for (int t = 0; t < T; ++t) max_part[t] = ce_math::row_max_partial(x, s.K, t, T);
    for (int stride = T / 2; stride > 0; stride /= 2)
      for (int t = 0; t < stride; ++t)
        max_part[t] = ce_math::combine_max(max_part[t], max_part[t + stride]);
    const float m = max_part[0];
    for (int t = 0; t < T; ++t) sum_part[t] = ce_math::row_exp_partial(x, p, s.K, m, t, T);
    for (int stride = T / 2; stride > 0; stride /= 2)
      for (int t = 0; t < stride; ++t)
        sum_part[t] = ce_math::combine_sum(sum_part[t], sum_part[t + stride]);
    const double sum = sum_part[0];
    for (int t = 0; t < T; ++t) ce_math::row_scale(p, s.K, sum, t, T);
    const int32_t label = labels[row % s.N];
    if (!ce_math::ignored(s, label)) p[label] = ce_math::row_log_likelihood(x[label], m, sum);
  }
  for (int64_t b = 0; b < s.B; ++b) ce_math::model_loss_at(s, probs, labels, losses, b);
  for (int64_t row = 0; row < s.B * s.N; ++row)
    ce_math::restore_label_prob_at(s, probs, labels, row);
}

// The backward kernel's work on `probs`; with alias, dlogits overwrites probs as on the device.
std::vector<float> mirror_backward(const ce_math::CeShape& s, std::vector<float> probs,
                                   const int32_t* labels, const float* dlosses, bool alias) {
  std::vector<float> dlogits(probs.size(), kNan);
  float* out = alias ? probs.data() : dlogits.data();
  for (int64_t i = 0; i < s.B * s.N * s.K; ++i)
    ce_math::cross_entropy_backward_at(s, probs.data(), labels, dlosses, out, i);
  return alias ? probs : dlogits;
}

// |got - want| <= atol + rtol |want|, or both NaN.
void expect_near(const std::vector<float>& got, const std::vector<float>& want, double atol,
                 double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t misses = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool ok = std::isnan(want[i])
                        ? std::isnan(got[i])
                        : std::fabs(double(got[i]) - want[i]) <= atol + rtol * std::fabs(want[i]);
    if (!ok && misses++ == 0) first = static_cast<int64_t>(i);
  }
  EXPECT_EQ(misses, 0) << what << ": " << misses << " of " << got.size() << " differ; first at "
                       << first << ": got " << (first >= 0 ? got[first] : 0.0f) << ", want "
                       << (first >= 0 ? want[first] : 0.0f);
}

void expect_bitwise(const std::vector<float>& got, const std::vector<float>& want,
                    const std::string& what) {
  expect_near(got, want, 0.0, 0.0, what);
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    if (!std::isnan(want[i]) && std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i]))
      ADD_FAILURE() << what << "[" << i << "]: sign of zero differs";
}

constexpr double kProbAtol = 5e-8, kProbRtol = 10.0 / 16777216.0;
constexpr double kLossAtol = 3e-7, kLossRtol = 1.0 / 4194304.0;

void expect_forward_near(const CeResults& got, const CeResults& want, const std::string& whose) {
  expect_near(got.probs, want.probs, kProbAtol, kProbRtol, "probs against " + whose);
  expect_near(got.losses, want.losses, kLossAtol, kLossRtol, "losses against " + whose);
}

// The models without the NaN have finite losses; the last model's loss is NaN when its NaN row
// counts (row 0's label not ignored).
void expect_nan_confined(const CeCase& c, const ce_math::CeShape& s,
                         const std::vector<int32_t>& labels, const std::vector<float>& losses) {
  for (int64_t b = 0; b + 1 < c.B; ++b) EXPECT_TRUE(std::isfinite(losses[b])) << "model " << b;
  if (c.K > 1 && !ce_math::ignored(s, labels[0])) {
    EXPECT_TRUE(std::isnan(losses[c.B - 1])) << "the NaN model's loss";
  }
}

class CrossEntropyHostMirror : public ::testing::TestWithParam<CeCase> {};

TEST_P(CrossEntropyHostMirror, KernelArithmeticMatchesCpuOp) {
  const CeCase& c = GetParam();
  const uint64_t seed = test::case_seed("ce_" + c.name());
  HFTA_CASE_TRACE(seed);
  const CeData d = ce_data(c, seed);
  const CeResults cpu = cpu_ce(c, d);
  const ce_math::CeShape s = ce_shape(c, d.labels);
  CeResults mirror{
      std::vector<float>(cpu.probs.size(), kNan), std::vector<float>(cpu.losses.size(), kNan), {}};
  mirror_forward(s, d.logits.values.data(), d.labels.data(), mirror.probs.data(),
                 mirror.losses.data());
  expect_forward_near(mirror, cpu, "the CPU op");
  expect_nan_confined(c, s, d.labels, mirror.losses);
  // Backward on the CPU's probs: the same arithmetic.
  expect_bitwise(mirror_backward(s, cpu.probs, d.labels.data(), d.dlosses.values.data(), c.alias),
                 cpu.dlogits, "dlogits");
}

class CudaCrossEntropy : public ::testing::TestWithParam<CeCase> {};

TEST_P(CudaCrossEntropy, MatchesMirrorAndCpuOp) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const CeCase& c = GetParam();
  const uint64_t seed = test::case_seed("ce_" + c.name());
  HFTA_CASE_TRACE(seed);
  CeData d = ce_data(c, seed);
  const CrossEntropyParams p = c.params();
  const CeResults cpu = cpu_ce(c, d);
  const ce_math::CeShape s = ce_shape(c, d.labels);
  CeResults mirror{
      std::vector<float>(cpu.probs.size(), kNan), std::vector<float>(cpu.losses.size(), kNan), {}};
  mirror_forward(s, d.logits.values.data(), d.labels.data(), mirror.probs.data(),
                 mirror.losses.data());

  const Shape ls = p.logits_shape();
  const auto bytes = [](int64_t n) {
    return cuda::DeviceArena::align_up(static_cast<size_t>(n) * sizeof(float));
  };
  cuda::DeviceArena arena(3 * bytes(ls.numel()) + 2 * bytes(c.B) + bytes(c.N), "ce test");
  const TensorView logits = arena.carve(ls), probs = arena.carve(ls), dlogits = arena.carve(ls),
                   losses = arena.carve(p.losses_shape()), dlosses = arena.carve(p.losses_shape());
  const IndexView labels = arena.carve<int32_t>(p.labels_shape());
  cuda::copy_to_device(d.logits.view(), logits);
  cuda::copy_to_device(Buffer(ls, kNan).view(), probs);
  cuda::copy_to_device(Buffer(ls, kNan).view(), dlogits);
  cuda::copy_to_device(Buffer(p.losses_shape(), kNan).view(), losses);
  cuda::copy_to_device(d.dlosses.view(), dlosses);
  cuda::copy_to_device(
      TensorView(reinterpret_cast<float*>(d.labels.data()), p.labels_shape()),
      TensorView(reinterpret_cast<float*>(labels.data), p.labels_shape(), Device::kCuda));
  cross_entropy_forward(
      p, {.logits = logits, .labels = labels, .losses = losses, .saved = {.probs = probs}});
  CeResults got{std::vector<float>(cpu.probs.size()), std::vector<float>(cpu.losses.size()),
                std::vector<float>(cpu.probs.size())};
  cuda::copy_to_host(probs, TensorView(got.probs.data(), ls));
  cuda::copy_to_host(losses, TensorView(got.losses.data(), p.losses_shape()));
  cross_entropy_backward(p, {.saved = {.probs = probs},
                             .labels = labels,
                             .dlosses = dlosses,
                             .dlogits = c.alias ? probs : dlogits});
  cuda::copy_to_host(c.alias ? probs : dlogits, TensorView(got.dlogits.data(), ls));

  expect_forward_near(got, mirror, "the mirror");
  expect_forward_near(got, cpu, "the CPU op");
  expect_nan_confined(c, s, d.labels, got.losses);
  expect_bitwise(got.dlogits,
                 mirror_backward(s, got.probs, d.labels.data(), d.dlosses.values.data(), c.alias),
                 "dlogits against the mirror on the device's probs");
}

std::string ce_case_name(const ::testing::TestParamInfo<CeCase>& info) { return info.param.name(); }

INSTANTIATE_TEST_SUITE_P(Cases, CrossEntropyHostMirror, ::testing::ValuesIn(ce_cases()),
                         ce_case_name);
INSTANTIATE_TEST_SUITE_P(Cases, CudaCrossEntropy, ::testing::ValuesIn(ce_cases()), ce_case_name);

// A bad label in device memory raises as on the CPU (the op checks a host copy).
TEST(CudaCrossEntropyErrors, BadDeviceLabelRaises) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const CrossEntropyParams p{.B = 2, .N = 4, .K = 5};
  cuda::DeviceArena arena(4096, "ce error test");
  const TensorView logits = arena.carve(p.logits_shape()), probs = arena.carve(p.logits_shape()),
                   losses = arena.carve(p.losses_shape());
  const IndexView labels = arena.carve<int32_t>(p.labels_shape());
  std::vector<int32_t> host = {0, 4, 7, 1};
  cuda::copy_to_device(
      TensorView(reinterpret_cast<float*>(host.data()), p.labels_shape()),
      TensorView(reinterpret_cast<float*>(labels.data), p.labels_shape(), Device::kCuda));
  test::expect_error_containing_all(
      [&] {
        cross_entropy_forward(
            p, {.logits = logits, .labels = labels, .losses = losses, .saved = {.probs = probs}});
      },
      {"label 7 at row 2", "outside [0, K=5)"});
}

// Checked before dispatch, so no GPU is needed: host memory labelled as CUDA memory is never
// touched, and host labels next to device logits raise.
TEST(CudaCrossEntropyErrors, TensorsOnTwoDevicesRaise) {
  const CrossEntropyParams p{.B = 1, .N = 2, .K = 3};
  std::vector<float> logits(6), probs(6), losses(1), dlosses(1);
  std::vector<int32_t> labels = {0, 2};
  test::expect_error_containing_all(
      [&] {
        cross_entropy_forward(
            p, {.logits = TensorView(logits.data(), p.logits_shape(), Device::kCuda),
                .labels = IndexView(labels.data(), p.labels_shape()),
                .losses = TensorView(losses.data(), p.losses_shape(), Device::kCuda),
                .saved = {.probs = TensorView(probs.data(), p.logits_shape(), Device::kCuda)}});
      },
      {"cross-entropy labels is on the CPU", "runs on the CUDA device"});
  test::expect_error_containing_all(
      [&] {
        cross_entropy_backward(
            p, {.saved = {.probs = TensorView(probs.data(), p.logits_shape(), Device::kCuda)},
                .labels = IndexView(labels.data(), p.labels_shape(), Device::kCuda),
                .dlosses = TensorView(dlosses.data(), p.losses_shape()),
                .dlogits = TensorView(logits.data(), p.logits_shape(), Device::kCuda)});
      },
      {"cross-entropy loss gradient is on the CPU"});
  test::expect_error_containing(
      [&] {
        cross_entropy_target_rows(p, IndexView(labels.data(), p.labels_shape(), Device::kCuda));
      },
      "reads the labels on the host");
}

}  // namespace
}  // namespace hfta
