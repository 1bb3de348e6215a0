// The CUDA token gather (fused_ops/cuda/gather_tokens.cpp, kernels in gather_tokens_kernels.cu)
// against the CPU op (fused_ops/cpu/gather_tokens.cpp, through the dispatching
// gather_tokens_forward / gather_tokens_backward): [B, R, D] with B in {1, 2, 3, 8}, R and K from
// 1 to 64 rows (a masked LM's window and its predicted rows), D from 1 to 257; rows drawn in
// [-2, R): zero rows, rows gathered several times (their gradients added in row order), rows
// never gathered; accumulate_dx on and off (dx starts as NaN without it); a NaN, an inf and a -0
// in dy. Copies and the CPU's float adds in its order, so every comparison is bit for bit.
//
// Without a GPU: GatherTokensHostMirror runs gather_tokens_math.h over every index as the kernels
// do (the row groups built as the op builds them), on NaN-filled outputs; a row outside the
// window raises. With a GPU: CudaGatherTokens runs the op on device memory, and a bad row index
// in device memory raises hfta::Error.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/runtime.h"
#include "core/arena.h"
#include "core/device_memory.h"
#include "fused_ops/cuda/gather_tokens_math.h"
#include "fused_ops/gather_tokens.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;

const float kNan = std::numeric_limits<float>::quiet_NaN();

struct GatherCase {
  GatherTokensParams p;
  bool accumulate;
  std::string name() const {
    return fmt::format("B{}_R{}_K{}_D{}{}", p.B, p.R, p.K, p.D, accumulate ? "_acc" : "");
  }
};

void PrintTo(const GatherCase& c, std::ostream* os) { *os << c.name(); }

std::vector<GatherCase> cases() {
  const struct {
    int64_t R, K, D;
  } shapes[] = {{1, 1, 1}, {1, 4, 3}, {5, 2, 16}, {64, 10, 17}, {8, 24, 257}, {40, 6, 64}};
  std::vector<GatherCase> out;
  int k = 0;
  for (const auto& s : shapes)
    for (int64_t B : test::model_counts())
      out.push_back({{.B = B, .R = s.R, .K = s.K, .D = s.D}, k++ % 2 == 1});
  return out;
}

struct Tensors {
  Buffer x, dy, dx_start;
  std::vector<int32_t> rows;
};

Tensors inputs(const GatherCase& c) {
  RngStream rng(test::case_seed("cuda_gather_tokens_" + c.name()), 0);
  const GatherTokensParams& p = c.p;
  Tensors t{test::random_buffer(p.x_shape(), rng),
            test::random_buffer(p.y_shape(), rng),
            c.accumulate ? test::random_buffer(p.x_shape(), rng) : Buffer(p.x_shape(), kNan),
            {}};
  for (int64_t r = 0; r < p.K; ++r)
    t.rows.push_back(static_cast<int32_t>(static_cast<int64_t>(rng.below(p.R + 2)) - 2));
  const int64_t n = t.dy.numel();
  t.dy.values[0] = -0.0f;
  if (n > 2) t.dy.values[n - 1] = kNan, t.dy.values[n / 2] = std::numeric_limits<float>::infinity();
  return t;
}

struct Outputs {
  std::vector<float> y, dx;
};

// The op through its dispatcher, on host copies of `t` or on device copies.
Outputs run_op(const GatherCase& c, Tensors t, Device device) {
  Buffer y(c.p.y_shape(), kNan);
  std::vector<Buffer*> all = {&t.x, &y, &t.dy, &t.dx_start};
  std::vector<TensorView> v;
  std::vector<Arena> arenas;
  arenas.reserve(all.size() + 1);
  IndexView rows(t.rows.data(), c.p.rows_shape());
  for (Buffer* b : all) {
    if (device == Device::kCpu) {
      v.push_back(b->view());
      continue;
    }
    Arena& a =
        arenas.emplace_back(Arena::align_up(static_cast<size_t>(b->numel()) * 4), "test", device);
    v.push_back(a.carve<float>(b->shape));
    copy_view(b->view(), v.back());
  }
  if (device != Device::kCpu) {
    Arena& a = arenas.emplace_back(Arena::align_up(t.rows.size() * 4), "test", device);
    const IndexView on_device = a.carve<int32_t>(c.p.rows_shape());
    copy_view(rows, on_device);
    rows = on_device;
  }
  gather_tokens_forward(c.p, {.x = v[0], .rows = rows, .y = v[1]});
  gather_tokens_backward(c.p,
                         {.rows = rows, .dy = v[2], .dx = v[3], .accumulate_dx = c.accumulate});
  if (device != Device::kCpu)
    for (size_t k = 0; k < all.size(); ++k) copy_view(v[k], all[k]->view());
  return {y.values, t.dx_start.values};
}

