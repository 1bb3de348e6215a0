// The CUDA BatchNorm2d (fused_ops/cuda/batchnorm2d.cpp).
//
// HostMirror (runs without a GPU): batchnorm2d_math.h's functions driven as the kernels drive
// them (one block of bn::kThreads threads per channel: each thread's partial sums, then the tree)
// on NaN-filled outputs, against the CPU op: the statistics, running statistics, y, dx, dgamma
// and dbeta agree to rounding (the CPU kernel sums rows in float, the mirror every element in
// double). The device tests (skipped without a GPU) run the op through the dispatching
// batchnorm2d_forward / batchnorm2d_backward with device tensors and require the mirror's bits:
// the shared functions use explicit fma()/fmaf() wherever a product meets a sum.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "fused_ops/batchnorm2d.h"
#include "fused_ops/cuda/batchnorm2d_math.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
using test::random_buffer;
namespace bn = cuda::bn;

struct BnCase {
  int64_t B, N, C, H, W;
  bool training, affine, running, accumulate, want_dx;
  std::string name() const {
    return fmt::format("B{}_N{}_C{}_{}x{}_{}{}{}{}{}", B, N, C, H, W, training ? "train" : "eval",
                       affine ? "" : "_noaffine", running ? "" : "_norunning",
                       accumulate ? "_acc" : "", want_dx ? "" : "_nodx");
  }
  BatchNorm2dParams params() const {
    return {.B = B,
            .N = N,
            .C = C,
            .H = H,
            .W = W,
            .eps = 1e-5,
            .momentum = 0.1,
            .affine = affine,
            .training = training};
  }
};

void PrintTo(const BnCase& c, std::ostream* os) { *os << c.name(); }

std::vector<BnCase> cases() {
  // Elements per channel (N*H*W) below, at and around the block's 256 threads, and a plane of
  // one position; every switch on and off somewhere, B in {1, 2, 3, 8}.
  const struct {
    int64_t N, C, H, W;
  } shapes[] = {{2, 3, 8, 8}, {1, 2, 16, 16}, {3, 2, 10, 10},
                {4, 3, 9, 8}, {5, 4, 1, 1},   {2, 1, 17, 15}};
  std::vector<BnCase> out;
  int k = 0;
  for (const auto& s : shapes)
    for (int64_t B : {1, 2, 3, 8}) {
      const bool training = k % 4 != 3;
      out.push_back({B, s.N, s.C, s.H, s.W, training, k % 3 != 2, !training || k % 5 != 4,
                     k % 2 == 1, k % 7 != 6});
      ++k;
    }
  return out;
}

// What one case computes: inputs and every output.
struct BnRun {
  Buffer x, gamma, beta, running_mean, running_var, saved_mean, saved_rstd, y, dy, dx, dgamma,
      dbeta;
};

