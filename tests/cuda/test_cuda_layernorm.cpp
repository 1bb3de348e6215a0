// The CUDA LayerNorm (fused_ops/cuda/layernorm.cpp): B in {1, 2, 3, 8}; F from 1 to 1100 features
// around the 256-thread row blocks (255, 256, 257, 513), 1 to 35 rows per model; affine on and
// off, inputs centred at 0 and at 5 (|mean| >> std), eps 1e-5 and 0.5; dx written, added or not
// wanted, dgamma and dbeta accumulated or not wanted.
//   LayerNormHostMirror (runs without a GPU): layernorm_math.h driven block by block and thread
//     by thread as the kernels run it (the partials, the fixed tree), on NaN-filled outputs,
//     against the reference within two float roundings (both compute in double; they differ in
//     the order of the row sums and in contractions, far below a float's precision); every
//     output written; model b of the fused mirror equals the B = 1 mirror bit for bit.
//   CudaLayerNorm (skipped without a GPU): the op through the dispatcher on device tensors, bit
//     for bit the host mirror; LayerNormDevices: mixed devices raise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/layernorm_math.h"
#include "fused_ops/layernorm.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int kThreads = 256;  // fused_ops/cuda/launch.cuh

struct LnCase {
  LayerNormParams p;
  float offset;
  bool want_dx, want_params, accumulate;
  std::string name() const {
    return fmt::format("B{}_N{}_F{}{}{}{}{}{}{}", p.B, p.N, p.F, p.affine ? "" : "_noaffine",
                       offset != 0 ? "_offset" : "", p.eps > 1e-3 ? "_bigeps" : "",
                       want_dx ? "_dx" : "", want_params ? "_params" : "",
                       accumulate ? "_acc" : "");
  }
};

void PrintTo(const LnCase& c, std::ostream* os) { *os << c.name(); }

std::vector<LnCase> cases() {
  const struct {
    int64_t N, F;
    bool affine;
    float offset;
    double eps;
  } shapes[] = {{1, 1, true, 0, 1e-5},     {3, 255, true, 0, 1e-5}, {2, 256, false, 0, 1e-5},
                {5, 257, true, 5, 1e-5},   {2, 513, true, 0, 0.5},  {35, 200, true, 0, 1e-5},
                {1, 1100, false, 5, 1e-5}, {7, 17, true, 0, 1e-5}};
  std::vector<LnCase> out;
  int k = 0;
  for (const auto& s : shapes)
    for (int64_t B : test::model_counts()) {
      const int variant = k++ % 4;  // both, no dx, no parameter gradients; accumulate on odd
      out.push_back({{.B = B, .N = s.N, .F = s.F, .eps = s.eps, .affine = s.affine},
                     s.offset,
                     variant != 1,
                     s.affine && variant != 2,
                     variant % 2 == 1});
    }
  return out;
}

struct Tensors {
  Buffer x, gamma, beta, dy, dx_start, dgamma_start, dbeta_start;
};

Tensors inputs(const LnCase& c) {
  RngStream rng(test::case_seed("cuda_layernorm_" + c.name()), 0);
  const Shape xs = c.p.x_shape(), ps = c.p.param_shape();
  Tensors t{test::random_buffer(xs, rng, c.offset - 1, c.offset + 1),
            test::random_buffer(ps, rng, 0.5f, 1.5f),
            test::random_buffer(ps, rng),
            test::random_buffer(xs, rng),
            c.accumulate ? test::random_buffer(xs, rng) : Buffer(xs, kNaN),
            test::random_buffer(ps, rng),
            test::random_buffer(ps, rng)};
  return t;
}

struct Outputs {
  Buffer y, mean, rstd, dx, dgamma, dbeta;
};

Outputs start_outputs(const LnCase& c, const Tensors& t) {
  return {Buffer(c.p.y_shape(), kNaN),
          Buffer(c.p.saved_shape(), kNaN),
          Buffer(c.p.saved_shape(), kNaN),
          t.dx_start,
          t.dgamma_start,
          t.dbeta_start};
}