// The kernels' work on the host: the groups as the op builds them, then every output element and
// every input gradient element.
Outputs mirror(const GatherTokensParams& p, const float* x, const std::vector<int32_t>& rows,
               const float* dy, std::vector<float> dx, bool accumulate) {
  std::vector<float> y(static_cast<size_t>(p.y_shape().numel()), kNan);
  for (int64_t e = 0; e < p.y_shape().numel(); ++e)
    gather_tokens_math::forward_at(x, rows.data(), y.data(), p.R, p.K, p.D, e);
  const std::vector<int32_t> groups = gather_tokens_math::group_rows(rows.data(), p.K, p.R);
  for (int64_t e = 0; e < p.x_shape().numel(); ++e)
    gather_tokens_math::backward_at(groups.data(), dy, dx.data(), p.R, p.K, p.D, accumulate, e);
  return {y, dx};
}

class GatherTokensHostMirror : public ::testing::TestWithParam<GatherCase> {};

TEST_P(GatherTokensHostMirror, KernelArithmeticMatchesCpuOp) {
  const GatherCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_gather_tokens_" + c.name()));
  const Tensors t = inputs(c);
  const Outputs cpu = run_op(c, t, Device::kCpu);
  const Outputs got =
      mirror(c.p, t.x.values.data(), t.rows, t.dy.values.data(), t.dx_start.values, c.accumulate);
  test::expect_same_bits(got.y, cpu.y, "y");
  test::expect_same_bits(got.dx, cpu.dx, "dx");
  // The groups hold every non-negative row once, in increasing order within each input row.
  const std::vector<int32_t> groups = gather_tokens_math::group_rows(t.rows.data(), c.p.K, c.p.R);
  int64_t named = 0;
  for (int32_t r : t.rows) named += r >= 0;
  ASSERT_EQ(static_cast<int64_t>(groups.size()), c.p.R + 1 + named);
  for (int64_t i = 0; i < c.p.R; ++i)
    for (int32_t g = groups[i]; g < groups[i + 1]; ++g) {
      const int32_t r = groups[c.p.R + 1 + g];
      EXPECT_EQ(t.rows[r], i) << "group " << i;
      if (g > groups[i]) {
        EXPECT_LT(groups[c.p.R + g], r) << "group " << i << " out of order";
      }
    }
}

class CudaGatherTokens : public ::testing::TestWithParam<GatherCase> {};

TEST_P(CudaGatherTokens, MatchesCpuOp) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const GatherCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_gather_tokens_" + c.name()));
  const Tensors t = inputs(c);
  const Outputs cpu = run_op(c, t, Device::kCpu), gpu = run_op(c, t, Device::kCuda);
  test::expect_same_bits(gpu.y, cpu.y, "y");
  test::expect_same_bits(gpu.dx, cpu.dx, "dx");
}

std::string case_name(const ::testing::TestParamInfo<GatherCase>& info) {
  return info.param.name();
}

INSTANTIATE_TEST_SUITE_P(Cases, GatherTokensHostMirror, ::testing::ValuesIn(cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Cases, CudaGatherTokens, ::testing::ValuesIn(cases()), case_name);

// A row index outside the window, in device memory, raises hfta::Error forward and backward.
TEST(CudaGatherTokensErrors, BadDeviceRowRaises) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  GatherCase c{{.B = 2, .R = 4, .K = 3, .D = 5}, false};
  Tensors t = inputs(c);
  t.rows = {0, 4, -1};
  test::expect_error_containing([&] { run_op(c, t, Device::kCuda); },
                                "gathered token row 4 is outside the window's 4 rows");
}

TEST(GatherTokensDevices, MixedDevicesRaise) {
  const GatherTokensParams p{.B = 2, .R = 3, .K = 2, .D = 2};
  Buffer x(p.x_shape()), y(p.y_shape());
  std::vector<int32_t> rows = {0, 1};
  IndexView on_device(rows.data(), p.rows_shape());
  on_device.device = Device::kCuda;
  test::expect_error_containing(
      [&] { gather_tokens_forward(p, {.x = x.view(), .rows = on_device, .y = y.view()}); },
      "gather_tokens row indices is on the CUDA device");
  test::expect_error_containing(
      [&] { gather_tokens_backward(p, {.rows = on_device, .dy = y.view(), .dx = x.view()}); },
      "gather_tokens row indices is on the CUDA device");
}

}  // namespace
}  // namespace hfta
