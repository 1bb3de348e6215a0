// A BatchNorm's fused activation against BatchNorm and then the activation op, as a Net runs
// them apart (the activation in place over BatchNorm's output, its gradient in a buffer of its
// own): the shared part of tests/fused_ops/test_batchnorm2d.cpp's and test_batchnorm1d.cpp's
// bit-for-bit tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "core/rng.h"
#include "fused_ops/activation.h"
#include "test_util.h"

namespace hfta::test {

// The activations a BatchNorm takes over, LeakyReLU with slope 0 (run as ReLU) included.
inline const std::vector<ActivationParams>& fusable_activations() {
  static const std::vector<ActivationParams> kinds = {
      {.kind = ActivationKind::kRelu},
      {.kind = ActivationKind::kRelu6},
      {.kind = ActivationKind::kLeakyRelu, .negative_slope = 0.2f},
      {.kind = ActivationKind::kLeakyRelu, .negative_slope = 0.0f}};
  return kinds;
}

// The op harness's cases: none in the first pass over the sizes, then ReLU, ReLU6 and
// LeakyReLU(0.2) in turn (case counter k).
inline std::optional<ActivationParams> harness_activation(bool with_activation, int k) {
  if (!with_activation) return std::nullopt;
  return fusable_activations()[static_cast<size_t>(k % 3)];
}

// One call's tensors; gamma and beta spread the normalized values over both of ReLU6's clamps.
struct NormInputs {
  Buffer x, dy, gamma, beta, running_mean, running_var, dx_start;
  NormInputs(const Shape& x_shape, const Shape& param_shape, RngStream& rng)
      : x(random_buffer(x_shape, rng)),
        dy(random_buffer(x_shape, rng)),
        gamma(random_buffer(param_shape, rng, -4.0f, 4.0f)),
        beta(random_buffer(param_shape, rng, -3.0f, 5.0f)),
        running_mean(random_buffer(param_shape, rng, -0.5f, 0.5f)),
        running_var(random_buffer(param_shape, rng, 0.2f, 1.5f)),
        dx_start(random_buffer(x_shape, rng)) {}
};

struct NormOutputs {
  Buffer y, mean, rstd, running_mean, running_var, dx, dgamma, dbeta;
};

// Forward and backward of a BatchNorm op whose p.activation is set: fused, or (fuse = false)
// without it and then the activation op. Outputs start as garbage; dx starts at in.dx_start
// when accumulating. The ops only read `in` (non-const for its views).
template <typename Params, typename ForwardArgs, typename BackwardArgs>
NormOutputs run_norm(Params p, bool fuse, NormInputs& in, bool accumulate,
                     void (*forward)(const Params&, const ForwardArgs&),
                     void (*backward)(const Params&, const BackwardArgs&)) {
  constexpr float kGarbage = 1e30f;
  const ActivationParams act = *p.activation;
  if (!fuse) p.activation.reset();
  const Shape xs = p.x_shape(), ps = p.param_shape();
  NormOutputs r{Buffer(xs, kGarbage), Buffer(ps, kGarbage),
                Buffer(ps, kGarbage), in.running_mean,
                in.running_var,       accumulate ? in.dx_start : Buffer(xs, kGarbage),
                Buffer(ps),           Buffer(ps)};
  const decltype(ForwardArgs::saved) saved{r.mean.view(), r.rstd.view()};
  forward(p, {.x = in.x.view(),
              .gamma = in.gamma.view(),
              .beta = in.beta.view(),
              .running_mean = r.running_mean.view(),
              .running_var = r.running_var.view(),
              .saved = saved,
              .y = r.y.view()});
  Buffer dz = in.dy;
  if (!fuse) {
    activation_forward(act, {.x = r.y.view(), .y = r.y.view()});
    dz = Buffer(xs, kGarbage);
    activation_backward(act, {.y = r.y.view(), .dy = in.dy.view(), .dx = dz.view()});
  }
  backward(p, {.x = in.x.view(),
               .gamma = in.gamma.view(),
               .beta = in.beta.view(),
               .y = r.y.view(),
               .saved = saved,
               .dy = dz.view(),
               .dx = r.dx.view(),
               .dgamma = r.dgamma.view(),
               .dbeta = r.dbeta.view(),
               .accumulate_dx = accumulate});
  return r;
}

// Every output bit for bit; with `expect_clamps` (ReLU6 on enough values), that both of ReLU6's
// clamps were reached, so that its masks were exercised.
inline void expect_same_outputs(const NormOutputs& got, const NormOutputs& want,
                                bool expect_clamps) {
  expect_same_bits(got.y.values, want.y.values, "y");
  expect_same_bits(got.mean.values, want.mean.values, "saved mean");
  expect_same_bits(got.rstd.values, want.rstd.values, "saved rstd");
  expect_same_bits(got.running_mean.values, want.running_mean.values, "running mean");
  expect_same_bits(got.running_var.values, want.running_var.values, "running var");
  expect_same_bits(got.dx.values, want.dx.values, "dx");
  expect_same_bits(got.dgamma.values, want.dgamma.values, "dgamma");
  expect_same_bits(got.dbeta.values, want.dbeta.values, "dbeta");
  if (expect_clamps) {
    EXPECT_NE(std::count(want.y.values.begin(), want.y.values.end(), 6.0f), 0);
    EXPECT_NE(std::count(want.y.values.begin(), want.y.values.end(), 0.0f), 0);
  }
}

}  // namespace hfta::test
