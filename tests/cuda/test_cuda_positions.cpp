// The CUDA position encodings (fused_ops/cuda/positions.cpp): B in {1, 2, 3, 8}, learned tables
// (P = T and P > T) and the shared sinusoidal table, x_scale 1 and sqrt(D), 1 to 515 floats a
// model around the 256-thread blocks, y and dx in place or not, accumulate_dx, dx or dtable not
// wanted.
//   PositionsHostMirror (runs without a GPU): positions_math.h over every index as the kernels
//     run it, on NaN-filled outputs, equals the reference bit for bit (y, dx, dtable); the
//     reference is B single-model runs, so model b of the fused mirror is what it gives alone.
//   CudaPositions (skipped without a GPU): the op through the dispatcher on device tensors, bit
//     for bit the reference; PositionsDevices: tensors on two devices are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/positions_math.h"
#include "fused_ops/positions.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct PosCase {
  PositionsParams p;
  bool want_dx, want_dtable, accumulate, in_place;
  std::string name() const {
    return fmt::format("B{}_n{}_T{}_D{}_P{}_{}{}{}{}{}{}", p.B, p.n, p.T, p.D, p.table_rows(),
                       p.kind == PositionKind::kLearned ? "learned" : "sin",
                       p.x_scale != 1.0f ? "_scaled" : "", want_dx ? "_dx" : "",
                       want_dtable ? "_dtable" : "", accumulate ? "_acc" : "",
                       in_place ? "_inplace" : "");
  }
};

void PrintTo(const PosCase& c, std::ostream* os) { *os << c.name(); }

std::vector<PosCase> cases() {
  const struct {
    int64_t n, T, D, P;
    PositionKind kind;
  } shapes[] = {{1, 1, 1, 0, PositionKind::kLearned},   {2, 2, 64, 0, PositionKind::kLearned},
                {1, 3, 85, 5, PositionKind::kLearned},  {3, 5, 17, 0, PositionKind::kSinusoidal},
                {2, 1, 257, 3, PositionKind::kLearned}, {5, 7, 9, 9, PositionKind::kSinusoidal},
                {4, 35, 33, 40, PositionKind::kLearned}};
  std::vector<PosCase> out;
  int k = 0;
  for (const auto& s : shapes)
    for (int64_t B : test::model_counts()) {
      const bool learned = s.kind == PositionKind::kLearned;
      const int variant = k++ % 4;  // both gradients, no dtable, no dx; accumulate on odd cases
      PosCase c{{.B = B,
                 .n = s.n,
                 .T = s.T,
                 .D = s.D,
                 .kind = s.kind,
                 .P = s.P,
                 .x_scale = k % 3 == 0 ? std::sqrt(float(s.D)) : 1.0f},
                variant != 2,
                learned && variant != 1,
                variant % 2 == 1,
                k % 5 < 2};
      out.push_back(c);
    }
  return out;
}

struct Tensors {
  Buffer x, table, dy, dx_start, dtable_start;
};

Tensors inputs(const PosCase& c) {
  RngStream rng(test::case_seed("cuda_positions_" + c.name()), 0);
  const Shape xs = c.p.x_shape(), ts = c.p.table_shape();
  Tensors t{
      test::random_buffer(xs, rng), test::random_buffer(ts, rng), test::random_buffer(xs, rng),
      c.accumulate ? test::random_buffer(xs, rng) : Buffer(xs, kNaN), test::random_buffer(ts, rng)};
  return t;
}

struct Outputs {
  Buffer y, dx, dtable;
};

Outputs reference(const PosCase& c, Tensors& t) {
  Outputs o{Buffer(c.p.x_shape(), kNaN), t.dx_start, t.dtable_start};
  ref::positions_forward(c.p, {.x = t.x.view(), .table = t.table.view(), .y = o.y.view()});
  ref::positions_backward(c.p, {.dy = t.dy.view(),
                                .dx = c.want_dx ? o.dx.view() : TensorView(),
                                .dtable = c.want_dtable ? o.dtable.view() : TensorView(),
                                .accumulate_dx = c.accumulate});
  return o;
}

positions_math::PosShape shape_of(const PositionsParams& p) {
  return {.B = p.B,
          .n = p.n,
          .T = p.T,
          .D = p.D,
          .P = p.table_rows(),
          .learned = p.kind == PositionKind::kLearned,
          .x_scale = p.x_scale};
}

void expect_equal(Outputs& got, Outputs& want) {
  test::expect_same_bits(got.y.values, want.y.values, "y");
  test::expect_same_bits(got.dx.values, want.dx.values, "dx");
  test::expect_same_bits(got.dtable.values, want.dtable.values, "dtable");
}

