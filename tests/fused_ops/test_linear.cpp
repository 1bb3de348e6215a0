// Fused linear: fused(B) equals B reference single-model runs; reference gradients equal finite
// differences; bad shapes raise hfta::Error.
#include "fused_ops/linear.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::random_buffer;

using test::Layout;
using test::OpCase;
using test::Role;
using test::TensorSpec;

struct LinearOp {
  using Params = LinearParams;
  static std::string describe(const LinearParams& p) {
    return fmt::format("N={} fi={} fo={} bias={} shared={}", p.N, p.in_features, p.out_features,
                       p.bias, p.shared_input);
  }
  static std::vector<TensorSpec> tensors(const LinearParams& p, const OpCase<LinearParams>& c) {
    // fp32 GEMM vs the double-accumulated reference: error grows like sqrt(K) * 2^-24 * |terms|.
    const double tol = 1e-5 * std::sqrt(double(std::max({p.in_features, p.out_features, p.N})));
    const Layout xl = p.shared_input ? Layout::kShared : Layout::kModelMajor;
    std::vector<TensorSpec> t = {
        {.name = "x", .shape = p.x_shape(), .layout = xl},
        {.name = "weight", .shape = p.weight_shape()},
        {.name = "dy", .shape = p.y_shape()},
        {.name = "y", .shape = p.y_shape(), .role = Role::kOutput, .atol = tol, .rtol = tol},
        {.name = "dweight",
         .shape = p.weight_shape(),
         .role = Role::kParamGrad,
         .atol = tol,
         .rtol = tol},
    };
    if (p.bias) {
      t.push_back({.name = "bias", .shape = p.bias_shape()});
      t.push_back({.name = "dbias",
                   .shape = p.bias_shape(),
                   .role = Role::kParamGrad,
                   .atol = tol,
                   .rtol = tol});
    }
    if (!c.no_dx)
      t.push_back({.name = "dx",
                   .shape = p.x_shape(),
                   .layout = xl,
                   .role = Role::kInputGrad,
                   .atol = tol,
                   .rtol = tol});
    return t;
  }
  static void run(const LinearParams& p, const test::Views& v, const test::RunContext& ctx) {
    const LinearForwardArgs f{.x = v("x"), .weight = v("weight"), .bias = v("bias"), .y = v("y")};
    const LinearBackwardArgs b{.x = v("x"),
                               .weight = v("weight"),
                               .dy = v("dy"),
                               .dx = v("dx"),
                               .dweight = v("dweight"),
                               .dbias = v("dbias"),
                               .accumulate_dx = ctx.accumulate_dx,
                               .accumulate_dparams = !ctx.write_dparams};
    if (ctx.ref) {
      ref::linear_forward(p, f);
      if (!ctx.forward_only) ref::linear_backward(p, b);
    } else {
      linear_forward(p, f);
      linear_backward(p, b);
    }
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() {
    return {{"x", "dx"}, {"weight", "dweight"}, {"bias", "dbias"}};
  }
  // Linear in every input: no truncation error, rounding ~1e-7/eps.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 2e-4, 2e-4}; }
};

// Sizes on both sides of cpu/linear.cpp's switches: the column split (B < threads and
// out_features >= 128: blocks of ceil(fo/splits) rounded up to 16 columns), the input gradient's
// column blocks (in_features >= 1024: in_features / 512 blocks, the last one shorter), SIMD width
// 16, B below / equal to / above the thread count (2), both GEMM libraries.
std::vector<OpCase<LinearParams>> linear_cases() {
  struct Size {
    int64_t N, fi, fo;
  };
  const Size sizes[] = {{1, 1, 1},    {5, 7, 3},    {4, 13, 15},  {3, 16, 16}, {6, 17, 17},
                        {9, 31, 127}, {8, 33, 128}, {7, 20, 129}, {5, 9, 144}, {64, 784, 32},
                        {2, 1023, 3}, {3, 1024, 5}, {4, 1552, 17}};
  std::vector<OpCase<LinearParams>> cases;
  for (const Size& s : sizes)
    for (int64_t B : {1, 2, 3})
      for (bool shared : {false, true}) {
        for (auto gemm : {cpu::GemmBackend::kOneDnn, cpu::GemmBackend::kOpenBlas}) {
          OpCase<LinearParams> c;
          c.p = LinearParams{.N = s.N,
                             .in_features = s.fi,
                             .out_features = s.fo,
                             .bias = (s.fo % 2) == 1,
                             .shared_input = shared};
          c.B = B;
          c.gemm = gemm;
          c.accumulate_dx = (s.fi + B) % 2 == 0;
          c.write_dparams = (s.N + B + (shared ? 1 : 0)) % 2 == 1;  // a step's first backward
          c.no_dx = shared && s.fo == 32;  // the first layer of an MLP: no dx
          c.fd = s.N * s.fi * s.fo <= 256 && B == 1;
          c.name = fmt::format("N{}_fi{}_fo{}_B{}{}{}{}{}{}", s.N, s.fi, s.fo, B,
                               shared ? "_shared" : "", c.p.bias ? "" : "_nobias",
                               gemm == cpu::GemmBackend::kOneDnn ? "_onednn" : "_openblas",
                               c.accumulate_dx ? "_acc" : "", c.write_dparams ? "_wdp" : "") +
                   (c.no_dx ? "_nodx" : "");
          cases.push_back(c);
        }
      }
  // One thread (every B is >= threads) and forced parallelism modes go through the same runner.
  for (int64_t B : {1, 3}) {
    OpCase<LinearParams> c;
    c.p = LinearParams{.N = 6, .in_features = 17, .out_features = 130, .bias = true};
    c.B = B;
    c.threads = 1;
    c.accumulate_dx = B == 3;
    c.name = fmt::format("N6_fi17_fo130_B{}_threads1{}", B, c.accumulate_dx ? "_acc" : "");
    cases.push_back(c);
  }
  return cases;
}

class LinearHarness : public ::testing::TestWithParam<OpCase<LinearParams>> {};
TEST_P(LinearHarness, FusedEqualsSerial) { test::run_case<LinearOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, LinearHarness, ::testing::ValuesIn(linear_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCuda, LinearHarness,
                         ::testing::ValuesIn(test::device_cases<LinearOp>(linear_cases(),
                                                                          Device::kCuda)),
                         test::CaseName());

TEST(Linear, ReferenceGradientsMatchFiniteDifferences) {
  for (bool shared : {false, true}) {
    uint64_t seed = test::seed_for_test();
    HFTA_SEEDED_TRACE(seed);
    RngStream rng(seed, 1);
    LinearParams p{2, 3, 4, 5, true, shared};
    Buffer x = random_buffer(p.x_shape(), rng), w = random_buffer(p.weight_shape(), rng);
    Buffer bias = random_buffer(p.bias_shape(), rng), g = random_buffer(p.y_shape(), rng);
    Buffer y(p.y_shape()), dx(p.x_shape()), dw(p.weight_shape()), db(p.bias_shape());
    auto forward = [&] {
      ref::linear_forward(p,
                          {.x = x.view(), .weight = w.view(), .bias = bias.view(), .y = y.view()});
    };
    forward();
    ref::linear_backward(p, {.x = x.view(),
                             .weight = w.view(),
                             .dy = g.view(),
                             .dx = dx.view(),
                             .dweight = dw.view(),
                             .dbias = db.view()});
    // Linear in every input: truncation error is zero, rounding ~1e-7/eps.
    const double eps = 1e-2, tol = 2e-4;
    test::expect_gradient_matches_finite_differences(forward, x, y, g, dx, eps, tol, tol, "dx");
    test::expect_gradient_matches_finite_differences(forward, w, y, g, dw, eps, tol, tol, "dw");
    test::expect_gradient_matches_finite_differences(forward, bias, y, g, db, eps, tol, tol, "db");
  }
}

TEST(Linear, BadShapesRaiseClearErrors) {
  LinearParams p{2, 3, 4, 5, true, false};
  Buffer x(p.x_shape()), w(p.weight_shape()), bias(p.bias_shape()), y(p.y_shape());
  Buffer wrong_w(Shape{2, 5, 4});
  try {
    linear_forward(p,
                   {.x = x.view(), .weight = wrong_w.view(), .bias = bias.view(), .y = y.view()});
    FAIL() << "expected hfta::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("linear weight has shape [2, 5, 4], expected [2, 4, 5]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(
      linear_forward(p, {.x = x.view(), .weight = w.view(), .bias = TensorView(), .y = y.view()}),
      Error);
  LinearParams bad = p;
  bad.N = 0;
  EXPECT_THROW(
      linear_forward(bad, {.x = x.view(), .weight = w.view(), .bias = bias.view(), .y = y.view()}),
      Error);
  Buffer wrong_dx(Shape{2, 3, 5});
  EXPECT_THROW(linear_backward(p, {.x = x.view(),
                                   .weight = w.view(),
                                   .dy = y.view(),
                                   .dx = wrong_dx.view(),
                                   .dweight = w.view(),
                                   .dbias = bias.view()}),
               Error);
}

}  // namespace
}  // namespace hfta
