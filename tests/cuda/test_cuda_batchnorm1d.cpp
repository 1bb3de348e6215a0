// The CUDA BatchNorm1d on the rows layout (fused_ops/cuda/batchnorm1d.cpp).
//
// HostMirror (runs without a GPU): batchnorm1d_math.h's and batchnorm2d_math.h's functions driven
// as the kernels drive them (one block of bn::kThreads threads per channel: each thread's partial
// sums over its rows, then the tree) on NaN-filled outputs, against the CPU op and the reference:
// statistics, running statistics, y, dx, dgamma and dbeta agree to rounding (all three sum in
// double, in different orders; the float roundings after the sums differ). Each model of a fused
// mirror also equals the B = 1 mirror run on its slice bit for bit (no sum crosses models). The
// device test (skipped without a GPU) runs the op through the dispatching batchnorm1d_forward /
// batchnorm1d_backward on device tensors and requires the mirror's bits: the shared functions use
// explicit fma()/fmaf() wherever a product meets a sum.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "fused_ops/batchnorm1d.h"
#include "fused_ops/cuda/batchnorm1d_math.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
using test::random_buffer;
namespace bn = cuda::bn;
namespace bn1 = cuda::bn1;

struct Bn1Case {
  int64_t B, R, C;
  bool training, affine, running, accumulate, want_dx;
  std::string name() const {
    return fmt::format("B{}_R{}_C{}_{}{}{}{}{}", B, R, C, training ? "train" : "eval",
                       affine ? "" : "_noaffine", running ? "" : "_norunning",
                       accumulate ? "_acc" : "", want_dx ? "" : "_nodx");
  }
  BatchNorm1dParams params() const {
    return {.B = B,
            .R = R,
            .C = C,
            .eps = 1e-5,
            .momentum = 0.1,
            .affine = affine,
            .training = training};
  }
};

void PrintTo(const Bn1Case& c, std::ostream* os) { *os << c.name(); }

std::vector<Bn1Case> cases() {
  // Rows per channel below, at and around the block's 256 threads (and R = 2, the smallest
  // training batch); one to 17 channels; every switch on and off somewhere; B in {1, 2, 3, 8}.
  const struct {
    int64_t R, C;
  } shapes[] = {{2, 3}, {7, 17}, {255, 2}, {256, 3}, {257, 1}, {300, 5}};
  std::vector<Bn1Case> out;
  int k = 0;
  for (const auto& s : shapes)
    for (int64_t B : test::model_counts()) {
      const bool training = k % 4 != 3;
      out.push_back(
          {B, s.R, s.C, training, k % 3 != 2, !training || k % 5 != 4, k % 2 == 1, k % 7 != 6});
      ++k;
    }
  return out;
}

// What one case computes: inputs and every output.
struct Bn1Run {
  Buffer x, gamma, beta, running_mean, running_var, saved_mean, saved_rstd, y, dy, dx, dgamma,
      dbeta;
  std::vector<Buffer*> all() {
    return {&x,          &gamma, &beta, &running_mean, &running_var, &saved_mean,
            &saved_rstd, &y,     &dy,   &dx,           &dgamma,      &dbeta};
  }
};

