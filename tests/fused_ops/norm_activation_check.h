// What tests/fused_ops/test_batchnorm2d.cpp and test_batchnorm1d.cpp share: their op harness
// cases' settings, and the bit-for-bit test of a BatchNorm's fused activation against BatchNorm
// and then the activation op, as a Net runs them apart (the activation in place over BatchNorm's
// output, its gradient in a buffer of its own).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "fused_ops/activation.h"
#include "op_harness.h"
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

// The settings a BatchNorm harness case (its Size `s`: affine, momentum, offset, eps) gets in
// both tables. `mode`: 0 training, 1 training without running statistics, 2 eval; `spread` (a
// sum of the shape's sizes) varies which cases accumulate into dx; `k` counts the cases and
// gives them 1-3 threads.
template <typename Case, typename Size>
void set_batchnorm_case(Case& c, const Size& s, int mode, int64_t B, int64_t spread, int& k) {
  c.p.running = mode != 1;
  c.p.offset = s.offset;
  c.B = B;
  c.threads = 1 + (k++ % 3);
  c.accumulate_dx = (spread + B + mode) % 2 == 1;
  c.no_dx = s.affine && B == 2 && mode == 1;
}

// A BatchNorm harness case's name after its shape: "_B2_train_noaffine_m1_offset_t2_acc_relu6".
template <typename Case, typename Size>
std::string batchnorm_case_name(const Case& c, const Size& s, int mode) {
  return fmt::format(
      "_B{}_{}{}_m{}{}{}_t{}{}{}{}{}", c.B,
      mode == 2   ? "eval"
      : mode == 1 ? "train_norun"
                  : "train",
      s.affine ? "" : "_noaffine", int(s.momentum * 10), s.offset != 0 ? "_offset" : "",
      s.eps > 1e-3 ? "_bigeps" : "", c.threads, c.accumulate_dx ? "_acc" : "",
      c.no_dx ? "_nodx" : "", c.fd ? "_fd" : "",
      c.p.bn.activation ? std::string("_") + activation_name(c.p.bn.activation->kind) : "");
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
