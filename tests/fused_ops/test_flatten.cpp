// Flatten ([N, B*C, H, W] -> [B, N, C*H*W]): fused(B) equals B single-model flattens, the CPU
// kernel equals the reference, backward is the exact inverse, the reference gradient equals
// finite differences, and bad shapes raise hfta::Error. A permutation moves floats without
// arithmetic, so every comparison here is exact.
#include <algorithm>
#include <cstring>
#include <string>

#include "fused_ops/flatten.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::random_buffer;

struct FlattenCase {
  int64_t N, C, H, W;
};

const FlattenCase kCases[] = {
    {1, 1, 1, 1}, {2, 3, 5, 7}, {3, 1, 4, 4}, {5, 6, 1, 1}, {4, 16, 5, 5}, {7, 2, 3, 1},
};

// Model b's channels [b*C, (b+1)*C) of a fused [N, B*C, H, W] tensor, as its own [N, C, H, W].
Buffer channel_slice(const Buffer& t, int64_t b, int64_t C) {
  const int64_t N = t.shape[0], BC = t.shape[1], HW = t.shape[2] * t.shape[3];
  Buffer out(Shape{N, C, t.shape[2], t.shape[3]});
  for (int64_t n = 0; n < N; ++n)
    std::copy_n(t.values.data() + (n * BC + b * C) * HW, C * HW, out.data() + n * C * HW);
  return out;
}

void expect_identical(const float* actual, const float* expected, int64_t n,
                      const std::string& what) {
  EXPECT_EQ(std::memcmp(actual, expected, sizeof(float) * n), 0) << what << " differs";
}

void check_fused_equals_serial(int64_t B, const FlattenCase& c, uint64_t seed) {
  HFTA_SEEDED_TRACE(seed);
  SCOPED_TRACE(fmt::format("B={} N={} C={} H={} W={}", B, c.N, c.C, c.H, c.W));
  const FlattenParams p{B, c.N, c.C, c.H, c.W};
  RngStream rng(seed, 0);
  Buffer x = test::random_buffer(p.x_shape(), rng), dy = test::random_buffer(p.y_shape(), rng);
  Buffer y = test::random_buffer(p.y_shape(), rng);   // garbage: forward must overwrite it
  Buffer dx = test::random_buffer(p.x_shape(), rng);  // garbage: dx is written (=)
  flatten_forward(p, {.x = x.view(), .y = y.view()});
  flatten_backward(p, {.dy = dy.view(), .dx = dx.view()});

  // The fused CPU kernel equals the fused reference.
  Buffer y_ref(p.y_shape()), dx_ref(p.x_shape());
  ref::flatten_forward(p, {.x = x.view(), .y = y_ref.view()});
  ref::flatten_backward(p, {.dy = dy.view(), .dx = dx_ref.view()});
  expect_identical(y.data(), y_ref.data(), y.numel(), "fused forward vs reference");
  expect_identical(dx.data(), dx_ref.data(), dx.numel(), "fused backward vs reference");

  // Model b alone: flatten of its [N, C, H, W] slice, which for B = 1 is a plain copy.
  const FlattenParams one{1, c.N, c.C, c.H, c.W};
  const int64_t rows = c.N * p.features();
  for (int64_t b = 0; b < B; ++b) {
    SCOPED_TRACE(fmt::format("model b={}", b));
    Buffer xb = channel_slice(x, b, c.C), yb(one.y_shape()), dxb(one.x_shape());
    ref::flatten_forward(one, {.x = xb.view(), .y = yb.view()});
    expect_identical(yb.data(), xb.data(), rows, "single-model flatten is a copy");
    expect_identical(y.data() + b * rows, yb.data(), rows, "forward");
    ref::flatten_backward(
        one, {.dy = TensorView(dy.data() + b * rows, one.y_shape()), .dx = dxb.view()});
    Buffer dx_slice = channel_slice(dx, b, c.C);
    expect_identical(dx_slice.data(), dxb.data(), rows, "input grad");
  }

  // Round trips: backward(forward(x)) == x and forward(backward(dy)) == dy.
  Buffer x_back(p.x_shape()), dy_back(p.y_shape());
  flatten_backward(p, {.dy = y.view(), .dx = x_back.view()});
  flatten_forward(p, {.x = dx.view(), .y = dy_back.view()});
  expect_identical(x_back.data(), x.data(), x.numel(), "backward(forward(x))");
  expect_identical(dy_back.data(), dy.data(), dy.numel(), "forward(backward(dy))");
}