Bn1Run inputs(const Bn1Case& c) {
  const BatchNorm1dParams p = c.params();
  const uint64_t seed = test::case_seed("cuda_bn1d_" + c.name());
  RngStream rng(seed, 0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Bn1Run r;
  // An offset mean, so a one-pass variance would lose digits.
  r.x = random_buffer(p.x_shape(), rng, 2.0f, 4.0f);
  r.gamma = random_buffer(p.param_shape(), rng, 0.5f, 1.5f);
  r.beta = random_buffer(p.param_shape(), rng);
  r.running_mean = random_buffer(p.param_shape(), rng);
  r.running_var = random_buffer(p.param_shape(), rng, 0.5f, 2.0f);
  r.saved_mean = Buffer(p.param_shape(), nan);
  r.saved_rstd = Buffer(p.param_shape(), nan);
  r.y = Buffer(p.y_shape(), nan);
  r.dy = random_buffer(p.y_shape(), rng);
  r.dx = c.accumulate ? random_buffer(p.x_shape(), rng) : Buffer(p.x_shape(), nan);
  r.dgamma = random_buffer(p.param_shape(), rng);  // they accumulate
  r.dbeta = random_buffer(p.param_shape(), rng);
  return r;
}

// The kernels' arithmetic, block by block, thread by thread.
void mirror(const Bn1Case& c, Bn1Run& r) {
  const BatchNorm1dParams p = c.params();
  const bn1::RowsGeometry g{p.R, p.C};
  std::vector<double> partial(bn::kThreads), second(bn::kThreads);
  auto tree = [](std::vector<double>& v) {
    for (int stride = bn::kThreads / 2; stride > 0; stride /= 2)
      for (int t = 0; t < bn::kThreads; ++t) bn::tree_level(v.data(), t, stride);
    return v[0];
  };
  for (int64_t k = 0; k < p.B * p.C; ++k) {
    float mean, rstd;
    if (c.training) {
      for (int t = 0; t < bn::kThreads; ++t) partial[t] = bn1::partial_sum(r.x.data(), g, k, t);
      mean = bn::mean_of(tree(partial), g.R);
      for (int t = 0; t < bn::kThreads; ++t)
        partial[t] = bn1::partial_sq_dev(r.x.data(), g, k, t, mean);
      const double sq = tree(partial);
      rstd = bn::rstd_of(sq, g.R, p.eps);
      if (c.running)
        bn::update_running(r.running_mean.values[k], r.running_var.values[k], mean, sq, g.R,
                           p.momentum);
    } else {
      mean = r.running_mean.values[k];
      rstd = bn::eval_rstd(r.running_var.values[k], p.eps);
    }
    r.saved_mean.values[k] = mean;
    r.saved_rstd.values[k] = rstd;
    const float scale = c.affine ? r.gamma.values[k] * rstd : rstd;
    const float shift = c.affine ? r.beta.values[k] : 0.0f;
    for (int64_t j = 0; j < g.R; ++j) {
      const int64_t o = g.offset(k, j);
      r.y.values[o] = bn::normalize(r.x.values[o], mean, scale, shift);
    }
    // Backward.
    const bool need_sums = c.training || c.affine;
    double sum_dy = 0.0, sum_dy_xmu = 0.0;
    if (need_sums) {
      for (int t = 0; t < bn::kThreads; ++t)
        bn1::partial_grad_sums(r.x.data(), r.dy.data(), g, k, t, mean, partial[t], second[t]);
      sum_dy = tree(partial);
      sum_dy_xmu = tree(second);
    }
    if (c.affine) {
      r.dgamma.values[k] += static_cast<float>(sum_dy_xmu * rstd);
      r.dbeta.values[k] += static_cast<float>(sum_dy);
    }
    if (!c.want_dx) continue;
    const bn::GradCoefficients coef = bn::grad_coefficients(
        sum_dy, sum_dy_xmu, c.affine ? r.gamma.values[k] : 1.0f, rstd, g.R, c.training);
    for (int64_t j = 0; j < g.R; ++j) {
      const int64_t o = g.offset(k, j);
      const float grad = bn::input_grad(coef, r.x.values[o], mean, r.dy.values[o]);
      r.dx.values[o] = c.accumulate ? r.dx.values[o] + grad : grad;
    }
  }
}

enum class Path { kCpu, kRef, kDevice };

// The op on host buffers (the CPU kernel through the dispatcher, or the reference) or on device
// copies.
void run_op(const Bn1Case& c, Bn1Run& r, Path path) {
  const BatchNorm1dParams p = c.params();
  std::vector<Buffer*> all = r.all();
  std::vector<TensorView> views;
  std::optional<cuda::DeviceArena> arena;
  if (path == Path::kDevice) {
    int64_t bytes = 0;
    for (Buffer* b : all) bytes += cuda::DeviceArena::align_up(b->numel() * sizeof(float));
    arena.emplace(bytes, "batchnorm1d test");
    for (Buffer* b : all) {
      views.push_back(arena->carve(b->shape));
      cuda::copy_to_device(b->view(), views.back());
    }
  } else {
    for (Buffer* b : all) views.push_back(b->view());
  }
  const TensorView none{};
  const TensorView &x = views[0], &gamma = views[1], &beta = views[2], &rm = views[3],
                   &rv = views[4], &sm = views[5], &sr = views[6], &y = views[7], &dy = views[8],
                   &dx = views[9], &dgamma = views[10], &dbeta = views[11];
  const bool ref = path == Path::kRef;
  (ref ? ref::batchnorm1d_forward : batchnorm1d_forward)(p, {.x = x,
                                                             .gamma = c.affine ? gamma : none,
                                                             .beta = c.affine ? beta : none,
                                                             .running_mean = c.running ? rm : none,
                                                             .running_var = c.running ? rv : none,
                                                             .saved = {.mean = sm, .rstd = sr},
                                                             .y = y});
  (ref ? ref::batchnorm1d_backward : batchnorm1d_backward)(p, {.x = x,
                                                               .gamma = c.affine ? gamma : none,
                                                               .saved = {.mean = sm, .rstd = sr},
                                                               .dy = dy,
                                                               .dx = c.want_dx ? dx : none,
                                                               .dgamma = c.affine ? dgamma : none,
                                                               .dbeta = c.affine ? dbeta : none,
                                                               .accumulate_dx = c.accumulate});
  if (path == Path::kDevice)
    for (size_t i = 0; i < all.size(); ++i) cuda::copy_to_host(views[i], all[i]->view());
}

void expect_all_equal(Bn1Run& got, Bn1Run& want, const std::string& what) {
  const char* names[] = {"x",          "gamma", "beta", "running_mean", "running_var", "saved.mean",
                         "saved.rstd", "y",     "dy",   "dx",           "dgamma",      "dbeta"};
  std::vector<Buffer*> a = got.all(), b = want.all();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(test::same_bits_or_nan(a[i]->values, b[i]->values)) << what << ": " << names[i];
}

class CudaBatchNorm1d : public ::testing::TestWithParam<Bn1Case> {};

TEST_P(CudaBatchNorm1d, HostMirrorMatchesTheCpuOpAndTheReference) {
  const Bn1Case& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_bn1d_" + c.name()));
  for (Path path : {Path::kCpu, Path::kRef}) {
    SCOPED_TRACE(path == Path::kCpu ? "against the CPU op" : "against the reference");
    Bn1Run want = inputs(c), got = inputs(c);
    run_op(c, want, path);
    mirror(c, got);
    // Statistics in float from double sums on every side: a few ulp. Outputs: |y| and the
    // gradients are O(1) here; the float scale (gamma * rstd, rounded once more on the device
    // side) and coefficients move them by a few ulp of their terms.
    const double R = double(c.R);
    test::expect_close(got.saved_mean.data(), want.saved_mean.data(), got.saved_mean.numel(), 1e-6,
                       1e-6, "saved.mean");
    test::expect_close(got.saved_rstd.data(), want.saved_rstd.data(), got.saved_rstd.numel(), 0.0,
                       1e-5, "saved.rstd");
    test::expect_close(got.running_mean.data(), want.running_mean.data(), got.running_mean.numel(),
                       1e-6, 1e-6, "running_mean");
    test::expect_close(got.running_var.data(), want.running_var.data(), got.running_var.numel(),
                       1e-6, 1e-5, "running_var");
    test::expect_close(got.y.data(), want.y.data(), got.y.numel(), 1e-5, 1e-5, "y");
    if (c.want_dx)
      test::expect_close(got.dx.data(), want.dx.data(), got.dx.numel(), 2e-5, 1e-5, "dx");
    test::expect_close(got.dgamma.data(), want.dgamma.data(), got.dgamma.numel(), 1e-6 * R, 1e-5,
                       "dgamma");
    test::expect_close(got.dbeta.data(), want.dbeta.data(), got.dbeta.numel(), 1e-6 * R, 1e-5,
                       "dbeta");
    // Every output was written: nothing NaN is left where the op writes.
    for (float v : got.y.values) ASSERT_FALSE(std::isnan(v)) << "y not written";
    if (c.want_dx) {
      for (float v : got.dx.values) ASSERT_FALSE(std::isnan(v)) << "dx not written";
    }
  }
}

// No sum crosses models: model b of the fused mirror is the B = 1 mirror on model b's slice.
TEST_P(CudaBatchNorm1d, HostMirrorFusedEqualsEachModelAlone) {
  const Bn1Case& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_bn1d_" + c.name()));
  Bn1Run fused = inputs(c);
  mirror(c, fused);
  const Bn1Run start = inputs(c);
  Bn1Case one = c;
  one.B = 1;
  for (int64_t b = 0; b < c.B; ++b) {
    Bn1Run alone = inputs(one), slice_of_fused = inputs(one);
    Bn1Run from = start;
    std::vector<Buffer*> src = from.all(), dst = alone.all(), got = fused.all(),
                         cut = slice_of_fused.all();
    for (size_t i = 0; i < src.size(); ++i) {
      const int64_t n = dst[i]->numel();
      std::copy(src[i]->values.begin() + b * n, src[i]->values.begin() + (b + 1) * n,
                dst[i]->values.begin());
      std::copy(got[i]->values.begin() + b * n, got[i]->values.begin() + (b + 1) * n,
                cut[i]->values.begin());
    }
    mirror(one, alone);
    expect_all_equal(slice_of_fused, alone, fmt::format("model {}", b));
  }
}

TEST_P(CudaBatchNorm1d, DeviceEqualsHostMirror) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const Bn1Case& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_bn1d_" + c.name()));
  Bn1Run want = inputs(c), got = inputs(c);
  mirror(c, want);
  run_op(c, got, Path::kDevice);
  cuda::synchronize();
  expect_all_equal(got, want, "device against the host mirror");
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaBatchNorm1d, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(CudaBatchNorm1dDevices, MixedDevicesRaise) {
  const BatchNorm1dParams p{.B = 1, .R = 2, .C = 1};
  Buffer x(p.x_shape()), y(p.y_shape()), m(p.param_shape()), r(p.param_shape()), g(p.param_shape()),
      b(p.param_shape());
  TensorView on_device = y.view();
  on_device.device = Device::kCuda;
  EXPECT_THROW(batchnorm1d_forward(p, {.x = x.view(),
                                       .gamma = g.view(),
                                       .beta = b.view(),
                                       .saved = {.mean = m.view(), .rstd = r.view()},
                                       .y = on_device}),
               Error);
  EXPECT_THROW(batchnorm1d_backward(p, {.x = x.view(),
                                        .gamma = g.view(),
                                        .saved = {.mean = m.view(), .rstd = r.view()},
                                        .dy = on_device}),
               Error);
}

}  // namespace
}  // namespace hfta
