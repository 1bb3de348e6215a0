// The CUDA bmm (fused_ops/cuda/bmm.cpp: cuBLAS strided-batched GEMMs described by
// fused_ops/cuda/bmm_gemms.h).
//
// Without a GPU, BmmGemms.*: the op's GEMM descriptions, run by a naive column-major GEMM on the
// host (double sums, as the reference), equal the reference (fused_ops/ref/bmm.cpp): forward, dx
// and dt, written over NaN or accumulated, either gradient skipped, as one batched call over the
// B*N problems and as the per-model calls of deterministic mode. This checks the row-major to
// column-major mapping, leading dimensions, strides, betas and batch offsets. B in {1, 2, 3, 8};
// PointNet's K, M of 3 and 64, odd sizes, L from 1 to 257 points.
// With a GPU, CudaBmm.*: the op through the dispatcher on device memory against the reference,
// within a float dot product's rounding (cuBLAS sums in its own order, in float).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "fused_ops/bmm.h"
#include "fused_ops/cuda/bmm_gemms.h"
#include "host_gemm.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;

const float kNan = std::numeric_limits<float>::quiet_NaN();

struct BmmCase {
  BmmParams p;
  bool accumulate_dx, accumulate_dt, want_dx, want_dt;
  std::string name() const {
    return fmt::format("B{}_N{}_L{}_K{}_M{}{}{}{}{}", p.B, p.N, p.L, p.K, p.M,
                       accumulate_dx ? "_accdx" : "", accumulate_dt ? "_accdt" : "",
                       want_dx ? "" : "_nodx", want_dt ? "" : "_nodt");
  }
};

std::vector<BmmCase> bmm_cases() {
  const struct {
    int64_t N, L, K, M;
  } shapes[] = {{1, 1, 1, 1}, {2, 7, 3, 3}, {3, 50, 3, 64}, {2, 33, 64, 3}, {1, 257, 17, 15}};
  std::vector<BmmCase> cases;
  int i = 0;
  for (int64_t B : test::model_counts())
    for (const auto& s : shapes) {
      cases.push_back({BmmParams{.B = B, .N = s.N, .L = s.L, .K = s.K, .M = s.M}, i % 2 == 1,
                       i % 3 == 1, i % 5 != 2, i % 7 != 3});
      ++i;
    }
  return cases;
}

struct BmmRun {
  Buffer x, t, y, dy, dx, dt;
  std::vector<Buffer*> all() { return {&x, &t, &y, &dy, &dx, &dt}; }
};

BmmRun inputs(const BmmCase& c) {
  RngStream rng(test::case_seed("cuda_bmm_" + c.name()), 0);
  const BmmParams& p = c.p;
  BmmRun r;
  r.x = test::random_buffer(p.x_shape(), rng);
  r.t = test::random_buffer(p.t_shape(), rng);
  r.y = Buffer(p.y_shape(), kNan);
  r.dy = test::random_buffer(p.y_shape(), rng);
  r.dx = c.accumulate_dx ? test::random_buffer(p.x_shape(), rng) : Buffer(p.x_shape(), kNan);
  r.dt = c.accumulate_dt ? test::random_buffer(p.t_shape(), rng) : Buffer(p.t_shape(), kNan);
  return r;
}

BmmForwardArgs forward_args(const std::vector<TensorView>& v) {
  return {.x = v[0], .t = v[1], .y = v[2]};
}
BmmBackwardArgs backward_args(const BmmCase& c, const std::vector<TensorView>& v) {
  return {.x = v[0],
          .t = v[1],
          .dy = v[3],
          .dx = c.want_dx ? v[4] : TensorView(),
          .dt = c.want_dt ? v[5] : TensorView(),
          .accumulate_dx = c.accumulate_dx,
          .accumulate_dt = c.accumulate_dt};
}

std::vector<TensorView> host_views(BmmRun& r) {
  std::vector<TensorView> v;
  for (Buffer* b : r.all()) v.push_back(b->view());
  return v;
}

BmmRun reference(const BmmCase& c) {
  BmmRun r = inputs(c);
  const std::vector<TensorView> v = host_views(r);
  ref::bmm_forward(c.p, forward_args(v));
  ref::bmm_backward(c.p, backward_args(c, v));
  return r;
}

// The plans call their GEMM executor with one argument.
void host_gemm(const cuda::ColumnMajorGemm& g) { test::host_column_major_gemm(g); }

