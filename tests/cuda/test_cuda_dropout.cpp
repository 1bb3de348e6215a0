// The CUDA dropout (fused_ops/cuda/dropout.cpp, kernels in dropout_kernels.cu) against the CPU op
// (fused_ops/cpu/dropout.cpp, through the dispatching dropout_forward / dropout_backward): both
// layouts ([B, ...] and the conv layout [N, B*C, HW]) with B in {1, 2, 3, 8}, element counts on
// both sides of the launch's 256-thread blocks and of the CPU's 1024-draw blocks, p in {0.2, 0.5}
// (1/(1-p) = 1.25 rounds its products), y in its own buffer or in x's, accumulate_dx on and off
// (dx starts as NaN without it), and eval mode (the identity). The mask is the CPU op's draws and
// every output one rounded product, so every comparison is bit for bit, the streams' positions
// after the forward included.
//
// Without a GPU: DropoutHostMirror* draws the mask with cpu::dropout_draw_mask and runs
// dropout_math.h's functions over every index as the kernels do, on NaN-filled outputs. With a
// GPU: CudaDropout* runs the op on device memory.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "core/rng.h"
#include "fused_ops/cuda/dropout_math.h"
#include "fused_ops/dropout.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;

const float kNan = std::numeric_limits<float>::quiet_NaN();

struct DropoutCase {
  DropoutParams p;
  bool alias_y, accumulate;
  Shape shape() const {
    if (p.layout == DropoutLayout::kModelMajor) return {p.B, p.per_model_numel};
    return {p.N, p.B * p.C, p.HW};
  }
  std::string name() const {
    const std::string layout = p.layout == DropoutLayout::kModelMajor
                                   ? fmt::format("n{}", p.per_model_numel)
                                   : fmt::format("N{}_C{}_HW{}", p.N, p.C, p.HW);
    return fmt::format("B{}_{}_p{}{}{}{}", p.B, layout, static_cast<int>(p.p * 10),
                       p.training ? "" : "_eval", alias_y ? "_inplace" : "",
                       accumulate ? "_acc" : "");
  }
};

void PrintTo(const DropoutCase& c, std::ostream* os) { *os << c.name(); }

std::vector<DropoutCase> dropout_cases() {
  std::vector<DropoutCase> cases;
  int k = 0;
  for (int64_t B : test::model_counts())
    for (float p : {0.2f, 0.5f}) {
      const bool alias = k % 2 == 1, acc = k % 3 == 0;
      ++k;
      for (int64_t n : {1, 255, 257, 1025, 4099})
        cases.push_back({DropoutParams::model_major(B, n, p, true), alias, acc});
      for (int64_t hw : {1, 7, 64})
        cases.push_back({DropoutParams::conv_channels(B, 3, 5, hw, p, true), !alias, !acc});
      cases.push_back({DropoutParams::model_major(B, 300, p, false), alias, acc});
    }
  return cases;
}

std::vector<RngStream> streams_for(uint64_t seed, int64_t B) {
  std::vector<RngStream> out;
  for (int64_t b = 0; b < B; ++b) out.push_back(RngStream::for_model(seed, b, kRngDropout));
  return out;
}

// Each stream's next draw: where the forward left it.
std::vector<float> next_draws(std::vector<RngStream> streams) {
  std::vector<float> out;
  for (RngStream& s : streams) out.push_back(s.uniform());
  return out;
}

struct DropoutData {
  Buffer x, dy, dx_start;
};

DropoutData dropout_data(const DropoutCase& c, uint64_t seed) {
  RngStream rng(seed, 0);
  const Shape s = c.shape();
  DropoutData d{test::random_buffer(s, rng), test::random_buffer(s, rng),
                c.accumulate ? test::random_buffer(s, rng) : Buffer(s, kNan)};
  const int64_t n = s.numel();
  if (n > 2) d.x.values[n / 2] = kNan, d.dy.values[n - 1] = -0.0f;
  return d;
}

struct DropoutResults {
  std::vector<float> y, mask, dx, next;
};

DropoutResults cpu_dropout(const DropoutCase& c, DropoutData d, uint64_t seed) {
  const Shape s = c.shape();
  Buffer y(s, kNan), mask(s, kNan), dx = d.dx_start;
  std::vector<RngStream> streams = streams_for(seed, c.p.B);
  const TensorView y_view = c.alias_y ? d.x.view() : y.view();
  dropout_forward(
      c.p, {.x = d.x.view(), .streams = streams, .saved = {.mask = mask.view()}, .y = y_view});
  dropout_backward(c.p, {.saved = {.mask = mask.view()},
                         .dy = d.dy.view(),
                         .dx = dx.view(),
                         .accumulate_dx = c.accumulate});
  return {c.alias_y ? d.x.values : y.values, mask.values, dx.values, next_draws(streams)};
}

class DropoutHostMirror : public ::testing::TestWithParam<DropoutCase> {};

