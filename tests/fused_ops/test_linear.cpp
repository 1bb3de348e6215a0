// Fused linear: fused(B) equals B reference single-model runs; reference gradients equal finite
// differences; bad shapes raise hfta::Error.
#include "fused_ops/linear.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::random_buffer;

struct LinearCase {
  int64_t N, fi, fo;
  bool bias, shared;
};

// Each model is run alone through the reference (B=1 views of its slices) and compared with its
// slice of the fused CPU result: this is the "fused equals serial" contract, literally.
void check_fused_equals_serial(int64_t B, const LinearCase& c, uint64_t seed) {
  HFTA_SEEDED_TRACE(seed);
  SCOPED_TRACE(
      fmt::format("B={} N={} fi={} fo={} bias={} shared={}", B, c.N, c.fi, c.fo, c.bias, c.shared));
  RngStream rng(seed, 0);
  LinearParams p{B, c.N, c.fi, c.fo, c.bias, c.shared};
  Buffer x = random_buffer(p.x_shape(), rng), w = random_buffer(p.weight_shape(), rng);
  Buffer bias = random_buffer(p.bias_shape(), rng), dy = random_buffer(p.y_shape(), rng);
  Buffer y(p.y_shape()), dx(p.x_shape()), dw = random_buffer(p.weight_shape(), rng);
  Buffer db = random_buffer(p.bias_shape(), rng);
  Buffer dw0 = dw, db0 = db;  // accumulate semantics: start from nonzero gradients
  linear_forward(p, {.x = x.view(), .weight = w.view(), .bias = bias.view(), .y = y.view()});
  linear_backward(p, {.x = x.view(),
                      .weight = w.view(),
                      .dy = dy.view(),
                      .dx = dx.view(),
                      .dweight = dw.view(),
                      .dbias = db.view()});

  LinearParams one = p;
  one.B = 1;
  Buffer dx_sum(p.x_shape());
  for (int64_t b = 0; b < B; ++b) {
    auto slice = [&](Buffer& buf, Shape single, bool per_model = true) {
      return TensorView(buf.data() + (per_model ? b * single.numel() : 0), single);
    };
    Buffer yb(one.y_shape()), dxb(one.x_shape());
    Buffer dwb(one.weight_shape()), dbb(one.bias_shape());
    std::copy_n(dw0.data() + b * dwb.numel(), dwb.numel(), dwb.data());
    std::copy_n(db0.data() + b * dbb.numel(), dbb.numel(), dbb.data());
    TensorView xb = slice(x, one.x_shape(), !c.shared);
    ref::linear_forward(one, {.x = xb,
                              .weight = slice(w, one.weight_shape()),
                              .bias = slice(bias, one.bias_shape()),
                              .y = yb.view()});
    ref::linear_backward(one, {.x = xb,
                               .weight = slice(w, one.weight_shape()),
                               .dy = slice(dy, one.y_shape()),
                               .dx = dxb.view(),
                               .dweight = dwb.view(),
                               .dbias = dbb.view()});
    // fp32 GEMM vs double-accumulated reference: error grows like sqrt(K) * 2^-24 * |terms|.
    const double tol = 1e-5 * std::sqrt(double(std::max({c.fi, c.fo, c.N})));
    expect_close(y.data() + b * yb.numel(), yb.data(), yb.numel(), tol, tol, "forward");
    expect_close(dw.data() + b * dwb.numel(), dwb.data(), dwb.numel(), tol, tol, "weight grad");
    if (c.bias)
      expect_close(db.data() + b * dbb.numel(), dbb.data(), dbb.numel(), tol, tol, "bias grad");
    if (c.shared) {
      for (int64_t i = 0; i < dxb.numel(); ++i) dx_sum.values[i] += dxb.values[i];
    } else {
      expect_close(dx.data() + b * dxb.numel(), dxb.data(), dxb.numel(), tol, tol, "input grad");
    }
  }
  if (c.shared) {
    const double tol = 1e-5 * std::sqrt(double(B * c.fo));
    expect_close(dx, dx_sum, tol, tol, "shared input grad (sum over models)");
  }
}

TEST(Linear, FusedEqualsSerial) {
  const LinearCase cases[] = {
      {1, 1, 1, true, false},    {5, 7, 3, true, false}, {4, 13, 9, false, false},
      {17, 33, 65, true, false}, {6, 5, 4, true, true},  {9, 31, 17, false, true},
      {64, 784, 32, true, true},
  };
  uint64_t seed = test::seed_for_test();
  for (int64_t B : test::model_counts())
    for (const auto& c : cases) check_fused_equals_serial(B, c, seed++);
}

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
