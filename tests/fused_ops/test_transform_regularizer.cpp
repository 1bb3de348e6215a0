// The T-Net regularizer (PointNet's feature transform): hand-computed losses and gradients (the
// identity, at the norm's kink, and a scaled identity); fused(B) equals B reference runs on the
// op harness (k from 1 to 64 with the input and feature T-Nets' 3 and 64, N from 1 to 7, scale 1
// and PointNet's 0.001, accumulate_dx, finite differences), on the CPU and on the GPU; the
// deterministic check gives model b the bits of a B = 1 run; bad shapes raise hfta::Error.
// Tolerances: the loss differs from the double reference by its final rounding (the norms'
// squares are rounded before each add, the reference may fuse them); the gradient keeps M in
// float and sums float products, so each element is within 2^-22 * 2|g| sum_l |M_il A_lj| of the
// reference, plus its own rounding.
#include <cmath>
#include <limits>

#include "fused_ops/transform_regularizer.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_error_containing;
using test::OpCase;
using test::Role;
using test::TensorSpec;

TEST(TransformRegularizer, IdentityIsFreeAndHasNoGradient) {
  const TransformRegularizerParams p{.B = 2, .N = 3, .k = 4, .scale = 0.001f};
  Buffer a(p.a_shape()), loss(p.loss_shape(), 7.0f), dloss(p.loss_shape(), 1.0f);
  for (int64_t m = 0; m < p.B * p.N; ++m)
    for (int64_t i = 0; i < p.k; ++i) a.values[(m * p.k + i) * p.k + i] = 1.0f;
  transform_regularizer_forward(p, {.a = a.view(), .loss = loss.view()});
  EXPECT_EQ(loss.values, (std::vector<float>{0.0f, 0.0f}));
  Buffer da(p.a_shape(), std::numeric_limits<float>::quiet_NaN());
  transform_regularizer_backward(p, {.a = a.view(), .dloss = dloss.view(), .da = da.view()});
  for (float v : da.values) ASSERT_EQ(v, 0.0f) << "M = 0: the norm's kink takes no gradient";
}

// A = 2I (k = 2): M = 3I, ||M|| = 3 sqrt(2); da = 2 g M A = 12 g I with g = dloss scale / N /
// ||M||.
TEST(TransformRegularizer, ScaledIdentityByHand) {
  const TransformRegularizerParams p{.B = 1, .N = 2, .k = 2, .scale = 0.5f};
  Buffer a(p.a_shape()), loss(p.loss_shape()), dloss(p.loss_shape(), 3.0f);
  a.values = {2, 0, 0, 2, /* sample 1 */ 2, 0, 0, 2};
  transform_regularizer_forward(p, {.a = a.view(), .loss = loss.view()});
  EXPECT_FLOAT_EQ(loss.values[0], 0.5f * 3.0f * std::sqrt(2.0f));
  Buffer da(p.a_shape(), 1.0f);
  transform_regularizer_backward(
      p, {.a = a.view(), .dloss = dloss.view(), .da = da.view(), .accumulate_dx = true});
  const double g = 3.0 * 0.5 / 2.0 / (3.0 * std::sqrt(2.0));
  for (int64_t e = 0; e < 8; ++e)
    EXPECT_FLOAT_EQ(da.values[e],
                    1.0f + (e % 4 == 0 || e % 4 == 3 ? static_cast<float>(12.0 * g) : 0.0f))
        << "element " << e;
}