// Within unit * (inner + 2) plus 2^-23 relative of the reference, elementwise, where inner is
// the product's length: unit ~ 0 for the host GEMM's double sums (only an accumulated start's
// extra rounding differs), a float dot product's bound on the device. An unwanted gradient must
// be untouched.
void expect_matches(BmmRun& got, BmmRun& want, const BmmCase& c, double unit) {
  const BmmParams& p = c.p;
  const double rel = 1.0 / (1 << 23);
  test::expect_close(got.y.data(), want.y.data(), got.y.numel(), unit * double(p.K + 2), rel, "y");
  const BmmRun start = inputs(c);
  if (c.want_dx)
    test::expect_close(got.dx.data(), want.dx.data(), got.dx.numel(), unit * double(p.M + 2), rel,
                       "dx");
  else
    EXPECT_TRUE(test::same_bits_or_nan(got.dx.values, start.dx.values)) << "unwanted dx touched";
  if (c.want_dt)
    test::expect_close(got.dt.data(), want.dt.data(), got.dt.numel(), unit * double(p.L + 2), rel,
                       "dt");
  else
    EXPECT_TRUE(test::same_bits_or_nan(got.dt.values, start.dt.values)) << "unwanted dt touched";
}

class BmmGemms : public ::testing::TestWithParam<BmmCase> {};

TEST_P(BmmGemms, ColumnMajorGemmsMatchReferenceOnHost) {
  const BmmCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_bmm_" + c.name()));
  BmmRun want = reference(c);
  for (bool per_model : {false, true}) {
    SCOPED_TRACE(per_model ? "per-model calls" : "one batched call");
    BmmRun got = inputs(c);
    const std::vector<TensorView> v = host_views(got);
    int64_t calls = 0;
    auto issue = [&](const cuda::ColumnMajorGemm& g) {
      ++calls;
      host_gemm(g);
    };
    cuda::bmm_forward_gemms(c.p, forward_args(v), per_model, issue);
    EXPECT_EQ(calls, per_model ? c.p.B : 1);
    cuda::bmm_backward_gemms(c.p, backward_args(c, v), per_model, issue);
    // Double sums on both sides: only an accumulated start's extra rounding differs.
    expect_matches(got, want, c, 1e-7);
  }
}

class CudaBmm : public ::testing::TestWithParam<BmmCase> {};

TEST_P(CudaBmm, MatchesReference) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const BmmCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_bmm_" + c.name()));
  BmmRun want = reference(c), got = inputs(c);
  std::vector<Buffer*> all = got.all();
  size_t bytes = 0;
  for (Buffer* b : all) bytes += cuda::DeviceArena::align_up(static_cast<size_t>(b->numel()) * 4);
  cuda::DeviceArena arena(bytes, "bmm test");
  std::vector<TensorView> v;
  for (Buffer* b : all) {
    v.push_back(arena.carve(b->shape));
    cuda::copy_to_device(b->view(), v.back());
  }
  bmm_forward(c.p, forward_args(v));
  bmm_backward(c.p, backward_args(c, v));
  for (size_t i = 0; i < all.size(); ++i) cuda::copy_to_host(v[i], all[i]->view());
  // |x|, |t|, |dy| <= 1: a float dot product of n terms errs by at most n u sum|terms| <= n u n.
  expect_matches(got, want, c, 1.0 / (1 << 24) * double(std::max({c.p.K, c.p.M, c.p.L})));
}

std::string bmm_case_name(const ::testing::TestParamInfo<BmmCase>& info) {
  return info.param.name();
}

INSTANTIATE_TEST_SUITE_P(Cases, BmmGemms, ::testing::ValuesIn(bmm_cases()), bmm_case_name);
INSTANTIATE_TEST_SUITE_P(Cases, CudaBmm, ::testing::ValuesIn(bmm_cases()), bmm_case_name);

TEST(CudaBmmDevices, MixedDevicesRaise) {
  const BmmParams p{.B = 2, .N = 1, .L = 3, .K = 2, .M = 2};
  Buffer x(p.x_shape()), t(p.t_shape()), y(p.y_shape());
  TensorView on_device = y.view();
  on_device.device = Device::kCuda;
  EXPECT_THROW(bmm_forward(p, {.x = x.view(), .t = t.view(), .y = on_device}), Error);
  EXPECT_THROW(bmm_backward(p, {.x = x.view(), .t = t.view(), .dy = on_device}), Error);
}

}  // namespace
}  // namespace hfta
