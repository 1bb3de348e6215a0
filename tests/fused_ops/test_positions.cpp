// Fused position encodings on the op harness (tests/op_harness.h): fused(B) equals B reference
// single-model runs, learned ([B, P, D] per-model tables, P > T) and sinusoidal (one shared
// table), with x_scale, in place, accumulate_dx and without dx; reference gradients equal finite
// differences; the sinusoidal table matches PyTorch's formula by hand; bad shapes raise
// hfta::Error.
#include <cmath>

#include "fused_ops/positions.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::OpCase;
using test::Role;
using test::TensorSpec;

constexpr double kUnitRoundoff = 1.0 / (1 << 24);

struct PosP {
  int64_t B = 1;
  PositionsParams pos;
  bool in_place = false;  // the fast path runs y over x and (unless accumulating) dx over dy
  PositionsParams params() const {
    PositionsParams p = pos;
    p.B = B;
    return p;
  }
};

struct PositionsOp {
  using Params = PosP;
  static std::string describe(const PosP& q) {
    const PositionsParams p = q.params();
    return fmt::format("n={} T={} D={} {} P={} x_scale={} in_place={}", p.n, p.T, p.D,
                       p.kind == PositionKind::kLearned ? "learned" : "sinusoidal", p.table_rows(),
                       p.x_scale, q.in_place);
  }
  // y = x_scale * x + pe with |x|, |pe| <= 1: the kernel rounds the product and the sum (or fuses
  // them in an FMA), the reference rounds the double result to float (twice, through double): a
  // few roundings of |x_scale| + 1. dx the same (x_scale * dy, plus the start when accumulating).
  // dtable: the same double sum in the same order, added once: exact.
  static std::vector<TensorSpec> tensors(const PosP& q, const OpCase<PosP>& c) {
    const PositionsParams p = q.params();
    const bool learned = p.kind == PositionKind::kLearned;
    const double t = 2.0 * kUnitRoundoff * (std::fabs(p.x_scale) + 1.0);
    std::vector<TensorSpec> s = {
        {.name = "x", .shape = p.x_shape()},
        {.name = "table",
         .shape = p.table_shape(),
         .layout = learned ? test::Layout::kModelMajor : test::Layout::kShared},
        {.name = "dy", .shape = p.x_shape()},
        {.name = "y", .shape = p.x_shape(), .role = Role::kOutput, .atol = t, .rtol = 0.0},
    };
    if (!c.no_dx)
      s.push_back(
          {.name = "dx", .shape = p.x_shape(), .role = Role::kInputGrad, .atol = t, .rtol = 0.0});
    if (learned)
      s.push_back({.name = "dtable",
                   .shape = p.table_shape(),
                   .role = Role::kParamGrad,
                   .atol = 0.0,
                   .rtol = 0.0});
    return s;
  }
  static void run(const PosP& q, const test::Views& v, const test::RunContext& ctx) {
    const PositionsParams p = q.params();
    const TensorView x = v("x"), y = v("y"), dy = v("dy"), dx = v("dx");
    const bool in_place = q.in_place && !ctx.ref;
    if (in_place) test::copy_values(x, y);
    (ctx.ref ? ref::positions_forward : positions_forward)(
        p, {.x = in_place ? y : x, .table = v("table"), .y = y});
    if (ctx.forward_only) return;
    const bool dx_in_place = in_place && !ctx.accumulate_dx && !dx.empty();
    if (dx_in_place) test::copy_values(dy, dx);
    (ctx.ref ? ref::positions_backward : positions_backward)(p,
                                                             {.dy = dx_in_place ? dx : dy,
                                                              .dx = dx,
                                                              .dtable = v("dtable"),
                                                              .accumulate_dx = ctx.accumulate_dx});
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() {
    return {{"x", "dx"}, {"table", "dtable"}};
  }
  // Linear: no truncation error; rounding ~ 2^-24 |L| / eps.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 1e-4, 1e-4}; }
};

// D below, at and above 16-float vectors; T not a multiple of 16; P = T and P > T; one and
// several sequences; x_scale 1 and sqrt(D).
std::vector<OpCase<PosP>> positions_cases() {
  struct Size {
    int64_t n, T, D, P;
    PositionKind kind;
    bool scaled;
  };
  const PositionKind kL = PositionKind::kLearned, kS = PositionKind::kSinusoidal;
  const Size sizes[] = {
      {1, 1, 1, 0, kL, false},    {2, 3, 4, 5, kL, false},    {3, 5, 7, 0, kS, true},
      {4, 17, 16, 20, kL, true},  {2, 33, 15, 0, kL, false},  {5, 32, 128, 35, kL, true},
      {3, 31, 65, 64, kS, false}, {20, 32, 128, 0, kS, true}, {2, 3, 3, 4, kL, true},
  };
  std::vector<OpCase<PosP>> cases;
  int k = 0;
  for (const Size& s : sizes)
    for (int64_t B : test::model_counts())
      for (bool in_place : {false, true}) {
        OpCase<PosP> c;
        c.p.pos = PositionsParams{.n = s.n,
                                  .T = s.T,
                                  .D = s.D,
                                  .kind = s.kind,
                                  .P = s.P,
                                  .x_scale = s.scaled ? std::sqrt(float(s.D)) : 1.0f};
        c.p.in_place = in_place;
        c.B = B;
        c.threads = 1 + (k++ % 2);
        c.accumulate_dx = (s.n + s.T + B + int(in_place)) % 2 == 1;
        c.no_dx = B == 3 && in_place && s.kind == kL;
        c.fd = B == 1 && !in_place && s.n * s.T * s.D <= 64;
        c.name = fmt::format("n{}_T{}_D{}_P{}_{}{}_B{}_t{}{}{}{}{}", s.n, s.T, s.D, s.P,
                             s.kind == kL ? "learned" : "sin", s.scaled ? "_scaled" : "", B,
                             c.threads, in_place ? "_inplace" : "", c.accumulate_dx ? "_acc" : "",
                             c.no_dx ? "_nodx" : "", c.fd ? "_fd" : "");
        cases.push_back(c);
      }
  return cases;
}

class PositionsHarness : public ::testing::TestWithParam<OpCase<PosP>> {};
TEST_P(PositionsHarness, FusedEqualsSerial) { test::run_case<PositionsOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, PositionsHarness, ::testing::ValuesIn(positions_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCuda, PositionsHarness,
                         ::testing::ValuesIn(test::device_cases<PositionsOp>(positions_cases(),
                                                                             Device::kCuda)),
                         test::CaseName());

// PyTorch's PositionalEncoding: div_term = exp(arange(0, D, 2) * (-ln(10000) / D)),
// pe[:, 0::2] = sin(t * div_term), pe[:, 1::2] = cos(t * div_term).
TEST(Positions, SinusoidalTableMatchesPyTorchsFormula) {
  const int64_t P = 40, D = 6;
  const std::vector<float> pe = sinusoidal_table(P, D);
  ASSERT_EQ(pe.size(), size_t(P * D));
  for (int64_t d = 0; d < D; ++d) EXPECT_EQ(pe[d], d % 2 == 0 ? 0.0f : 1.0f);  // t = 0
  EXPECT_FLOAT_EQ(pe[1 * D + 0], std::sin(1.0f));
  EXPECT_FLOAT_EQ(pe[1 * D + 1], std::cos(1.0f));
  const double w2 = std::pow(10000.0, -2.0 / 6.0), w4 = std::pow(10000.0, -4.0 / 6.0);
  EXPECT_FLOAT_EQ(pe[37 * D + 2], float(std::sin(37 * w2)));
  EXPECT_FLOAT_EQ(pe[37 * D + 3], float(std::cos(37 * w2)));
  EXPECT_FLOAT_EQ(pe[39 * D + 5], float(std::cos(39 * w4)));
  const std::vector<float> odd = sinusoidal_table(3, 5);  // odd D: the last column is a sine
  EXPECT_FLOAT_EQ(odd[2 * 5 + 4], float(std::sin(2 * std::pow(10000.0, -4.0 / 5.0))));
  EXPECT_THROW(sinusoidal_table(0, 4), Error);
}

// The sinusoidal table adds the same values to every model; positions past T are not read.
TEST(Positions, SinusoidalAddsTheSharedTableToEveryModel) {
  const PositionsParams p{
      .B = 3, .n = 2, .T = 5, .D = 8, .kind = PositionKind::kSinusoidal, .P = 9};
  std::vector<float> pe = sinusoidal_table(p.table_rows(), p.D);
  Buffer x(p.x_shape(), 0.0f), y(p.x_shape());
  positions_forward(
      p, {.x = x.view(), .table = TensorView(pe.data(), p.table_shape()), .y = y.view()});
  for (int64_t row = 0; row < p.B * p.n * p.T; ++row)
    for (int64_t d = 0; d < p.D; ++d)
      ASSERT_EQ(y.values[row * p.D + d], pe[(row % p.T) * p.D + d]) << row << " " << d;
}

TEST(Positions, BadShapesRaiseClearErrors) {
  const PositionsParams p{.B = 2, .n = 3, .T = 4, .D = 5, .P = 6};
  Buffer x(p.x_shape()), y(p.x_shape()), table(p.table_shape());
  auto message = [&](const PositionsParams& q, TensorView t) {
    try {
      positions_forward(q, {.x = x.view(), .table = t, .y = y.view()});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto expect_message = [](const std::string& got, const std::string& want) {
    EXPECT_NE(got.find(want), std::string::npos) << got;
  };
  EXPECT_EQ(message(p, table.view()), "no error");
  PositionsParams bad = p;
  bad.P = 3;
  expect_message(message(bad, table.view()),
                 "positions table has P=3 positions but sequences have T=4 tokens");
  Buffer short_table(Shape{2, 4, 5});
  expect_message(message(p, short_table.view()),
                 "positions table (learned: [B, P, D]) has shape [2, 4, 5], expected [2, 6, 5]");
  bad = p;
  bad.kind = PositionKind::kSinusoidal;
  expect_message(message(bad, table.view()),
                 "positions table (sinusoidal: [P, D]) has shape [2, 6, 5], expected [6, 5]");
  Buffer dtable(Shape{6, 5});
  try {
    positions_backward(bad, {.dy = y.view(), .dx = x.view(), .dtable = dtable.view()});
    FAIL() << "expected hfta::Error";
  } catch (const Error& e) {
    expect_message(e.what(), "got a table gradient for the sinusoidal table");
  }
  EXPECT_THROW(positions_backward(p, {.dy = y.view(), .dx = y.view(), .accumulate_dx = true}),
               Error);
  Buffer wrong_dx(Shape{2, 3, 5, 4});
  EXPECT_THROW(positions_backward(p, {.dy = y.view(), .dx = wrong_dx.view()}), Error);
  bad = p;
  bad.x_scale = NAN;
  expect_message(message(bad, table.view()), "positions x_scale is nan");
  bad = p;
  bad.n = 0;
  expect_message(message(bad, table.view()), "positions sizes must be positive");
}

}  // namespace
}  // namespace hfta