// The arithmetic PointNet's regularizer node had before it became this op, written out here
// independently: M in double from float products, its squares each rounded before the add, M kept
// in float for the gradient's float products summed in double. The op gives exactly its bits, so
// the PointNet models' losses and gradients did not change.
TEST(TransformRegularizer, KeepsTheNodesArithmetic) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 0);
  for (int64_t k : {3, 17, 64}) {
    const TransformRegularizerParams p{.B = 3, .N = 4, .k = k, .scale = 0.001f};
    Buffer a = test::random_buffer(p.a_shape(), rng),
           dloss = test::random_buffer(p.loss_shape(), rng);
    Buffer loss(p.loss_shape()), da(p.a_shape());
    transform_regularizer_forward(p, {.a = a.view(), .loss = loss.view()});
    transform_regularizer_backward(p, {.a = a.view(), .dloss = dloss.view(), .da = da.view()});
    std::vector<float> want_loss, want_da(da.values.size());
    for (int64_t b = 0; b < p.B; ++b) {
      double sum = 0.0;
      for (int64_t s = 0; s < p.N; ++s) {
        const float* as = a.values.data() + (b * p.N + s) * k * k;
        std::vector<float> m(static_cast<size_t>(k * k));
        double sq = 0.0;
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < k; ++j) {
            double acc = 0.0;
            for (int64_t l = 0; l < k; ++l) acc += double(as[i * k + l]) * double(as[j * k + l]);
            if (i == j) acc -= 1.0;
            m[static_cast<size_t>(i * k + j)] = static_cast<float>(acc);
            volatile double square = acc * acc;
            sq += square;
          }
        const double norm = std::sqrt(sq);
        sum += norm;
        volatile float product = dloss.values[b] * p.scale;
        const double g = norm > 0.0 ? double(product) / double(p.N) / norm : 0.0;
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < k; ++j) {
            double acc = 0.0;
            for (int64_t l = 0; l < k; ++l)
              acc += static_cast<double>(m[static_cast<size_t>(i * k + l)] * as[l * k + j]);
            want_da[static_cast<size_t>((b * p.N + s) * k * k + i * k + j)] =
                static_cast<float>(2.0 * g * acc);
          }
      }
      want_loss.push_back(static_cast<float>(double(p.scale) * sum / double(p.N)));
    }
    test::expect_same_bits(loss.values, want_loss, fmt::format("loss, k={}", k));
    test::expect_same_bits(da.values, want_da, fmt::format("da, k={}", k));
  }
}

TEST(TransformRegularizer, BadShapesAreErrors) {
  const TransformRegularizerParams p{.B = 2, .N = 1, .k = 3};
  Buffer a(p.a_shape()), loss(p.loss_shape()), wrong(Shape{2, 1, 3, 2});
  expect_error_containing(
      [&] { transform_regularizer_forward(p, {.a = wrong.view(), .loss = loss.view()}); },
      "transform_regularizer input has shape [2, 1, 3, 2], expected [2, 1, 3, 3]");
  expect_error_containing(
      [&] { transform_regularizer_forward(p, {.a = a.view(), .loss = a.view()}); },
      "transform_regularizer loss has shape");
  expect_error_containing(
      [&] {
        transform_regularizer_backward(p,
                                       {.a = a.view(), .dloss = loss.view(), .da = wrong.view()});
      },
      "transform_regularizer input gradient has shape");
  expect_error_containing(
      [&] {
        transform_regularizer_backward(p, {.a = a.view(), .dloss = loss.view(), .da = a.view()});
      },
      "give it its own buffer");
  TransformRegularizerParams bad = p;
  bad.k = 0;
  expect_error_containing(
      [&] { transform_regularizer_forward(bad, {.a = a.view(), .loss = loss.view()}); },
      "sizes must be positive");
  bad = p;
  bad.scale = std::numeric_limits<float>::infinity();
  expect_error_containing(
      [&] { transform_regularizer_forward(bad, {.a = a.view(), .loss = loss.view()}); },
      "scale is inf");
}

// ---- the op harness (tests/op_harness.h): fused(B) equals B single-model references ----

