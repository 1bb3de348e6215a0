// The CUDA T-Net regularizer (fused_ops/cuda/transform_regularizer.cpp, kernels in
// transform_regularizer_kernels.cu) against the CPU op (fused_ops/cpu/transform_regularizer.cpp,
// through the dispatching transform_regularizer_forward / _backward): [B, N, k, k] with B in
// {1, 2, 3, 8}, k in {1, 3, 16, 17, 64} (the input and feature T-Nets' 3 and 64, and the
// launch's 256 threads as a 16 x 16 matrix and beside it), N in {1, 5}; PointNet's scale 0.001
// and 1; accumulate_dx on and off (da starts as NaN without it); the identity (M = 0: no
// gradient) in model 0's first matrix, a NaN in the last model's last matrix (its loss and
// gradient only). Both run transform_regularizer_math.h's arithmetic, so the comparisons are bit
// for bit; the op harness (tests/fused_ops/test_transform_regularizer.cpp) checks both against
// the reference.
//
// Without a GPU: TransformRegularizerHostMirror runs the math as the kernels split it (M one
// element at a time into NaN-filled scratch, a norm per matrix, a loss per model, the gradient
// per element) and checks the last model alone gives its bits in the array. With a GPU:
// CudaTransformRegularizer runs the op on device memory.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/runtime.h"
#include "core/arena.h"
#include "core/device_memory.h"
#include "fused_ops/cuda/transform_regularizer_math.h"
#include "fused_ops/transform_regularizer.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
namespace math = transform_regularizer_math;

const float kNan = std::numeric_limits<float>::quiet_NaN();

struct RegCase {
  TransformRegularizerParams p;
  bool accumulate, nan;
  std::string name() const {
    return fmt::format("B{}_N{}_k{}_s{}{}{}", p.B, p.N, p.k, p.scale == 1.0f ? "1" : "0001",
                       accumulate ? "_acc" : "", nan ? "_nan" : "");
  }
};

void PrintTo(const RegCase& c, std::ostream* os) { *os << c.name(); }

std::vector<RegCase> cases() {
  std::vector<RegCase> out;
  int i = 0;
  for (int64_t B : test::model_counts())
    for (int64_t k : {1, 3, 16, 17, 64})
      for (int64_t N : {1, 5}) {
        out.push_back({{.B = B, .N = N, .k = k, .scale = i % 3 == 0 ? 1.0f : 0.001f},
                       i % 2 == 1,
                       i % 4 == 2});
        ++i;
      }
  return out;
}

struct Tensors {
  Buffer a, dloss, da_start;
};

Tensors inputs(const RegCase& c) {
  RngStream rng(test::case_seed("cuda_transform_regularizer_" + c.name()), 0);
  const TransformRegularizerParams& p = c.p;
  Tensors t{test::random_buffer(p.a_shape(), rng),
            test::random_buffer(p.loss_shape(), rng, 0.5f, 2.0f),
            c.accumulate ? test::random_buffer(p.a_shape(), rng) : Buffer(p.a_shape(), kNan)};
  if (p.N > 1) {  // model 0's first matrix: the identity
    for (int64_t e = 0; e < p.k * p.k; ++e) t.a.values[e] = e % (p.k + 1) == 0 ? 1.0f : 0.0f;
  }
  if (c.nan) t.a.values.back() = kNan;
  return t;
}

struct Outputs {
  std::vector<float> loss, da;
};

// The op through its dispatcher, on host copies of `t` or on device copies.
Outputs run_op(const RegCase& c, Tensors t, Device device) {
  Buffer loss(c.p.loss_shape(), kNan);
  std::vector<Buffer*> all = {&t.a, &loss, &t.dloss, &t.da_start};
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
  transform_regularizer_forward(c.p, {.a = v[0], .loss = v[1]});
  transform_regularizer_backward(
      c.p, {.a = v[0], .dloss = v[2], .da = v[3], .accumulate_dx = c.accumulate});
  if (device != Device::kCpu)
    for (size_t k = 0; k < all.size(); ++k) copy_view(v[k], all[k]->view());
  return {loss.values, t.da_start.values};
}

