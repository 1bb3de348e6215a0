// What the CUDA conv2d tests share (tests/cuda/test_cuda_conv2d.cpp: the im2col + GEMM plan and
// cuDNN; tests/cuda/test_cuda_conv2d_implicit.cpp: the implicit-GEMM kernels): the case list, each
// case's seeded tensors and starting values, the reference run, and the comparisons with it.
// Outputs start as NaN; parameter gradients start random and must end at start + gradient; dx
// starts as NaN, or random with accumulate_dx; an unwanted dx must stay untouched.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "backend/cuda/runtime.h"
#include "conv_test_util.h"
#include "fused_ops/conv2d.h"
#include "test_util.h"

namespace hfta::conv2d_cuda_test {

using test::Buffer;
using test::expect_close;
using test::random_buffer;
using test::SumTolerance;

#define SKIP_WITHOUT_CUDA_DEVICE()                                                              \
  do {                                                                                          \
    if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status(); \
  } while (0)

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Conv2dCudaCase {
  std::string name;
  Conv2dParams p;
  bool accumulate_dx = false;
  bool want_dx = true;
};

inline void PrintTo(const Conv2dCudaCase& c, std::ostream* os) { *os << c.name; }

inline std::vector<Conv2dCudaCase> conv2d_cases() {
  struct Geometry {
    int64_t N, cin, cout, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups;
    bool bias, shared;
  };
  // N, cin, cout, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups, bias, shared
  const Geometry geometries[] = {
      {2, 3, 4, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},    // 3x3 pad 1, odd H/W
      {9, 4, 6, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, false},    // stride 2, 9 images
      {2, 3, 5, 8, 7, 3, 2, 2, 1, 0, 1, 1, 1, 1, true, false},    // non-square kernel/stride/pad
      {5, 3, 5, 9, 7, 3, 3, 1, 1, 2, 2, 2, 2, 1, true, false},    // dilation 2
      {2, 2, 3, 9, 8, 3, 3, 2, 3, 1, 0, 2, 1, 1, false, false},   // dilation with stride, no bias
      {2, 3, 5, 7, 5, 5, 5, 1, 1, 2, 2, 1, 1, 1, false, false},   // 5x5, no bias
      {6, 8, 16, 5, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false},   // 1x1
      {3, 4, 6, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 2, true, false},    // groups 2
      {2, 6, 12, 5, 7, 3, 3, 2, 2, 1, 1, 1, 1, 6, true, false},   // depthwise x2, stride 2
      {2, 2, 3, 4, 5, 3, 3, 1, 2, 4, 3, 1, 1, 1, true, false},    // padding wider than kernel
      {2, 2, 3, 2, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},    // kernel larger than input
      {4, 3, 8, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true},     // shared input
      {2, 4, 6, 6, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, true},    // shared, stride, no bias
      {5, 4, 6, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1, 2, true, true},     // shared, groups 2
      {2, 4, 4, 7, 5, 3, 3, 1, 1, 2, 2, 2, 2, 4, false, true},    // shared depthwise, dilation
      {3, 1, 6, 12, 10, 5, 5, 1, 1, 2, 2, 1, 1, 1, true, true},   // a first layer (LeNet-like)
      {2, 16, 33, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},  // sizes past GEMM tiles
  };
  // N above and below B*G: the forward and dx GEMMs batch over the images or over the models.
  std::vector<Conv2dCudaCase> cases;
  int64_t k = 0;
  for (const Geometry& s : geometries)
    for (int64_t B : {1, 2, 3, 8}) {
      Conv2dCudaCase c;
      c.p = Conv2dParams{.B = B,
                         .N = s.N,
                         .in_channels = s.cin,
                         .out_channels = s.cout,
                         .H = s.H,
                         .W = s.W,
                         .kernel_h = s.kh,
                         .kernel_w = s.kw,
                         .stride_h = s.sh,
                         .stride_w = s.sw,
                         .pad_h = s.ph,
                         .pad_w = s.pw,
                         .dilation_h = s.dh,
                         .dilation_w = s.dw,
                         .groups = s.groups,
                         .bias = s.bias,
                         .shared_input = s.shared};
      c.want_dx = !(s.shared && (B == 8 || s.cin == 1)) && k % 7 != 3;
      c.accumulate_dx = c.want_dx && k % 2 == 0;
      ++k;
      c.name = fmt::format("N{}_c{}to{}_{}x{}_k{}x{}_s{}x{}_p{}x{}_d{}x{}_g{}_B{}{}{}{}{}", s.N,
                           s.cin, s.cout, s.H, s.W, s.kh, s.kw, s.sh, s.sw, s.ph, s.pw, s.dh, s.dw,
                           s.groups, B, s.shared ? "_shared" : "", s.bias ? "" : "_nobias",
                           c.accumulate_dx ? "_acc" : "", c.want_dx ? "" : "_nodx");
      cases.push_back(c);
    }
  return cases;
}

// One case's tensors on the host: the inputs and the starting values of what the op writes.
struct Conv2dTensors {
  Buffer x, weight, bias, dy, y, dx, dweight, dbias;
};

inline std::vector<Buffer*> all(Conv2dTensors& t) {
  return {&t.x, &t.weight, &t.bias, &t.dy, &t.y, &t.dx, &t.dweight, &t.dbias};
}

inline Conv2dTensors make_inputs(const Conv2dCudaCase& c, RngStream& rng) {
  const Conv2dParams& p = c.p;
  Conv2dTensors t;
  t.x = random_buffer(p.x_shape(), rng);
  t.weight = random_buffer(p.weight_shape(), rng);
  t.bias = random_buffer(p.bias_shape(), rng);
  t.dy = random_buffer(p.y_shape(), rng);
  t.y = Buffer(p.y_shape(), kNaN);
  t.dx = c.accumulate_dx ? random_buffer(p.x_shape(), rng) : Buffer(p.x_shape(), kNaN);
  t.dweight = random_buffer(p.weight_shape(), rng);
  t.dbias = random_buffer(p.bias_shape(), rng);
  return t;
}

// The tensors of one call, for tensors `d` (host or device) in all()'s order: unwanted ones are
// empty views.
inline Conv2dForwardArgs forward_args(const Conv2dCudaCase& c, const std::vector<TensorView>& d) {
  return {.x = d[0], .weight = d[1], .bias = c.p.bias ? d[2] : TensorView(), .y = d[4]};
}
inline Conv2dBackwardArgs backward_args(const Conv2dCudaCase& c, const std::vector<TensorView>& d) {
  return {.x = d[0],
          .weight = d[1],
          .dy = d[3],
          .dx = c.want_dx ? d[5] : TensorView(),
          .dweight = d[6],
          .dbias = c.p.bias ? d[7] : TensorView(),
          .accumulate_dx = c.accumulate_dx};
}

// What the op must leave: the reference run on copies of the starting tensors.
inline Conv2dTensors reference(const Conv2dCudaCase& c, const Conv2dTensors& start) {
  Conv2dTensors want = start;
  std::vector<TensorView> d;
  for (Buffer* b : all(want)) d.push_back(b->view());
  ref::conv2d_forward(c.p, forward_args(c, d));
  ref::conv2d_backward(c.p, backward_args(c, d));
  return want;
}

// Bit for bit (NaN where the start was NaN): what the op must not touch.
inline void expect_same(const Buffer& got, const Buffer& want, const char* what) {
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_TRUE(std::isnan(want.values[i]) ? std::isnan(got.values[i])
                                           : got.values[i] == want.values[i])
        << what << "[" << i << "] = " << got.values[i] << ", expected " << want.values[i];
}

// fp32 sums against the reference's double sums (conv_test_util.h): y sums C_in/G*kH*kW
// products and the bias, dx C_out/G*kH*kW per model (a shared input adds B models' roundings:
// sqrt(B) more), dweight and dbias N*OH*OW.
inline void expect_matches_reference(const Conv2dCudaCase& c, const Conv2dTensors& got,
                                     const Conv2dTensors& want) {
  const Conv2dParams& p = c.p;
  const int64_t taps = p.kernel_h * p.kernel_w;
  const SumTolerance fwd(p.in_channels / p.groups * taps + 1);
  const SumTolerance param(p.N * p.out_h() * p.out_w());
  SumTolerance dx(p.out_channels / p.groups * taps);
  if (p.shared_input) dx.atol *= std::sqrt(double(p.B));
  expect_close(got.y, want.y, fwd.atol, fwd.rtol, "y");
  expect_close(got.dweight, want.dweight, param.atol, param.rtol, "dweight");
  if (p.bias)
    expect_close(got.dbias, want.dbias, param.atol, param.rtol, "dbias");
  else
    expect_same(got.dbias, want.dbias, "dbias (bias off: untouched)");
  if (c.want_dx)
    expect_close(got.dx, want.dx, dx.atol, dx.rtol, "dx");
  else
    expect_same(got.dx, want.dx, "dx (not wanted: untouched)");
}

// HFTA_CUDA_CONV set to `value` (unset for null) while it lives, then restored.
class ScopedConvBackend : public test::ScopedEnv {
 public:
  explicit ScopedConvBackend(const char* value) : ScopedEnv("HFTA_CUDA_CONV", value) {}
};

}  // namespace hfta::conv2d_cuda_test