struct TransformRegularizerOp {
  using Params = TransformRegularizerParams;
  static std::string describe(const TransformRegularizerParams& p) {
    return fmt::format("N={} k={} scale={}", p.N, p.k, p.scale);
  }
  static std::vector<TensorSpec> tensors(const TransformRegularizerParams& p,
                                         const OpCase<TransformRegularizerParams>& c) {
    std::vector<TensorSpec> t = {
        {.name = "a", .shape = p.a_shape()},
        {.name = "dloss", .shape = p.loss_shape(), .lo = 0.5f, .hi = 2.0f},
        {.name = "loss", .shape = p.loss_shape(), .role = Role::kOutput, .atol = 0.0, .rtol = 0.0}};
    if (!c.no_dx) t.push_back({.name = "da", .shape = p.a_shape(), .role = Role::kInputGrad});
    return t;
  }
  static void run(const TransformRegularizerParams& p, const test::Views& v,
                  const test::RunContext& ctx) {
    (ctx.ref ? ref::transform_regularizer_forward : transform_regularizer_forward)(
        p, {.a = v("a"), .loss = v("loss")});
    if (ctx.forward_only) return;
    (ctx.ref ? ref::transform_regularizer_backward : transform_regularizer_backward)(
        p, {.a = v("a"), .dloss = v("dloss"), .da = v("da"), .accumulate_dx = ctx.accumulate_dx});
  }
  // See the top of the file; from model b's reference inputs.
  static std::pair<double, double> tolerance(const TransformRegularizerParams& q,
                                             const test::Views& v, const TensorSpec& spec) {
    const double eps = std::ldexp(1.0, -24);
    if (spec.name == "loss") return {0.0, 2 * eps};
    const TensorView a = v("a");
    const int64_t k = q.k, kk = k * k;
    double bound = 0.0;
    std::vector<double> m(static_cast<size_t>(kk));
    for (int64_t s = 0; s < q.N; ++s) {
      const float* as = a.data + s * kk;
      double sq = 0.0;
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < k; ++j) {
          double acc = i == j ? -1.0 : 0.0;
          for (int64_t l = 0; l < k; ++l) acc += double(as[i * k + l]) * as[j * k + l];
          m[static_cast<size_t>(i * k + j)] = acc;
          sq += acc * acc;
        }
      const double g = std::fabs(double(v("dloss").data[0]) * q.scale / q.N) / std::sqrt(sq);
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < k; ++j) {
          double sum = 0.0;
          for (int64_t l = 0; l < k; ++l)
            sum += std::fabs(m[static_cast<size_t>(i * k + l)] * as[l * k + j]);
          bound = std::max(bound, 2.0 * g * sum);
        }
    }
    return {4 * eps * bound, 2 * eps};
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() {
    return {{"loss", "dloss"}};
  }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() { return {{"a", "da"}}; }
  // The loss is rounded to float (|loss| ~ 1 at scale 1, k = 3): 2^-24 / eps of rounding, and
  // the norm's curvature gives O(eps^2) truncation.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-3, 5e-4, 5e-3}; }
};

std::vector<OpCase<TransformRegularizerParams>> regularizer_cases() {
  const struct {
    int64_t N, k;
    float scale;
    bool fd = false;
  } sizes[] = {{1, 1, 1.0f},       {2, 2, 1.0f},      {3, 3, 0.001f}, {7, 3, 1.0f},
               {2, 5, 0.001f},     {1, 16, 1.0f},     {2, 17, 1.0f},  {2, 64, 0.001f},
               {2, 3, 1.0f, true}, {1, 2, 1.0f, true}};
  std::vector<OpCase<TransformRegularizerParams>> cases;
  int i = 0;
  for (const auto& s : sizes)
    for (int64_t B : test::model_counts()) {
      OpCase<TransformRegularizerParams> c;
      c.p = TransformRegularizerParams{.N = s.N, .k = s.k, .scale = s.scale};
      c.B = B;
      c.threads = 1 + (i % 3);
      c.accumulate_dx = (s.N + s.k + B) % 2 == 1;
      c.no_dx = s.k == 5 && B == 2;
      c.fd = s.fd && B == 1;
      ++i;
      c.name = fmt::format("N{}_k{}_s{}_B{}_t{}{}{}{}", s.N, s.k, s.scale == 1.0f ? "1" : "0001", B,
                           c.threads, c.accumulate_dx ? "_acc" : "", c.no_dx ? "_nodx" : "",
                           c.fd ? "_fd" : "");
      cases.push_back(c);
    }
  return cases;
}

class TransformRegularizerHarness
    : public ::testing::TestWithParam<OpCase<TransformRegularizerParams>> {};
TEST_P(TransformRegularizerHarness, FusedEqualsSerial) {
  test::run_case<TransformRegularizerOp>(GetParam());
}
INSTANTIATE_TEST_SUITE_P(Cases, TransformRegularizerHarness,
                         ::testing::ValuesIn(regularizer_cases()), test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCuda, TransformRegularizerHarness,
                         ::testing::ValuesIn(test::device_cases<TransformRegularizerOp>(
                             regularizer_cases(), Device::kCuda)),
                         test::CaseName());

}  // namespace
}  // namespace hfta