TEST(Flatten, FusedEqualsSerial) {
  uint64_t seed = test::seed_for_test();
  for (int64_t B : test::model_counts())
    for (const FlattenCase& c : kCases) check_fused_equals_serial(B, c, seed++);
}

// Where one element lands, by hand: x[n=1, b*C + c = 1*2 + 1, h=2, w=0] with B=2, C=2, H=3,
// W=2 goes to y[b=1, n=1, (c*H + h)*W + w = 10].
TEST(Flatten, ElementPlacementByHand) {
  const FlattenParams p{2, 2, 2, 3, 2};
  Buffer x(p.x_shape()), y(p.y_shape());
  x.values[((1 * 4 + 3) * 3 + 2) * 2 + 0] = 42.0f;
  flatten_forward(p, {.x = x.view(), .y = y.view()});
  EXPECT_EQ(y.values[(1 * 2 + 1) * 12 + 10], 42.0f);
  EXPECT_EQ(std::count(y.values.begin(), y.values.end(), 0.0f), y.numel() - 1);
}

TEST(Flatten, ReferenceGradientMatchesFiniteDifferences) {
  uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 1);
  const FlattenParams p{3, 2, 2, 3, 2};
  Buffer x = test::random_buffer(p.x_shape(), rng), g = random_buffer(p.y_shape(), rng);
  Buffer y(p.y_shape()), dx(p.x_shape());
  auto forward = [&] { ref::flatten_forward(p, {.x = x.view(), .y = y.view()}); };
  forward();
  ref::flatten_backward(p, {.dy = g.view(), .dx = dx.view()});
  // Each input moves to one output unchanged: the quotient is g at that output, up to the
  // rounding of x +- eps (u|x| / eps ~ 1e-5 relative for |x| <= 1, eps = 1e-2).
  const double eps = 1e-2, tol = 1e-4;
  test::expect_gradient_matches_finite_differences(forward, x, y, g, dx, eps, tol, tol, "dx");
}

void expect_error_containing(const std::function<void()>& call, const std::string& text) {
  try {
    call();
    ADD_FAILURE() << "expected hfta::Error containing: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(Flatten, BadShapesRaiseClearErrors) {
  const FlattenParams p{2, 3, 4, 5, 6};
  Buffer x(p.x_shape()), y(p.y_shape());
  // The linear layout is model-major; a [N, B, F] buffer is a common mistake.
  Buffer wrong_y(Shape{3, 2, 120});
  expect_error_containing([&] { flatten_forward(p, {.x = x.view(), .y = wrong_y.view()}); },
                          "flatten output has shape [3, 2, 120], expected [2, 3, 120]");
  expect_error_containing([&] { flatten_forward(p, {.x = y.view(), .y = y.view()}); },
                          "flatten input has shape [2, 3, 120], expected [3, 8, 5, 6]");
  expect_error_containing([&] { flatten_backward(p, {.dy = x.view(), .dx = x.view()}); },
                          "flatten output gradient has shape");
  expect_error_containing([&] { flatten_backward(p, {.dy = y.view(), .dx = TensorView()}); },
                          "flatten input gradient is missing");
  FlattenParams bad = p;
  bad.H = 0;
  expect_error_containing([&] { flatten_forward(bad, {.x = x.view(), .y = y.view()}); },
                          "flatten sizes must be positive, got B=2 N=3 C=4 H=0 W=6");
}

TEST(Flatten, AccumulateDxAddsToDx) {
  const uint64_t seed = test::case_seed("Flatten.AccumulateDxAddsToDx");
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 0);
  for (int64_t B : {1, 3})
    for (bool fast : {true, false}) {
      const FlattenParams p{B, 4, 3, 5, 7};
      Buffer dy = test::random_buffer(p.y_shape(), rng);
      test::expect_dx_accumulates(
          [&](TensorView dx, bool acc) {
            const FlattenBackwardArgs a{.dy = dy.view(), .dx = dx, .accumulate_dx = acc};
            fast ? flatten_backward(p, a) : ref::flatten_backward(p, a);
          },
          p.x_shape(), seed, fmt::format("B={} fast={}", B, fast));
    }
}

}  // namespace
}  // namespace hfta