class PositionsHostMirror : public ::testing::TestWithParam<PosCase> {};

TEST_P(PositionsHostMirror, EqualsTheReference) {
  const PosCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_positions_" + c.name()));
  Tensors t = inputs(c);
  Outputs want = reference(c, t);
  const positions_math::PosShape s = shape_of(c.p);
  // In place: y over a copy of x, dx over a copy of dy (the kernels' order: dtable reads dy
  // first).
  Outputs got{c.in_place ? t.x : Buffer(c.p.x_shape(), kNaN),
              c.in_place && !c.accumulate ? t.dy : t.dx_start, t.dtable_start};
  const float* x = c.in_place ? got.y.data() : t.x.data();
  for (int64_t e = 0; e < s.elements(); ++e)
    positions_math::forward_at(s, x, t.table.data(), got.y.data(), e);
  const float* dy = c.in_place && !c.accumulate ? got.dx.data() : t.dy.data();
  if (c.want_dtable)
    for (int64_t i = 0; i < s.B * s.T * s.D; ++i)
      positions_math::dtable_at(s, dy, got.dtable.data(), i);
  if (c.want_dx)
    for (int64_t e = 0; e < s.elements(); ++e)
      positions_math::dx_at(s, dy, got.dx.data(), c.accumulate, e);
  else if (c.in_place && !c.accumulate)
    got.dx = t.dx_start;  // dx not wanted: the reference leaves the start
  expect_equal(got, want);
}

INSTANTIATE_TEST_SUITE_P(Cases, PositionsHostMirror, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

class CudaPositions : public ::testing::TestWithParam<PosCase> {};

TEST_P(CudaPositions, EqualsTheReference) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const PosCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_positions_" + c.name()));
  Tensors t = inputs(c);
  Outputs want = reference(c, t);
  const Shape xs = c.p.x_shape(), ts = c.p.table_shape();
  const size_t xb = cuda::DeviceArena::align_up(xs.numel() * sizeof(float)),
               tb = cuda::DeviceArena::align_up(ts.numel() * sizeof(float));
  cuda::DeviceArena arena(4 * xb + 2 * tb, "positions test");
  const TensorView x = arena.carve(xs), y = arena.carve(xs), dy = arena.carve(xs),
                   dx = arena.carve(xs), table = arena.carve(ts), dtable = arena.carve(ts);
  cuda::copy_to_device(t.x.view(), c.in_place ? y : x);
  cuda::copy_to_device(t.table.view(), table);
  cuda::copy_to_device(t.dtable_start.view(), dtable);
  const bool dx_over_dy = c.in_place && !c.accumulate && c.want_dx;
  cuda::copy_to_device(t.dy.view(), dx_over_dy ? dx : dy);
  if (!c.in_place) cuda::copy_to_device(Buffer(xs, kNaN).view(), y);
  if (!dx_over_dy) cuda::copy_to_device(t.dx_start.view(), dx);
  positions_forward(c.p, {.x = c.in_place ? y : x, .table = table, .y = y});
  positions_backward(c.p, {.dy = dx_over_dy ? dx : dy,
                           .dx = c.want_dx ? dx : TensorView(),
                           .dtable = c.want_dtable ? dtable : TensorView(),
                           .accumulate_dx = c.accumulate});
  Outputs got{Buffer(xs), Buffer(xs), Buffer(ts)};
  cuda::copy_to_host(y, got.y.view());
  cuda::copy_to_host(dx, got.dx.view());
  cuda::copy_to_host(dtable, got.dtable.view());
  expect_equal(got, want);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaPositions, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(PositionsDevices, TensorsOnTwoDevicesAreRefused) {
  const PositionsParams p{.B = 1, .n = 1, .T = 2, .D = 3};
  std::vector<float> x(6), table(6), y(6);
  // A view that claims device memory (never dereferenced: the check comes first).
  const TensorView on_device(y.data(), p.x_shape(), Device::kCuda);
  test::expect_error_containing_all(
      [&] {
        positions_forward(p, {.x = TensorView(x.data(), p.x_shape()),
                              .table = TensorView(table.data(), p.table_shape()),
                              .y = on_device});
      },
      {"positions output", "CUDA device"});
  const TensorView table_grad(table.data(), p.table_shape(), Device::kCuda);
  test::expect_error_containing_all(
      [&] {
        positions_backward(p, {.dy = TensorView(x.data(), p.x_shape()), .dtable = table_grad});
      },
      {"positions table gradient", "CUDA device"});
}

}  // namespace
}  // namespace hfta
