// The CUDA concatenation (fused_ops/cuda/concat.cpp, kernels in concat_kernels.cu) against the
// CPU op (fused_ops/cpu/concat.cpp, through the dispatching concat_forward / concat_backward):
// the rows layout (PointNet segmentation's [1024 + 64] per point) and the channels layout, 1 to 8
// inputs, B in {1, 2, 3, 8}; each dx written (starting as NaN), accumulated or not wanted by its
// own flag; a NaN, an inf and a -0 in dy. Copies and at most one add per element, so every
// comparison is bit for bit.
//
// Without a GPU: ConcatHostMirror runs concat_math.h over every element of every input, as the
// kernels do, on NaN-filled outputs (an element no input writes stays NaN and fails). With a GPU:
// CudaConcat runs the op on device memory.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/runtime.h"
#include "core/arena.h"
#include "core/device_memory.h"
#include "fused_ops/concat.h"
#include "fused_ops/cuda/concat_math.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;

const float kNan = std::numeric_limits<float>::quiet_NaN();

struct ConcatCase {
  ConcatParams p;
  std::string name() const {
    return fmt::format("{}_B{}_R{}_N{}_S{}_C{}", p.layout == ConcatLayout::kRows ? "rows" : "ch",
                       p.B, p.R, p.N, p.S, fmt::join(p.C.begin(), p.C.begin() + p.inputs, "_"));
  }
  // Input i's gradient: wanted unless i % 3 == 2; accumulated for odd i.
  bool wanted(int i) const { return i % 3 != 2; }
  bool accumulate(int i) const { return i % 2 == 1; }
};

void PrintTo(const ConcatCase& c, std::ostream* os) { *os << c.name(); }

std::vector<ConcatCase> cases() {
  using enum ConcatLayout;
  const struct {
    ConcatLayout layout;
    int64_t R_or_N, S;
    std::vector<int64_t> C;
  } shapes[] = {{kRows, 1, 1, {3}},
                {kRows, 64, 1, {1024, 64}},
                {kRows, 7, 1, {15, 17, 1}},
                {kRows, 3, 1, {1, 2, 3, 4, 5, 6, 7, 8}},
                {kChannels, 2, 7, {3, 5}},
                {kChannels, 3, 40, {2, 130, 1}},
                {kChannels, 2, 3, {1, 2, 3, 4, 5, 6, 7, 8}}};
  std::vector<ConcatCase> out;
  for (const auto& s : shapes)
    for (int64_t B : test::model_counts()) {
      ConcatCase c{{.layout = s.layout,
                    .B = B,
                    .R = s.layout == kRows ? s.R_or_N : 1,
                    .N = s.layout == kChannels ? s.R_or_N : 1,
                    .S = s.S,
                    .inputs = static_cast<int>(s.C.size())}};
      std::copy(s.C.begin(), s.C.end(), c.p.C.begin());
      out.push_back(c);
    }
  return out;
}

struct Tensors {
  std::vector<Buffer> x, dx_start;
  Buffer dy;
};

Tensors inputs(const ConcatCase& c) {
  RngStream rng(test::case_seed("cuda_concat_" + c.name()), 0);
  Tensors t;
  for (int i = 0; i < c.p.inputs; ++i) {
    t.x.push_back(test::random_buffer(c.p.input_shape(i), rng));
    t.dx_start.push_back(c.accumulate(i) ? test::random_buffer(c.p.input_shape(i), rng)
                                         : Buffer(c.p.input_shape(i), kNan));
  }
  t.dy = test::random_buffer(c.p.y_shape(), rng);
  const int64_t n = t.dy.numel();
  t.dy.values[0] = -0.0f;
  if (n > 2)
    t.dy.values[n - 1] = kNan, t.dy.values[n / 2] = -std::numeric_limits<float>::infinity();
  return t;
}

struct Outputs {
  std::vector<float> y;
  std::vector<std::vector<float>> dx;
};

