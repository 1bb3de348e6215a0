// The CUDA conv_transpose2d (fused_ops/cuda/conv_transpose2d.cpp): DCGAN's generator layers (1x1
// to 4x4 with a 4x4 kernel, then stride 2 and padding 1) and odd ones (non-square kernels,
// stride 3 with padding 2, a 1x1 kernel, padding 2 of a 5x5 kernel, more images than models),
// shared input, bias on and off, x B in {1, 2, 3, 8}; dx written, accumulated or not wanted, the
// weight gradient skipped in some; outputs NaN-filled, parameter gradients from random starts.
//   ConvTranspose2dPlan (runs without a GPU): the op's plan (conv_transpose2d_gemms.h) on the
//     host, im2col and col2im by conv2d_math.h over every index as the kernels run them, the GEMMs
//     by a naive column-major GEMM (double sums), scratch NaN-filled at every request, against
//     fused_ops/ref/conv_transpose2d.cpp within tests/conv_test_util.h's fp32-sum tolerance: in
//     the op's chunks, in chunks of one or two images, and one call per (image, model) as in
//     deterministic mode; then model b of the fused plan against the B = 1 plan on model b's
//     slices, bit for bit (every per-model output).
//   CudaConvTranspose2d (skipped without a GPU): the op through the dispatcher on device tensors
//     against the reference, normal and deterministic mode.
//   ConvTranspose2dDevices: tensors on two devices raise (runs without a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "conv_test_util.h"
#include "core/determinism.h"
#include "fused_ops/conv_transpose2d.h"
#include "fused_ops/cuda/conv_transpose2d_gemms.h"
#include "host_gemm.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct DeconvCase {
  std::string name;
  ConvTranspose2dParams p;
  bool accumulate_dx = false, want_dx = true, want_dweight = true;
};

void PrintTo(const DeconvCase& c, std::ostream* os) { *os << c.name; }

std::vector<DeconvCase> cases() {
  struct Geometry {
    const char* name;
    int64_t N, cin, cout, H, W, kh, kw, sh, sw, ph, pw;
    bool bias, shared;
  };
  const Geometry geometries[] = {
      {"dcgan_first", 3, 5, 7, 1, 1, 4, 4, 1, 1, 0, 0, false, false},
      {"dcgan_up", 2, 6, 4, 4, 4, 4, 4, 2, 2, 1, 1, false, false},
      {"odd", 3, 3, 5, 3, 5, 3, 2, 3, 1, 2, 0, true, false},
      {"k1", 4, 4, 3, 5, 5, 1, 1, 1, 1, 0, 0, true, false},
      {"wide_pad", 2, 2, 3, 6, 6, 5, 5, 1, 1, 2, 2, true, false},
      {"many_images", 9, 2, 3, 3, 3, 3, 3, 2, 2, 1, 1, true, false},
      {"shared", 3, 3, 4, 4, 3, 3, 3, 2, 2, 1, 1, true, true},
      {"shared_k2", 10, 1, 2, 2, 3, 2, 2, 2, 2, 0, 0, false, true},
  };
  std::vector<DeconvCase> out;
  int k = 0;
  for (const Geometry& g : geometries)
    for (int64_t B : {1, 2, 3, 8}) {
      DeconvCase c;
      c.p = ConvTranspose2dParams{.B = B,
                                  .N = g.N,
                                  .in_channels = g.cin,
                                  .out_channels = g.cout,
                                  .H = g.H,
                                  .W = g.W,
                                  .kernel_h = g.kh,
                                  .kernel_w = g.kw,
                                  .stride_h = g.sh,
                                  .stride_w = g.sw,
                                  .pad_h = g.ph,
                                  .pad_w = g.pw,
                                  .bias = g.bias,
                                  .shared_input = g.shared};
      c.accumulate_dx = k % 2 == 1;
      c.want_dx = k % 5 != 3;
      c.want_dweight = k % 7 != 4;
      c.name = fmt::format("{}_B{}{}{}{}", g.name, B, c.accumulate_dx ? "_acc" : "",
                           c.want_dx ? "" : "_nodx", c.want_dweight ? "" : "_nodw");
      out.push_back(c);
      ++k;
    }
  return out;
}

struct Tensors {
  Buffer x, weight, bias, dy, y, dx, dweight, dbias;
};

Tensors inputs(const DeconvCase& c, uint64_t seed) {
  RngStream rng(seed, 0);
  const ConvTranspose2dParams& p = c.p;
  const Shape bias_shape = p.bias ? p.bias_shape() : Shape{0};
  return {test::random_buffer(p.x_shape(), rng),
          test::random_buffer(p.weight_shape(), rng),
          test::random_buffer(bias_shape, rng),
          test::random_buffer(p.y_shape(), rng),
          Buffer(p.y_shape(), kNaN),
          c.accumulate_dx ? test::random_buffer(p.x_shape(), rng) : Buffer(p.x_shape(), kNaN),
          test::random_buffer(p.weight_shape(), rng),
          test::random_buffer(bias_shape, rng)};
}