BnRun inputs(const BnCase& c) {
  const BatchNorm2dParams p = c.params();
  const uint64_t seed = test::case_seed("cuda_bn_" + c.name());
  RngStream rng(seed, 0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  BnRun r;
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
void mirror(const BnCase& c, BnRun& r) {
  const BatchNorm2dParams p = c.params();
  const bn::Geometry g{p.N, p.B * p.C, p.H * p.W};
  std::vector<double> partial(bn::kThreads), second(bn::kThreads);
  auto tree = [](std::vector<double>& v) {
    for (int stride = bn::kThreads / 2; stride > 0; stride /= 2)
      for (int t = 0; t < bn::kThreads; ++t) bn::tree_level(v.data(), t, stride);
    return v[0];
  };
  for (int64_t k = 0; k < g.channels; ++k) {
    float mean, rstd;
    if (c.training) {
      for (int t = 0; t < bn::kThreads; ++t) partial[t] = bn::partial_sum(r.x.data(), g, k, t);
      mean = bn::mean_of(tree(partial), g.count());
      for (int t = 0; t < bn::kThreads; ++t)
        partial[t] = bn::partial_sq_dev(r.x.data(), g, k, t, mean);
      const double sq = tree(partial);
      rstd = bn::rstd_of(sq, g.count(), p.eps);
      if (c.running)
        bn::update_running(r.running_mean.values[k], r.running_var.values[k], mean, sq, g.count(),
                           p.momentum);
    } else {
      mean = r.running_mean.values[k];
      rstd = bn::eval_rstd(r.running_var.values[k], p.eps);
    }
    r.saved_mean.values[k] = mean;
    r.saved_rstd.values[k] = rstd;
    const float scale = c.affine ? r.gamma.values[k] * rstd : rstd;
    const float shift = c.affine ? r.beta.values[k] : 0.0f;
    for (int64_t j = 0; j < g.count(); ++j) {
      const int64_t o = g.offset(k, j);
      r.y.values[o] = bn::normalize(r.x.values[o], mean, scale, shift);
    }
    // Backward.
    const bool need_sums = c.training || c.affine;
    double sum_dy = 0.0, sum_dy_xmu = 0.0;
    if (need_sums) {
      for (int t = 0; t < bn::kThreads; ++t)
        bn::partial_grad_sums(r.x.data(), r.dy.data(), g, k, t, mean, partial[t], second[t]);
      sum_dy = tree(partial);
      sum_dy_xmu = tree(second);
    }
    if (c.affine) {
      r.dgamma.values[k] += static_cast<float>(sum_dy_xmu * rstd);
      r.dbeta.values[k] += static_cast<float>(sum_dy);
    }
    if (!c.want_dx) continue;
    const bn::GradCoefficients coef = bn::grad_coefficients(
        sum_dy, sum_dy_xmu, c.affine ? r.gamma.values[k] : 1.0f, rstd, g.count(), c.training);
    for (int64_t j = 0; j < g.count(); ++j) {
      const int64_t o = g.offset(k, j);
      const float grad = bn::input_grad(coef, r.x.values[o], mean, r.dy.values[o]);
      r.dx.values[o] = c.accumulate ? r.dx.values[o] + grad : grad;
    }
  }
}

// The op through its dispatcher, on host buffers (the CPU kernel) or on device copies.
void run_op(const BnCase& c, BnRun& r, bool on_device) {
  const BatchNorm2dParams p = c.params();
  std::vector<Buffer*> all = {&r.x,           &r.gamma,      &r.beta,       &r.running_mean,
                              &r.running_var, &r.saved_mean, &r.saved_rstd, &r.y,
                              &r.dy,          &r.dx,         &r.dgamma,     &r.dbeta};
  std::vector<TensorView> views;
  std::optional<cuda::DeviceArena> arena;
  if (on_device) {
    int64_t bytes = 0;
    for (Buffer* b : all) bytes += cuda::DeviceArena::align_up(b->numel() * sizeof(float));
    arena.emplace(bytes, "batchnorm2d test");
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
  batchnorm2d_forward(p, {.x = x,
                          .gamma = c.affine ? gamma : none,
                          .beta = c.affine ? beta : none,
                          .running_mean = c.running ? rm : none,
                          .running_var = c.running ? rv : none,
                          .saved = {.mean = sm, .rstd = sr},
                          .y = y});
  batchnorm2d_backward(p, {.x = x,
                           .gamma = c.affine ? gamma : none,
                           .saved = {.mean = sm, .rstd = sr},
                           .dy = dy,
                           .dx = c.want_dx ? dx : none,
                           .dgamma = c.affine ? dgamma : none,
                           .dbeta = c.affine ? dbeta : none,
                           .accumulate_dx = c.accumulate});
  if (on_device)
    for (size_t i = 0; i < all.size(); ++i) cuda::copy_to_host(views[i], all[i]->view());
}

void expect_all_equal(const BnRun& got, const BnRun& want) {
  auto same = [](const Buffer& a, const Buffer& b, const char* what) {
    for (int64_t i = 0; i < a.numel(); ++i) {
      const float u = a.values[i], v = b.values[i];
      ASSERT_TRUE((std::isnan(u) && std::isnan(v)) || u == v)
          << what << "[" << i << "] = " << u << ", the host mirror has " << v;
    }
  };
  same(got.saved_mean, want.saved_mean, "saved.mean");
  same(got.saved_rstd, want.saved_rstd, "saved.rstd");
  same(got.running_mean, want.running_mean, "running_mean");
  same(got.running_var, want.running_var, "running_var");
  same(got.y, want.y, "y");
  same(got.dx, want.dx, "dx");
  same(got.dgamma, want.dgamma, "dgamma");
  same(got.dbeta, want.dbeta, "dbeta");
}

class CudaBatchNorm2d : public ::testing::TestWithParam<BnCase> {};

TEST_P(CudaBatchNorm2d, HostMirrorMatchesTheCpuOp) {
  const BnCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_bn_" + c.name()));
  BnRun want = inputs(c), got = inputs(c);
  run_op(c, want, /*on_device=*/false);
  mirror(c, got);
  // Statistics in float from double sums on both sides: a few ulp. Outputs: |y| and the
  // gradients are O(1) here, the sums over <= 300 elements differ by their float row sums.
  const double M = double(c.params().reduction_size());
  test::expect_close(got.saved_mean.data(), want.saved_mean.data(), got.saved_mean.numel(), 1e-6,
                     1e-6, "saved.mean");
  test::expect_close(got.saved_rstd.data(), want.saved_rstd.data(), got.saved_rstd.numel(), 0.0,
                     1e-5, "saved.rstd");
  test::expect_close(got.running_mean.data(), want.running_mean.data(), got.running_mean.numel(),
                     1e-6, 1e-6, "running_mean");
  test::expect_close(got.running_var.data(), want.running_var.data(), got.running_var.numel(), 1e-6,
                     1e-5, "running_var");
  test::expect_close(got.y.data(), want.y.data(), got.y.numel(), 1e-5, 1e-5, "y");
  if (c.want_dx)
    test::expect_close(got.dx.data(), want.dx.data(), got.dx.numel(), 2e-5, 1e-5, "dx");
  test::expect_close(got.dgamma.data(), want.dgamma.data(), got.dgamma.numel(), 1e-6 * M, 1e-5,
                     "dgamma");
  test::expect_close(got.dbeta.data(), want.dbeta.data(), got.dbeta.numel(), 1e-6 * M, 1e-5,
                     "dbeta");
  // Every output was written: nothing NaN is left where the op writes.
  for (float v : got.y.values) ASSERT_FALSE(std::isnan(v)) << "y not written";
  if (c.want_dx) {
    for (float v : got.dx.values) ASSERT_FALSE(std::isnan(v)) << "dx not written";
  }
}

TEST_P(CudaBatchNorm2d, DeviceEqualsHostMirror) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const BnCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_bn_" + c.name()));
  BnRun want = inputs(c), got = inputs(c);
  mirror(c, want);
  run_op(c, got, /*on_device=*/true);
  cuda::synchronize();
  expect_all_equal(got, want);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaBatchNorm2d, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(CudaBatchNorm2dDevices, MixedDevicesRaise) {
  const BatchNorm2dParams p{.B = 1, .N = 2, .C = 1, .H = 1, .W = 1};
  Buffer x(p.x_shape()), y(p.y_shape()), m(p.param_shape()), r(p.param_shape()), g(p.param_shape()),
      b(p.param_shape());
  TensorView on_device = y.view();
  on_device.device = Device::kCuda;
  EXPECT_THROW(batchnorm2d_forward(p, {.x = x.view(),
                                       .gamma = g.view(),
                                       .beta = b.view(),
                                       .saved = {.mean = m.view(), .rstd = r.view()},
                                       .y = on_device}),
               Error);
}

}  // namespace
}  // namespace hfta