// The op through its dispatcher, on host copies of `t` or on device copies.
Outputs run_op(const ConcatCase& c, Tensors t, Device device) {
  Buffer y(c.p.y_shape(), kNan);
  std::vector<Buffer*> all = {&y, &t.dy};
  for (int i = 0; i < c.p.inputs; ++i) all.push_back(&t.x[i]), all.push_back(&t.dx_start[i]);
  std::vector<TensorView> v;
  std::vector<Arena> arenas;
  arenas.reserve(all.size());
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
  ConcatForwardArgs f{.y = v[0]};
  ConcatBackwardArgs g{.dy = v[1]};
  for (int i = 0; i < c.p.inputs; ++i) {
    f.x[i] = v[2 + 2 * i];
    if (c.wanted(i)) g.dx[i] = v[3 + 2 * i];
    g.accumulate_dx[i] = c.accumulate(i);
  }
  concat_forward(c.p, f);
  concat_backward(c.p, g);
  if (device != Device::kCpu)
    for (size_t k = 0; k < all.size(); ++k) copy_view(v[k], all[k]->view());
  Outputs o{y.values, {}};
  for (int i = 0; i < c.p.inputs; ++i) o.dx.push_back(t.dx_start[i].values);
  return o;
}

// The Slice of each input, as fused_ops/cuda/concat.cpp forms them.
std::vector<concat_math::Slice> slices(const ConcatParams& p, int64_t& blocks) {
  const bool rows = p.layout == ConcatLayout::kRows;
  const int64_t unit = rows ? 1 : p.S;
  blocks = rows ? p.B * p.R : p.N * p.B;
  std::vector<concat_math::Slice> out;
  int64_t offset = 0;
  for (int i = 0; i < p.inputs; ++i) {
    out.push_back({.run = p.C[i] * unit, .y_run = p.total_C() * unit, .offset = offset});
    offset += p.C[i] * unit;
  }
  return out;
}

class ConcatHostMirror : public ::testing::TestWithParam<ConcatCase> {};

TEST_P(ConcatHostMirror, KernelArithmeticMatchesCpuOp) {
  const ConcatCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_concat_" + c.name()));
  const Tensors t = inputs(c);
  const Outputs cpu = run_op(c, t, Device::kCpu);
  int64_t blocks = 0;
  const std::vector<concat_math::Slice> s = slices(c.p, blocks);
  std::vector<float> y(static_cast<size_t>(c.p.y_shape().numel()), kNan);
  for (int i = 0; i < c.p.inputs; ++i) {
    for (int64_t e = 0; e < blocks * s[i].run; ++e)
      concat_math::forward_at(t.x[i].values.data(), y.data(), s[i], e);
    std::vector<float> dx = t.dx_start[i].values;
    if (c.wanted(i))
      for (int64_t e = 0; e < blocks * s[i].run; ++e)
        concat_math::backward_at(t.dy.values.data(), dx.data(), s[i], c.accumulate(i), e);
    test::expect_same_bits(dx, cpu.dx[i], fmt::format("dx{}", i));
  }
  test::expect_same_bits(y, cpu.y, "y");
}

class CudaConcat : public ::testing::TestWithParam<ConcatCase> {};

TEST_P(CudaConcat, MatchesCpuOp) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const ConcatCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_concat_" + c.name()));
  const Tensors t = inputs(c);
  const Outputs cpu = run_op(c, t, Device::kCpu), gpu = run_op(c, t, Device::kCuda);
  test::expect_same_bits(gpu.y, cpu.y, "y");
  for (int i = 0; i < c.p.inputs; ++i)
    test::expect_same_bits(gpu.dx[i], cpu.dx[i], fmt::format("dx{}", i));
}

std::string case_name(const ::testing::TestParamInfo<ConcatCase>& info) {
  return info.param.name();
}

INSTANTIATE_TEST_SUITE_P(Cases, ConcatHostMirror, ::testing::ValuesIn(cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Cases, CudaConcat, ::testing::ValuesIn(cases()), case_name);

TEST(ConcatDevices, MixedDevicesRaise) {
  ConcatParams p{.B = 2, .R = 3, .inputs = 2};
  p.C = {2, 3};
  Buffer a(p.input_shape(0)), b(p.input_shape(1)), y(p.y_shape());
  TensorView b_on_device = b.view();
  b_on_device.device = Device::kCuda;
  test::expect_error_containing(
      [&] {
        concat_forward(p, {.x = {a.view(), b_on_device}, .y = y.view()});
      },
      "concat input 1 is on the CUDA device");
  test::expect_error_containing(
      [&] {
        concat_backward(p, {.dy = y.view(), .dx = {a.view(), b_on_device}});
      },
      "concat input gradient 1 is on the CUDA device");
}

}  // namespace
}  // namespace hfta
