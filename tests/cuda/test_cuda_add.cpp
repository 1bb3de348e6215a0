// The CUDA add (fused_ops/cuda/add.cpp, kernels in add_kernels.cu) against the CPU op
// (fused_ops/cpu/add.cpp, through the dispatching add_forward / add_backward): [B, ...] tensors
// with B in {1, 2, 3, 8} whose element counts fall on both sides of the launch's 256-thread
// blocks; y in its own buffer or aliasing the first operand; accumulate_dx on and off (dx starts as
// NaN without it); a NaN, an inf and a -0 among the inputs. One add per element, so every
// comparison is bit for bit.
//
// Without a GPU: AddHostMirror* runs add_math.h's functions over every index as the kernels do,
// on NaN-filled outputs. With a GPU: CudaAdd* runs the kernels.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "fused_ops/add.h"
#include "fused_ops/cuda/add_math.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;

const float kNan = std::numeric_limits<float>::quiet_NaN();

struct AddCase {
  int64_t B, per_model;  // shape [B, per_model]
  bool alias_y, accumulate;
  Shape shape() const { return {B, per_model}; }
  std::string name() const {
    return fmt::format("B{}_n{}{}{}", B, per_model, alias_y ? "_inplace" : "",
                       accumulate ? "_acc" : "");
  }
};

std::vector<AddCase> add_cases() {
  std::vector<AddCase> cases;
  for (int64_t B : test::model_counts())
    for (int64_t n : {1, 17, 85, 255, 256, 257, 4099})
      for (bool alias : {false, true})
        for (bool acc : {false, true}) cases.push_back({B, n, alias, acc});
  return cases;
}

struct AddData {
  Buffer a, b, dy, dx_start;
};

AddData add_data(const AddCase& c, uint64_t seed) {
  RngStream rng(seed, 0);
  const Shape s = c.shape();
  AddData d{test::random_buffer(s, rng), test::random_buffer(s, rng), test::random_buffer(s, rng),
            c.accumulate ? test::random_buffer(s, rng) : Buffer(s, kNan)};
  const int64_t n = s.numel();
  d.a.values[0] = -0.0f;
  d.b.values[0] = -0.0f;  // -0 + -0 = -0
  if (n > 2) d.a.values[n / 2] = kNan, d.dy.values[n / 2] = kNan;
  if (n > 3) d.b.values[n - 1] = std::numeric_limits<float>::infinity(), d.dy.values[1] = -0.0f;
  return d;
}

struct AddResults {
  std::vector<float> y, dx;
};

AddResults cpu_add(const AddCase& c, AddData d) {
  Buffer y(c.shape(), kNan), dx = d.dx_start;
  add_forward({.a = d.a.view(), .b = d.b.view(), .y = c.alias_y ? d.a.view() : y.view()});
  add_backward({.dy = d.dy.view(), .dx = dx.view(), .accumulate_dx = c.accumulate});
  return {c.alias_y ? d.a.values : y.values, dx.values};
}

class AddHostMirror : public ::testing::TestWithParam<AddCase> {};

TEST_P(AddHostMirror, KernelArithmeticMatchesCpuOp) {
  const AddCase& c = GetParam();
  const uint64_t seed = test::case_seed("add_" + c.name());
  HFTA_CASE_TRACE(seed);
  AddData d = add_data(c, seed);
  const AddResults cpu = cpu_add(c, d);
  std::vector<float> y(d.a.values.size(), kNan), dx = d.dx_start.values;
  float* out = c.alias_y ? d.a.values.data() : y.data();
  for (int64_t i = 0; i < c.shape().numel(); ++i)
    add_math::add_forward_at(d.a.values.data(), d.b.values.data(), out, i);
  for (int64_t i = 0; i < c.shape().numel(); ++i)
    add_math::add_backward_at(d.dy.values.data(), dx.data(), c.accumulate, i);
  EXPECT_TRUE(test::same_bits_or_nan(c.alias_y ? d.a.values : y, cpu.y)) << "y";
  EXPECT_TRUE(test::same_bits_or_nan(dx, cpu.dx)) << "dx";
}

class CudaAdd : public ::testing::TestWithParam<AddCase> {};

TEST_P(CudaAdd, MatchesCpuOp) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const AddCase& c = GetParam();
  const uint64_t seed = test::case_seed("add_" + c.name());
  HFTA_CASE_TRACE(seed);
  AddData d = add_data(c, seed);
  const AddResults cpu = cpu_add(c, d);
  const Shape s = c.shape();
  cuda::DeviceArena arena(5 * cuda::DeviceArena::align_up(static_cast<size_t>(s.numel()) * 4),
                          "add test");
  const TensorView a = arena.carve(s), b = arena.carve(s), y = arena.carve(s), dy = arena.carve(s),
                   dx = arena.carve(s);
  cuda::copy_to_device(d.a.view(), a);
  cuda::copy_to_device(d.b.view(), b);
  cuda::copy_to_device(Buffer(s, kNan).view(), y);
  cuda::copy_to_device(d.dy.view(), dy);
  cuda::copy_to_device(d.dx_start.view(), dx);
  add_forward({.a = a, .b = b, .y = c.alias_y ? a : y});
  add_backward({.dy = dy, .dx = dx, .accumulate_dx = c.accumulate});
  Buffer y_got(s), dx_got(s);
  cuda::copy_to_host(c.alias_y ? a : y, y_got.view());
  cuda::copy_to_host(dx, dx_got.view());
  EXPECT_TRUE(test::same_bits_or_nan(y_got.values, cpu.y)) << "y";
  EXPECT_TRUE(test::same_bits_or_nan(dx_got.values, cpu.dx)) << "dx";
}

std::string add_case_name(const ::testing::TestParamInfo<AddCase>& info) {
  return info.param.name();
}

INSTANTIATE_TEST_SUITE_P(Cases, AddHostMirror, ::testing::ValuesIn(add_cases()), add_case_name);
INSTANTIATE_TEST_SUITE_P(Cases, CudaAdd, ::testing::ValuesIn(add_cases()), add_case_name);

}  // namespace
}  // namespace hfta
