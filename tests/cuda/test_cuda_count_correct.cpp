// The CUDA count_correct (fused_ops/cuda/cross_entropy.cpp). CountCorrectHostMirror (runs without
// a GPU): cross_entropy_math.h's per-thread counts, added over a block's 256 threads as the kernel
// adds them, equal the CPU op's counts: rows whose first maximum is the label, with ties before
// and after the label, NaN rows, ignored rows, K = 1 and N below and above the block size.
// CudaCountCorrect (skipped without a GPU): the op through the dispatcher on device tensors.
#include <gtest/gtest.h>

#include <cmath>
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

struct CountCase {
  CrossEntropyParams p;
  std::string name() const {
    return fmt::format("B{}_N{}_K{}{}", p.B, p.N, p.K, p.ignore_index ? "_ignore" : "");
  }
};

void PrintTo(const CountCase& c, std::ostream* os) { *os << c.name(); }

std::vector<CountCase> cases() {
  std::vector<CountCase> out;
  int k = 0;
  for (int64_t N : {1, 7, 300})
    for (int64_t K : {1, 3, 10, 300})
      for (int64_t B : {1, 2, 3, 8}) {
        CrossEntropyParams p{.B = B, .N = N, .K = K};
        if (k++ % 3 == 1) p.ignore_index = -100;
        out.push_back({p});
      }
  return out;
}

// Logits from a few values, so rows tie often (before and after the label); some rows NaN.
struct Inputs {
  std::vector<float> logits;
  std::vector<int32_t> labels;
};

Inputs inputs(const CountCase& c) {
  RngStream rng(test::case_seed("cuda_count_correct_" + c.name()), 0);
  const CrossEntropyParams& p = c.p;
  Inputs in;
  in.logits.resize(static_cast<size_t>(p.B * p.N * p.K));
  for (float& v : in.logits) v = static_cast<float>(rng.below(4));
  for (int64_t row = 0; row < p.B * p.N; ++row)
    if (rng.below(10) == 0)
      in.logits[static_cast<size_t>(row * p.K + static_cast<int64_t>(rng.below(p.K)))] =
          std::numeric_limits<float>::quiet_NaN();
  in.labels.resize(static_cast<size_t>(p.N));
  for (int32_t& l : in.labels)
    l = p.ignore_index && rng.below(4) == 0 ? *p.ignore_index
                                            : static_cast<int32_t>(rng.below(p.K));
  return in;
}

std::vector<int64_t> cpu_counts(const CountCase& c, Inputs& in) {
  std::vector<int64_t> counts(static_cast<size_t>(c.p.B), -1);
  count_correct(c.p, {.logits = TensorView(in.logits.data(), c.p.logits_shape()),
                      .labels = IndexView(in.labels.data(), c.p.labels_shape()),
                      .correct = counts});
  return counts;
}

class CountCorrectOnDevice : public ::testing::TestWithParam<CountCase> {};

TEST_P(CountCorrectOnDevice, HostMirrorEqualsTheCpuOp) {
  const CountCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_count_correct_" + c.name()));
  Inputs in = inputs(c);
  const std::vector<int64_t> want = cpu_counts(c, in);
  const ce_math::CeShape s{.B = c.p.B,
                           .N = c.p.N,
                           .K = c.p.K,
                           .M = 0,
                           .has_ignore_index = c.p.ignore_index.has_value(),
                           .ignore_index = c.p.ignore_index.value_or(0)};
  constexpr int kThreads = cuda::kernels::kThreads;
  for (int64_t b = 0; b < c.p.B; ++b) {
    int64_t got = 0;
    for (int t = 0; t < kThreads; ++t)
      got += ce_math::correct_rows_partial(s, in.logits.data(), in.labels.data(), b, t, kThreads);
    EXPECT_EQ(got, want[static_cast<size_t>(b)]) << "model " << b;
  }
}

TEST_P(CountCorrectOnDevice, DeviceEqualsTheCpuOp) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const CountCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_count_correct_" + c.name()));
  Inputs in = inputs(c);
  const std::vector<int64_t> want = cpu_counts(c, in);
  const int64_t logit_bytes =
      cuda::DeviceArena::align_up(static_cast<int64_t>(in.logits.size() * sizeof(float)));
  cuda::DeviceArena arena(logit_bytes + cuda::DeviceArena::align_up(c.p.N * 4), "count test");
  const TensorView logits = arena.carve(c.p.logits_shape());
  cuda::copy_to_device(TensorView(in.logits.data(), c.p.logits_shape()), logits);
  // The labels as floats' bytes: the arena carves float views.
  const TensorView label_floats = arena.carve(Shape{c.p.N});
  // On the thread's stream, as the kernels (a cudaMemcpy runs on the legacy stream).
  cuda::device_copy(label_floats.data, in.labels.data(), in.labels.size() * sizeof(int32_t));
  const IndexView labels(reinterpret_cast<int32_t*>(label_floats.data), c.p.labels_shape(),
                         Device::kCuda);
  std::vector<int64_t> got(static_cast<size_t>(c.p.B), -1);
  count_correct(c.p, {.logits = logits, .labels = labels, .correct = got});
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(Cases, CountCorrectOnDevice, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(CountCorrectDevices, LabelsOnAnotherDeviceRaise) {
  const CrossEntropyParams p{.B = 1, .N = 2, .K = 2};
  std::vector<float> logits(4);
  std::vector<int32_t> labels(2);
  std::vector<int64_t> counts(1);
  test::expect_error_containing_all(
      [&] {
        count_correct(p, {.logits = TensorView(logits.data(), p.logits_shape()),
                          .labels = IndexView(labels.data(), p.labels_shape(), Device::kCuda),
                          .correct = counts});
      },
      {"count_correct labels is on the CUDA device", "runs on the CPU"});
}

}  // namespace
}  // namespace hfta