TensorView or_empty(bool want, Buffer& b) { return want ? b.view() : TensorView(); }

Outputs reference(const LnCase& c, Tensors& t) {
  Outputs o = start_outputs(c, t);
  const LayerNormSaved saved{.mean = o.mean.view(), .rstd = o.rstd.view()};
  ref::layernorm_forward(c.p, {.x = t.x.view(),
                               .gamma = or_empty(c.p.affine, t.gamma),
                               .beta = or_empty(c.p.affine, t.beta),
                               .saved = saved,
                               .y = o.y.view()});
  ref::layernorm_backward(c.p, {.x = t.x.view(),
                                .gamma = or_empty(c.p.affine, t.gamma),
                                .saved = saved,
                                .dy = t.dy.view(),
                                .dx = or_empty(c.want_dx, o.dx),
                                .dgamma = or_empty(c.want_params, o.dgamma),
                                .dbeta = or_empty(c.want_params, o.dbeta),
                                .accumulate_dx = c.accumulate});
  return o;
}

// A block's threads' partials, added as the kernels' tree adds them.
layernorm_math::Sums tree(std::vector<layernorm_math::Sums> part) {
  for (int stride = kThreads / 2; stride > 0; stride /= 2)
    for (int th = 0; th < stride; ++th)
      part[th] = layernorm_math::combine(part[th], part[th + stride]);
  return part[0];
}

Outputs mirror(const LnCase& c, Tensors& t) {
  using namespace layernorm_math;
  const LnShape s{.B = c.p.B, .N = c.p.N, .F = c.p.F, .eps = c.p.eps, .affine = c.p.affine};
  Outputs o = start_outputs(c, t);
  const float* g = c.p.affine ? t.gamma.data() : nullptr;
  const float* be = c.p.affine ? t.beta.data() : nullptr;
  std::vector<Sums> part(kThreads);
  for (int64_t row = 0; row < s.rows(); ++row) {
    for (int th = 0; th < kThreads; ++th) part[th] = sum_partial(s, t.x.data(), row, th, kThreads);
    const double mu = tree(part).a / double(s.F);
    for (int th = 0; th < kThreads; ++th)
      part[th] = square_partial(s, t.x.data(), row, mu, th, kThreads);
    const double r = rstd_of(s, tree(part).a);
    o.mean.values[row] = static_cast<float>(mu);
    o.rstd.values[row] = static_cast<float>(r);
    for (int64_t f = 0; f < s.F; ++f) y_at(s, t.x.data(), g, be, o.y.data(), row, mu, r, f);
  }
  if (c.want_params)
    for (int64_t j = 0; j < s.B * s.F; ++j)
      param_grads_at(s, t.x.data(), t.dy.data(), o.mean.data(), o.rstd.data(), o.dgamma.data(),
                     o.dbeta.data(), j);
  if (c.want_dx)
    for (int64_t row = 0; row < s.rows(); ++row) {
      const float m = o.mean.values[row], r = o.rstd.values[row];
      for (int th = 0; th < kThreads; ++th)
        part[th] = dx_partial(s, t.x.data(), g, t.dy.data(), m, r, row, th, kThreads);
      const Sums sums = tree(part);
      for (int64_t f = 0; f < s.F; ++f)
        dx_at(s, t.x.data(), g, t.dy.data(), o.dx.data(), m, r, sums, c.accumulate, row, f);
    }
  return o;
}

// Two roundings of the larger of the result and the gradient added to the start (the start's
// value itself is exact), plus a floor far below a float's precision for the double arithmetic's
// differences: got and want round nearly the same double.
void expect_near(const Buffer& got, const Buffer& want, const Buffer& start, bool accumulated,
                 const std::string& what) {
  const double u = 1.0 / (1 << 24);
  int reported = 0;
  for (size_t i = 0; i < want.values.size() && reported < 5; ++i) {
    const double w = want.values[i], s = accumulated ? start.values[i] : 0.0;
    const double bound = 4 * u * (std::fabs(w) + std::fabs(w - s)) + 1e-12;
    if (std::fabs(double(got.values[i]) - w) <= bound) continue;
    ++reported;
    ADD_FAILURE() << what << "[" << i << "] = " << got.values[i] << ", expected " << w << " within "
                  << bound;
  }
}