TEST_P(DropoutHostMirror, KernelArithmeticMatchesCpuOp) {
  const DropoutCase& c = GetParam();
  const uint64_t seed = test::case_seed("dropout_" + c.name());
  HFTA_CASE_TRACE(seed);
  DropoutData d = dropout_data(c, seed);
  const DropoutResults cpu = cpu_dropout(c, d, seed);
  const int64_t n = c.shape().numel();
  std::vector<float> y(static_cast<size_t>(n), kNan), dx = d.dx_start.values;
  std::vector<RngStream> streams = streams_for(seed, c.p.B);
  float* out = c.alias_y ? d.x.values.data() : y.data();
  if (c.p.active()) {
    std::vector<float> mask(static_cast<size_t>(n), kNan);
    cpu::dropout_draw_mask(c.p, streams, mask.data());
    EXPECT_TRUE(test::same_bits_or_nan(mask, cpu.mask)) << "mask";
    for (int64_t i = 0; i < n; ++i)
      dropout_math::dropout_forward_at(d.x.values.data(), mask.data(), out, i);
    for (int64_t i = 0; i < n; ++i)
      dropout_math::dropout_backward_at(mask.data(), d.dy.values.data(), dx.data(), c.accumulate,
                                        i);
  } else {  // the identity: the op copies (forward) and copies or adds (backward, add's kernel)
    for (int64_t i = 0; i < n; ++i) out[i] = d.x.values[static_cast<size_t>(i)];
    for (int64_t i = 0; i < n; ++i)
      dx[static_cast<size_t>(i)] = c.accumulate ? dx[static_cast<size_t>(i)] + d.dy.values[i]
                                                : d.dy.values[static_cast<size_t>(i)];
  }
  EXPECT_TRUE(test::same_bits_or_nan(c.alias_y ? d.x.values : y, cpu.y)) << "y";
  EXPECT_TRUE(test::same_bits_or_nan(dx, cpu.dx)) << "dx";
  EXPECT_EQ(next_draws(streams), cpu.next) << "the streams' positions after the forward";
}

class CudaDropout : public ::testing::TestWithParam<DropoutCase> {};

TEST_P(CudaDropout, MatchesCpuOp) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const DropoutCase& c = GetParam();
  const uint64_t seed = test::case_seed("dropout_" + c.name());
  HFTA_CASE_TRACE(seed);
  DropoutData d = dropout_data(c, seed);
  const DropoutResults cpu = cpu_dropout(c, d, seed);
  const Shape s = c.shape();
  cuda::DeviceArena arena(5 * cuda::DeviceArena::align_up(static_cast<size_t>(s.numel()) * 4),
                          "dropout test");
  const TensorView x = arena.carve(s), y = arena.carve(s), mask = arena.carve(s),
                   dy = arena.carve(s), dx = arena.carve(s);
  cuda::copy_to_device(d.x.view(), x);
  cuda::copy_to_device(Buffer(s, kNan).view(), y);
  cuda::copy_to_device(Buffer(s, kNan).view(), mask);
  cuda::copy_to_device(d.dy.view(), dy);
  cuda::copy_to_device(d.dx_start.view(), dx);
  std::vector<RngStream> streams = streams_for(seed, c.p.B);
  dropout_forward(c.p,
                  {.x = x, .streams = streams, .saved = {.mask = mask}, .y = c.alias_y ? x : y});
  dropout_backward(c.p,
                   {.saved = {.mask = mask}, .dy = dy, .dx = dx, .accumulate_dx = c.accumulate});
  cuda::synchronize();
  Buffer y_got(s), mask_got(s), dx_got(s);
  cuda::copy_to_host(c.alias_y ? x : y, y_got.view());
  cuda::copy_to_host(dx, dx_got.view());
  EXPECT_TRUE(test::same_bits_or_nan(y_got.values, cpu.y)) << "y";
  EXPECT_TRUE(test::same_bits_or_nan(dx_got.values, cpu.dx)) << "dx";
  if (c.p.active()) {
    cuda::copy_to_host(mask, mask_got.view());
    EXPECT_TRUE(test::same_bits_or_nan(mask_got.values, cpu.mask)) << "mask";
  }
  EXPECT_EQ(next_draws(streams), cpu.next) << "the streams' positions after the forward";
}

// A mask, input or output on the other device is refused by name.
TEST(CudaDropoutDevices, MixedDevicesAreRefused) {
  Buffer x(Shape{2, 4}, 1.0f), host_mask(Shape{2, 4}, kNan);
  const TensorView device_y(x.values.data(), Shape{2, 4}, Device::kCuda);
  std::vector<RngStream> streams = streams_for(1, 2);
  const DropoutParams p = DropoutParams::model_major(2, 4, 0.5f, true);
  test::expect_error_containing(
      [&] {
        dropout_forward(p, {.x = x.view(),
                            .streams = streams,
                            .saved = {.mask = host_mask.view()},
                            .y = device_y});
      },
      "dropout output");
  test::expect_error_containing(
      [&] {
        dropout_backward(p, {.saved = {.mask = host_mask.view()}, .dy = device_y, .dx = device_y});
      },
      "dropout mask");
}

std::string dropout_case_name(const ::testing::TestParamInfo<DropoutCase>& info) {
  return info.param.name();
}

INSTANTIATE_TEST_SUITE_P(Cases, DropoutHostMirror, ::testing::ValuesIn(dropout_cases()),
                         dropout_case_name);
INSTANTIATE_TEST_SUITE_P(Cases, CudaDropout, ::testing::ValuesIn(dropout_cases()),
                         dropout_case_name);

}  // namespace
}  // namespace hfta
