// The CUDA "plus the identity" (fused_ops/cuda/add_identity.cpp, kernel in
// add_identity_kernels.cu) against the CPU op (fused_ops/cpu/add_identity.cpp, through the
// dispatching add_identity_forward / add_identity_backward): [B, N, k, k] with B in {1, 2, 3, 8},
// k = 1 (BatchNorm's counters), 3 (the input T-Net), 15, 16, 17 (a matrix of 256 floats, the
// launch's block, and its neighbours) and 64 (the feature T-Net); y in its own buffer or in
// place; accumulate_dx on and off (dx starts as NaN without it); a -0, a NaN and an inf among the
// inputs. One add per element, so every comparison is bit for bit.
//
// Without a GPU: AddIdentityHostMirror runs add_identity_math.h over every index as the kernel
// does, on NaN-filled outputs. With a GPU: CudaAddIdentity runs the op on device memory.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "fused_ops/add_identity.h"
#include "fused_ops/cuda/add_identity_math.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;

const float kNan = std::numeric_limits<float>::quiet_NaN();

struct IdCase {
  int64_t B, N, k;
  bool in_place, accumulate;
  AddIdentityParams params() const { return {.B = B, .N = N, .k = k}; }
  std::string name() const {
    return fmt::format("B{}_N{}_k{}{}{}", B, N, k, in_place ? "_inplace" : "",
                       accumulate ? "_acc" : "");
  }
};

std::vector<IdCase> id_cases() {
  std::vector<IdCase> cases;
  int i = 0;
  for (int64_t B : test::model_counts())
    for (int64_t k : {1, 3, 15, 16, 17, 64})
      for (int64_t N : {1, 7}) {
        cases.push_back({B, N, k, i % 2 == 1, (i / 2) % 2 == 1});
        ++i;
      }
  return cases;
}

struct IdData {
  Buffer x, dy, dx_start;
};

IdData id_data(const IdCase& c, uint64_t seed) {
  RngStream rng(seed, 0);
  const Shape s = c.params().x_shape();
  IdData d{test::random_buffer(s, rng), test::random_buffer(s, rng),
           c.accumulate ? test::random_buffer(s, rng) : Buffer(s, kNan)};
  const int64_t n = s.numel();
  d.x.values[0] = -0.0f;                                     // on the diagonal: -0 + 1 = 1
  if (n > 1) d.x.values[1] = -0.0f, d.dy.values[1] = -0.0f;  // -0 + 0 = +0 (k > 1)
  if (n > 4) d.x.values[n - 1] = kNan, d.x.values[n / 2] = std::numeric_limits<float>::infinity();
  return d;
}

struct IdResults {
  std::vector<float> y, dx;
};

// The op through its dispatcher on `d`'s buffers (CPU) or on device copies of them.
IdResults run_op(const IdCase& c, IdData d, bool on_device) {
  const AddIdentityParams p = c.params();
  const Shape s = p.x_shape();
  Buffer y(s, kNan), dx = d.dx_start;
  std::vector<Buffer*> all = {&d.x, &y, &d.dy, &dx};
  std::vector<TensorView> v;
  std::optional<cuda::DeviceArena> arena;
  if (on_device) {
    arena.emplace(4 * cuda::DeviceArena::align_up(static_cast<size_t>(s.numel()) * 4),
                  "add_identity test");
    for (Buffer* b : all) {
      v.push_back(arena->carve(s));
      cuda::copy_to_device(b->view(), v.back());
    }
  } else {
    for (Buffer* b : all) v.push_back(b->view());
  }
  const TensorView out = c.in_place ? v[0] : v[1];
  add_identity_forward(p, {.x = v[0], .y = out});
  add_identity_backward(p, {.dy = v[2], .dx = v[3], .accumulate_dx = c.accumulate});
  Buffer y_got(s), dx_got(s);
  if (on_device) {
    cuda::copy_to_host(out, y_got.view());
    cuda::copy_to_host(v[3], dx_got.view());
    return {y_got.values, dx_got.values};
  }
  return {c.in_place ? d.x.values : y.values, dx.values};
}

class AddIdentityHostMirror : public ::testing::TestWithParam<IdCase> {};

TEST_P(AddIdentityHostMirror, KernelArithmeticMatchesCpuOp) {
  const IdCase& c = GetParam();
  const uint64_t seed = test::case_seed("add_identity_" + c.name());
  HFTA_CASE_TRACE(seed);
  IdData d = id_data(c, seed);
  const IdResults cpu = run_op(c, d, /*on_device=*/false);
  std::vector<float> y(d.x.values.size(), kNan), dx = d.dx_start.values;
  float* out = c.in_place ? d.x.values.data() : y.data();
  const int64_t n = c.params().x_shape().numel();
  for (int64_t i = 0; i < n; ++i)
    add_identity_math::add_identity_at(d.x.values.data(), out, c.k, i);
  // The backward is the add's (tests/cuda/test_cuda_add.cpp mirrors its kernel).
  for (int64_t i = 0; i < n; ++i) dx[i] = c.accumulate ? dx[i] + d.dy.values[i] : d.dy.values[i];
  EXPECT_TRUE(test::same_bits_or_nan(c.in_place ? d.x.values : y, cpu.y)) << "y";
  EXPECT_TRUE(test::same_bits_or_nan(dx, cpu.dx)) << "dx";
  // The CPU op and the mirror both equal the specification (and so each other's bits).
  Buffer ref_y(c.params().x_shape(), kNan);
  IdData fresh = id_data(c, seed);
  ref::add_identity_forward(c.params(), {.x = fresh.x.view(), .y = ref_y.view()});
  EXPECT_TRUE(test::same_bits_or_nan(ref_y.values, cpu.y)) << "y against ref::";
}

class CudaAddIdentity : public ::testing::TestWithParam<IdCase> {};

TEST_P(CudaAddIdentity, MatchesCpuOp) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const IdCase& c = GetParam();
  const uint64_t seed = test::case_seed("add_identity_" + c.name());
  HFTA_CASE_TRACE(seed);
  const IdData d = id_data(c, seed);
  const IdResults cpu = run_op(c, d, /*on_device=*/false);
  const IdResults gpu = run_op(c, d, /*on_device=*/true);
  EXPECT_TRUE(test::same_bits_or_nan(gpu.y, cpu.y)) << "y";
  EXPECT_TRUE(test::same_bits_or_nan(gpu.dx, cpu.dx)) << "dx";
}

std::string id_case_name(const ::testing::TestParamInfo<IdCase>& info) { return info.param.name(); }

INSTANTIATE_TEST_SUITE_P(Cases, AddIdentityHostMirror, ::testing::ValuesIn(id_cases()),
                         id_case_name);
INSTANTIATE_TEST_SUITE_P(Cases, CudaAddIdentity, ::testing::ValuesIn(id_cases()), id_case_name);

TEST(AddIdentityDevices, MixedDevicesRaise) {
  const AddIdentityParams p{.B = 2, .N = 1, .k = 3};
  Buffer x(p.x_shape()), y(p.y_shape());
  TensorView on_device = y.view();
  on_device.device = Device::kCuda;
  EXPECT_THROW(add_identity_forward(p, {.x = x.view(), .y = on_device}), Error);
  EXPECT_THROW(add_identity_backward(p, {.dy = x.view(), .dx = on_device}), Error);
}

}  // namespace
}  // namespace hfta