void expect_matches_reference(const LnCase& c, const Tensors& t, const Outputs& got,
                              const Outputs& want) {
  expect_near(got.y, want.y, want.y, false, "y");
  expect_near(got.mean, want.mean, want.mean, false, "mean");
  expect_near(got.rstd, want.rstd, want.rstd, false, "rstd");
  expect_near(got.dx, want.dx, t.dx_start, c.accumulate, "dx");
  expect_near(got.dgamma, want.dgamma, t.dgamma_start, true, "dgamma");
  expect_near(got.dbeta, want.dbeta, t.dbeta_start, true, "dbeta");
  if (!c.want_dx && !c.accumulate) {
    for (float v : got.dx.values) ASSERT_TRUE(std::isnan(v)) << "unwanted dx written";
  }
}

class LayerNormHostMirror : public ::testing::TestWithParam<LnCase> {};

TEST_P(LayerNormHostMirror, MatchesTheReference) {
  const LnCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_layernorm_" + c.name()));
  Tensors t = inputs(c);
  expect_matches_reference(c, t, mirror(c, t), reference(c, t));
}

TEST_P(LayerNormHostMirror, FusedEqualsEachModelAlone) {
  const LnCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_layernorm_" + c.name()));
  Tensors t = inputs(c);
  const Outputs fused = mirror(c, t);
  const int64_t per_x = c.p.N * c.p.F, per_p = c.p.F, per_s = c.p.N;
  for (int64_t b = 0; b < c.p.B; ++b) {
    SCOPED_TRACE(fmt::format("model b={}", b));
    LnCase one = c;
    one.p.B = 1;
    auto slice = [&](const Buffer& from, int64_t per) {
      Buffer out(Shape{1, per});
      std::copy_n(from.values.begin() + b * per, per, out.values.begin());
      return out;
    };
    Tensors single{slice(t.x, per_x),          slice(t.gamma, per_p),
                   slice(t.beta, per_p),       slice(t.dy, per_x),
                   slice(t.dx_start, per_x),   slice(t.dgamma_start, per_p),
                   slice(t.dbeta_start, per_p)};
    const Outputs alone = mirror(one, single);
    test::expect_same_bits(alone.y.values, slice(fused.y, per_x).values, "y");
    test::expect_same_bits(alone.mean.values, slice(fused.mean, per_s).values, "mean");
    test::expect_same_bits(alone.rstd.values, slice(fused.rstd, per_s).values, "rstd");
    test::expect_same_bits(alone.dx.values, slice(fused.dx, per_x).values, "dx");
    test::expect_same_bits(alone.dgamma.values, slice(fused.dgamma, per_p).values, "dgamma");
    test::expect_same_bits(alone.dbeta.values, slice(fused.dbeta, per_p).values, "dbeta");
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, LayerNormHostMirror, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

class CudaLayerNorm : public ::testing::TestWithParam<LnCase> {};

TEST_P(CudaLayerNorm, EqualsTheHostMirror) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const LnCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_layernorm_" + c.name()));
  Tensors t = inputs(c);
  const Outputs want = mirror(c, t);
  const Shape xs = c.p.x_shape(), ps = c.p.param_shape(), ss = c.p.saved_shape();
  const auto bytes = [](const Shape& s) {
    return cuda::DeviceArena::align_up(static_cast<size_t>(s.numel()) * sizeof(float));
  };
  cuda::DeviceArena arena(4 * bytes(xs) + 4 * bytes(ps) + 2 * bytes(ss), "layernorm test");
  const TensorView x = arena.carve(xs), y = arena.carve(xs), dy = arena.carve(xs),
                   dx = arena.carve(xs), gamma = arena.carve(ps), beta = arena.carve(ps),
                   dgamma = arena.carve(ps), dbeta = arena.carve(ps), mean = arena.carve(ss),
                   rstd = arena.carve(ss);
  Outputs start = start_outputs(c, t);
  cuda::copy_to_device(t.x.view(), x);
  cuda::copy_to_device(t.dy.view(), dy);
  cuda::copy_to_device(t.gamma.view(), gamma);
  cuda::copy_to_device(t.beta.view(), beta);
  cuda::copy_to_device(start.y.view(), y);
  cuda::copy_to_device(start.dx.view(), dx);
  cuda::copy_to_device(start.dgamma.view(), dgamma);
  cuda::copy_to_device(start.dbeta.view(), dbeta);
  cuda::copy_to_device(start.mean.view(), mean);
  cuda::copy_to_device(start.rstd.view(), rstd);
  const bool affine = c.p.affine;
  const LayerNormSaved saved{.mean = mean, .rstd = rstd};
  layernorm_forward(c.p, {.x = x,
                          .gamma = affine ? gamma : TensorView(),
                          .beta = affine ? beta : TensorView(),
                          .saved = saved,
                          .y = y});
  layernorm_backward(c.p, {.x = x,
                           .gamma = affine ? gamma : TensorView(),
                           .saved = saved,
                           .dy = dy,
                           .dx = c.want_dx ? dx : TensorView(),
                           .dgamma = c.want_params ? dgamma : TensorView(),
                           .dbeta = c.want_params ? dbeta : TensorView(),
                           .accumulate_dx = c.accumulate});
  Outputs got{Buffer(xs), Buffer(ss), Buffer(ss), Buffer(xs), Buffer(ps), Buffer(ps)};
  cuda::copy_to_host(y, got.y.view());
  cuda::copy_to_host(mean, got.mean.view());
  cuda::copy_to_host(rstd, got.rstd.view());
  cuda::copy_to_host(dx, got.dx.view());
  cuda::copy_to_host(dgamma, got.dgamma.view());
  cuda::copy_to_host(dbeta, got.dbeta.view());
  test::expect_same_bits(got.y.values, want.y.values, "y");
  test::expect_same_bits(got.mean.values, want.mean.values, "mean");
  test::expect_same_bits(got.rstd.values, want.rstd.values, "rstd");
  test::expect_same_bits(got.dx.values, want.dx.values, "dx");
  test::expect_same_bits(got.dgamma.values, want.dgamma.values, "dgamma");
  test::expect_same_bits(got.dbeta.values, want.dbeta.values, "dbeta");
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaLayerNorm, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(LayerNormDevices, TensorsOnTwoDevicesAreRefused) {
  const LayerNormParams p{.B = 1, .N = 2, .F = 3};
  std::vector<float> x(6), y(6), g(3), b(3), m(2), r(2);
  const TensorView on_device(y.data(), p.y_shape(), Device::kCuda);
  test::expect_error_containing_all(
      [&] {
        layernorm_forward(p, {.x = TensorView(x.data(), p.x_shape()),
                              .gamma = TensorView(g.data(), p.param_shape()),
                              .beta = TensorView(b.data(), p.param_shape()),
                              .saved = {.mean = TensorView(m.data(), p.saved_shape()),
                                        .rstd = TensorView(r.data(), p.saved_shape())},
                              .y = on_device});
      },
      {"layernorm output", "CUDA device"});
  test::expect_error_containing_all(
      [&] {
        layernorm_backward(p, {.x = TensorView(x.data(), p.x_shape()),
                               .gamma = TensorView(g.data(), p.param_shape()),
                               .saved = {.mean = TensorView(m.data(), p.saved_shape()),
                                         .rstd = TensorView(r.data(), p.saved_shape())},
                               .dy = TensorView(y.data(), p.y_shape()),
                               .dgamma = TensorView(g.data(), p.param_shape(), Device::kCuda)});
      },
      {"layernorm gamma gradient", "CUDA device"});
}

}  // namespace
}  // namespace hfta