// The kernels' split of the work, on the host: M into NaN-filled scratch one element at a time,
// then the norms, the losses and the gradient.
Outputs mirror(const TransformRegularizerParams& p, const float* a, const float* dloss,
               std::vector<float> da, bool accumulate) {
  const int64_t kk = p.k * p.k, matrices = p.B * p.N;
  std::vector<double> m(static_cast<size_t>(matrices * kk), std::nan("")),
      norms(static_cast<size_t>(matrices), std::nan(""));
  for (int64_t e = 0; e < matrices * kk; ++e) math::deviation_at(a, m.data(), p.k, e);
  for (int64_t bs = 0; bs < matrices; ++bs) math::norm_at(m.data(), norms.data(), kk, bs);
  std::vector<float> loss(static_cast<size_t>(p.B), kNan);
  for (int64_t b = 0; b < p.B; ++b) math::loss_at(norms.data(), loss.data(), p.N, p.scale, b);
  for (int64_t e = 0; e < matrices * kk; ++e)
    math::gradient_at(m.data(), norms.data(), a, dloss, da.data(), p.N, p.k, p.scale, accumulate,
                      e);
  return {loss, da};
}

class TransformRegularizerHostMirror : public ::testing::TestWithParam<RegCase> {};

TEST_P(TransformRegularizerHostMirror, KernelArithmeticMatchesCpuOp) {
  const RegCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_transform_regularizer_" + c.name()));
  const Tensors t = inputs(c);
  const Outputs cpu = run_op(c, t, Device::kCpu);
  const Outputs got =
      mirror(c.p, t.a.values.data(), t.dloss.values.data(), t.da_start.values, c.accumulate);
  test::expect_same_bits(got.loss, cpu.loss, "loss");
  test::expect_same_bits(got.da, cpu.da, "da");
  for (int64_t b = 0; b + 1 < c.p.B; ++b) EXPECT_FALSE(std::isnan(got.loss[b])) << "model " << b;
  if (c.p.N > 1) {
    for (int64_t e = 0; e < c.p.k * c.p.k; ++e)
      ASSERT_EQ(got.da[e], c.accumulate ? t.da_start.values[e] : 0.0f) << "the identity, " << e;
  }
  // The last model alone: the same bits as in the array.
  TransformRegularizerParams one = c.p;
  one.B = 1;
  const int64_t per = c.p.N * c.p.k * c.p.k;
  const int64_t last = c.p.B - 1;
  const Outputs alone = mirror(
      one, t.a.values.data() + last * per, t.dloss.values.data() + last,
      std::vector<float>(t.da_start.values.end() - per, t.da_start.values.end()), c.accumulate);
  test::expect_same_bits(alone.loss, {got.loss.back()}, "last model's loss alone");
  test::expect_same_bits(alone.da, std::vector<float>(got.da.end() - per, got.da.end()),
                         "last model's da alone");
}

class CudaTransformRegularizer : public ::testing::TestWithParam<RegCase> {};

TEST_P(CudaTransformRegularizer, MatchesCpuOp) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const RegCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_transform_regularizer_" + c.name()));
  const Tensors t = inputs(c);
  const Outputs cpu = run_op(c, t, Device::kCpu), gpu = run_op(c, t, Device::kCuda);
  test::expect_same_bits(gpu.loss, cpu.loss, "loss");
  test::expect_same_bits(gpu.da, cpu.da, "da");
}

std::string case_name(const ::testing::TestParamInfo<RegCase>& info) { return info.param.name(); }

INSTANTIATE_TEST_SUITE_P(Cases, TransformRegularizerHostMirror, ::testing::ValuesIn(cases()),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Cases, CudaTransformRegularizer, ::testing::ValuesIn(cases()), case_name);

TEST(TransformRegularizerDevices, MixedDevicesRaise) {
  const TransformRegularizerParams p{.B = 2, .N = 1, .k = 3};
  Buffer a(p.a_shape()), loss(p.loss_shape()), da(p.a_shape());
  TensorView on_device = loss.view();
  on_device.device = Device::kCuda;
  test::expect_error_containing(
      [&] { transform_regularizer_forward(p, {.a = a.view(), .loss = on_device}); },
      "transform_regularizer loss is on the CUDA device");
  test::expect_error_containing(
      [&] {
        transform_regularizer_backward(p, {.a = a.view(), .dloss = on_device, .da = da.view()});
      },
      "transform_regularizer loss gradient is on the CUDA device");
}

}  // namespace
}  // namespace hfta