ConvTranspose2dForwardArgs forward_args(const DeconvCase& c, Tensors& t) {
  return {.x = t.x.view(),
          .weight = t.weight.view(),
          .bias = c.p.bias ? t.bias.view() : TensorView(),
          .y = t.y.view()};
}

ConvTranspose2dBackwardArgs backward_args(const DeconvCase& c, Tensors& t) {
  return {.x = t.x.view(),
          .weight = t.weight.view(),
          .dy = t.dy.view(),
          .dx = c.want_dx ? t.dx.view() : TensorView(),
          .dweight = c.want_dweight ? t.dweight.view() : TensorView(),
          .dbias = c.p.bias ? t.dbias.view() : TensorView(),
          .accumulate_dx = c.accumulate_dx};
}

Tensors reference(const DeconvCase& c, const Tensors& start) {
  Tensors t = start;
  ref::conv_transpose2d_forward(c.p, forward_args(c, t));
  ref::conv_transpose2d_backward(c.p, backward_args(c, t));
  return t;
}

// The fp32-sum tolerance (tests/conv_test_util.h) of each output, as the op harness sets it: an
// output pixel sums at most C_in kH kW products and the bias, an input gradient C_out kH kW (a
// shared input's, B times that), a parameter gradient N max(H W, OH OW).
void expect_matches_reference(const DeconvCase& c, const Tensors& got, const Tensors& want) {
  const ConvTranspose2dParams& p = c.p;
  const int64_t taps = p.kernel_h * p.kernel_w;
  const test::SumTolerance fwd(p.in_channels * taps + 1),
      dx((p.shared_input ? p.B : 1) * p.out_channels * taps),
      param(p.N * std::max(p.H * p.W, p.out_h() * p.out_w()));
  test::expect_close(got.y, want.y, fwd.atol, fwd.rtol, "y");
  if (c.want_dx)
    test::expect_close(got.dx, want.dx, dx.atol, dx.rtol, "dx");
  else  // untouched: NaN where it started so
    test::expect_same_bits(got.dx.values, want.dx.values, "dx (not wanted)");
  test::expect_close(got.dweight, want.dweight, param.atol, param.rtol, "dweight");
  test::expect_close(got.dbias, want.dbias, param.atol, param.rtol, "dbias");
}

using test::HostConvExec;

Tensors run_plan(const DeconvCase& c, const Tensors& start, int64_t cap_floats, bool per_pair) {
  Tensors t = start;
  cuda::conv_transpose2d_forward_plan(c.p, forward_args(c, t), cap_floats, per_pair,
                                      HostConvExec{});
  cuda::conv_transpose2d_backward_plan(c.p, backward_args(c, t), cap_floats, per_pair,
                                       HostConvExec{});
  return t;
}

class ConvTranspose2dPlan : public ::testing::TestWithParam<DeconvCase> {};

TEST_P(ConvTranspose2dPlan, MatchesTheReference) {
  const DeconvCase& c = GetParam();
  const uint64_t seed = test::case_seed("cuda_conv_transpose2d_" + c.name);
  HFTA_CASE_TRACE(seed);
  const Tensors start = inputs(c, seed);
  const Tensors want = reference(c, start);
  // Columns of one image (B C_out kH kW H W floats): chunks of 1 or 2 images.
  const int64_t col_image = c.p.B * c.p.out_channels * c.p.kernel_h * c.p.kernel_w * c.p.H * c.p.W;
  const struct {
    const char* name;
    int64_t cap;
    bool per_pair;
  } runs[] = {{"op's chunks", cuda::kConv2dScratchCapFloats, false},
              {"small chunks", col_image * (1 + c.p.N % 2), false},
              {"one call per (image, model)", cuda::kConv2dScratchCapFloats, true}};
  for (const auto& r : runs) {
    SCOPED_TRACE(r.name);
    expect_matches_reference(c, run_plan(c, start, r.cap, r.per_pair), want);
  }
}

// Model b's slices of a fused tensor: its channels of a [N, B*C, ...] tensor, or its block of a
// [B, ...] one (per_model_block floats).
Buffer channel_slice(const Buffer& from, const Shape& single, int64_t B, int64_t b) {
  Buffer out(single);
  const int64_t N = single[0], per_image = single.numel() / N;
  for (int64_t n = 0; n < N; ++n)
    std::copy_n(from.values.begin() + (n * B + b) * per_image, per_image,
                out.values.begin() + n * per_image);
  return out;
}

Buffer block_slice(const Buffer& from, const Shape& single, int64_t b) {
  Buffer out(single);
  std::copy_n(from.values.begin() + b * single.numel(), single.numel(), out.values.begin());
  return out;
}

TEST_P(ConvTranspose2dPlan, FusedEqualsEachModelAloneOnePairPerCall) {
  const DeconvCase& c = GetParam();
  const uint64_t seed = test::case_seed("cuda_conv_transpose2d_" + c.name);
  HFTA_CASE_TRACE(seed);
  const Tensors start = inputs(c, seed);
  const Tensors fused = run_plan(c, start, cuda::kConv2dScratchCapFloats, true);
  DeconvCase one = c;
  one.p.B = 1;
  const ConvTranspose2dParams& q = one.p;
  const Shape bias_shape = q.bias ? q.bias_shape() : Shape{0};
  for (int64_t b = 0; b < c.p.B; ++b) {
    SCOPED_TRACE(fmt::format("model b={}", b));
    const auto x_of = [&](const Buffer& from) {
      return c.p.shared_input ? from : channel_slice(from, q.x_shape(), c.p.B, b);
    };
    Tensors single{x_of(start.x),
                   block_slice(start.weight, q.weight_shape(), b),
                   q.bias ? block_slice(start.bias, bias_shape, b) : Buffer(bias_shape),
                   channel_slice(start.dy, q.y_shape(), c.p.B, b),
                   channel_slice(start.y, q.y_shape(), c.p.B, b),
                   x_of(start.dx),
                   block_slice(start.dweight, q.weight_shape(), b),
                   q.bias ? block_slice(start.dbias, bias_shape, b) : Buffer(bias_shape)};
    const Tensors alone = run_plan(one, single, cuda::kConv2dScratchCapFloats, true);
    test::expect_same_bits(channel_slice(fused.y, q.y_shape(), c.p.B, b).values, alone.y.values,
                           "y");
    test::expect_same_bits(block_slice(fused.dweight, q.weight_shape(), b).values,
                           alone.dweight.values, "dweight");
    if (q.bias)
      test::expect_same_bits(block_slice(fused.dbias, bias_shape, b).values, alone.dbias.values,
                             "dbias");
    if (!c.p.shared_input)  // a shared input's gradient is the sum over the models
      test::expect_same_bits(channel_slice(fused.dx, q.x_shape(), c.p.B, b).values, alone.dx.values,
                             "dx");
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ConvTranspose2dPlan, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

class CudaConvTranspose2d : public ::testing::TestWithParam<DeconvCase> {};

TEST_P(CudaConvTranspose2d, MatchesTheReference) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const DeconvCase& c = GetParam();
  const uint64_t seed = test::case_seed("cuda_conv_transpose2d_" + c.name);
  HFTA_CASE_TRACE(seed);
  const Tensors start = inputs(c, seed);
  const Tensors want = reference(c, start);
  const bool was_deterministic = deterministic();
  for (bool det : {false, true}) {
    SCOPED_TRACE(det ? "deterministic mode" : "default mode");
    set_deterministic(det);
    Tensors host = start;
    std::vector<Buffer*> all = {&host.x, &host.weight, &host.bias,    &host.dy,
                                &host.y, &host.dx,     &host.dweight, &host.dbias};
    size_t bytes = 0;
    for (Buffer* b : all) bytes += cuda::DeviceArena::align_up(b->values.size() * sizeof(float));
    cuda::DeviceArena arena(bytes, "conv_transpose2d test");
    std::vector<TensorView> dev;
    for (Buffer* b : all) {
      dev.push_back(arena.carve(b->shape));
      if (b->numel() > 0) cuda::copy_to_device(b->view(), dev.back());
    }
    const auto view = [&](size_t i, bool wanted) { return wanted ? dev[i] : TensorView(); };
    conv_transpose2d_forward(
        c.p, {.x = dev[0], .weight = dev[1], .bias = view(2, c.p.bias), .y = dev[4]});
    conv_transpose2d_backward(c.p, {.x = dev[0],
                                    .weight = dev[1],
                                    .dy = dev[3],
                                    .dx = view(5, c.want_dx),
                                    .dweight = view(6, c.want_dweight),
                                    .dbias = view(7, c.p.bias),
                                    .accumulate_dx = c.accumulate_dx});
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i]->numel() > 0) cuda::copy_to_host(dev[i], all[i]->view());
    expect_matches_reference(c, host, want);
  }
  set_deterministic(was_deterministic);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaConvTranspose2d, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

TEST(ConvTranspose2dDevices, TensorsOnTwoDevicesRaise) {
  const ConvTranspose2dParams p{.B = 2,
                                .N = 1,
                                .in_channels = 2,
                                .out_channels = 3,
                                .H = 2,
                                .W = 2,
                                .kernel_h = 2,
                                .kernel_w = 2,
                                .bias = false};
  Buffer x(p.x_shape()), w(p.weight_shape()), y(p.y_shape());
  TensorView on_device = y.view();
  on_device.device = Device::kCuda;
  test::expect_error_containing_all(
      [&] { conv_transpose2d_forward(p, {.x = x.view(), .weight = w.view(), .y = on_device}); },
      {"conv_transpose2d output", "one device"});
  EXPECT_THROW(conv_transpose2d_backward(
                   p, {.x = x.view(), .weight = w.view(), .dy = on_device, .dx = x.view()}),
               Error);
}

}  // namespace
}  // namespace hfta
