// The conv2d op on the op harness (tests/op_harness.h) and its cases, shared by the conv2d test
// files: a case's geometry (ConvCase), its params, the op's tensors and tolerances (Conv2dOp), and
// a named OpCase under a strategy.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "conv_test_util.h"
#include "fused_ops/conv2d.h"
#include "op_harness.h"

namespace hfta::test {

struct ConvCase {
  int64_t N, cin, cout, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  bool bias, shared;
};

inline Conv2dParams params_for(int64_t B, const ConvCase& c) {
  Conv2dParams p;
  p.B = B, p.N = c.N, p.in_channels = c.cin, p.out_channels = c.cout, p.H = c.H, p.W = c.W;
  p.kernel_h = c.kh, p.kernel_w = c.kw, p.stride_h = c.sh, p.stride_w = c.sw;
  p.pad_h = c.ph, p.pad_w = c.pw, p.dilation_h = c.dh, p.dilation_w = c.dw;
  p.groups = c.groups, p.bias = c.bias, p.shared_input = c.shared;
  return p;
}

struct Conv2dOp {
  using Params = Conv2dParams;
  static std::string describe(const Conv2dParams& p) {
    const cpu::Conv2dStrategy chosen = cpu::conv2d_strategy_for(p);
    return fmt::format(
        "{} N={} C={}->{} {}x{} k={}x{} s={}x{} pad={}x{} dil={}x{} g={} bias={} "
        "shared={}",
        chosen == cpu::Conv2dStrategy::kPerModel ? "per-model"
        : chosen == cpu::Conv2dStrategy::kDirect ? "direct"
        : chosen == cpu::Conv2dStrategy::kIm2col ? "im2col"
                                                 : "grouped",
        p.N, p.in_channels, p.out_channels, p.H, p.W, p.kernel_h, p.kernel_w, p.stride_h,
        p.stride_w, p.pad_h, p.pad_w, p.dilation_h, p.dilation_w, p.groups, p.bias, p.shared_input);
  }
  static std::vector<TensorSpec> tensors(const Conv2dParams& p, const OpCase<Conv2dParams>& c) {
    const int64_t taps = p.kernel_h * p.kernel_w;
    const SumTolerance fwd(p.in_channels / p.groups * taps + 1);
    const SumTolerance dx(p.out_channels / p.groups * taps);
    const SumTolerance param(p.N * p.out_h() * p.out_w());
    const Layout xl = p.shared_input ? Layout::kShared : Layout::kChannels;
    std::vector<TensorSpec> t = {
        {.name = "x", .shape = p.x_shape(), .layout = xl, .channels = p.in_channels},
        {.name = "weight", .shape = p.weight_shape()},
        {.name = "dy",
         .shape = p.y_shape(),
         .layout = Layout::kChannels,
         .channels = p.out_channels},
        {.name = "y",
         .shape = p.y_shape(),
         .layout = Layout::kChannels,
         .role = Role::kOutput,
         .atol = fwd.atol,
         .rtol = fwd.rtol,
         .channels = p.out_channels},
        {.name = "dweight",
         .shape = p.weight_shape(),
         .role = Role::kParamGrad,
         .atol = param.atol,
         .rtol = param.rtol},
    };
    if (p.bias) {
      t.push_back({.name = "bias", .shape = p.bias_shape()});
      t.push_back({.name = "dbias",
                   .shape = p.bias_shape(),
                   .role = Role::kParamGrad,
                   .atol = param.atol,
                   .rtol = param.rtol});
    }
    // The weights forward saves for backward (conv2d.h), passed in the cases of even N (the
    // others run without): random values in place of garbage, never read by the reference, so a
    // backward that read them before forward wrote them gets a wrong dx.
    if (passes_saved(p, c)) t.push_back({.name = "saved", .shape = Shape{conv2d_saved_floats(p)}});
    if (!c.no_dx)
      t.push_back({.name = "dx",
                   .shape = p.x_shape(),
                   .layout = xl,
                   .role = Role::kInputGrad,
                   .atol = dx.atol,
                   .rtol = dx.rtol,
                   .channels = p.in_channels});
    return t;
  }
  static bool passes_saved(const Conv2dParams& p, const OpCase<Conv2dParams>& c) {
    return c.device == Device::kCpu && p.N % 2 == 0 && conv2d_saved_floats(p) > 0;
  }
  static void run(const Conv2dParams& p, const test::Views& v, const test::RunContext& ctx) {
    const Conv2dForwardArgs f{
        .x = v("x"), .weight = v("weight"), .bias = v("bias"), .y = v("y"), .saved = v("saved")};
    const Conv2dBackwardArgs b{.x = v("x"),
                               .weight = v("weight"),
                               .dy = v("dy"),
                               .dx = v("dx"),
                               .dweight = v("dweight"),
                               .dbias = v("dbias"),
                               .accumulate_dx = ctx.accumulate_dx,
                               .accumulate_dparams = !ctx.write_dparams,
                               .saved = v("saved")};
    if (ctx.ref) {
      ref::conv2d_forward(p, f);
      if (!ctx.forward_only) ref::conv2d_backward(p, b);
    } else {
      conv2d_forward(p, f);
      conv2d_backward(p, b);
    }
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() {
    return {{"x", "dx"}, {"weight", "dweight"}, {"bias", "dbias"}};
  }
  // Linear in every input: no truncation error; the rounding of the few outputs a perturbed
  // element touches (|y| <~ 10, u|y| ~ 1e-6 each) over 2*eps.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 1e-3, 1e-3}; }
};

inline const char* strategy_name(cpu::Conv2dStrategy s) {
  switch (s) {
    case cpu::Conv2dStrategy::kGrouped:
      return "grouped";
    case cpu::Conv2dStrategy::kPerModel:
      return "permodel";
    case cpu::Conv2dStrategy::kDirect:
      return "direct";
    case cpu::Conv2dStrategy::kIm2col:
      return "im2col";
    default:
      return "auto";
  }
}

inline OpCase<Conv2dParams> conv_case(const ConvCase& cc, int64_t B, cpu::Conv2dStrategy strategy,
                                      bool accumulate, bool no_dx, const std::string& suffix = "") {
  OpCase<Conv2dParams> c;
  c.p = params_for(B, cc);
  c.B = B;
  c.strategy = strategy;
  c.accumulate_dx = accumulate && !no_dx;
  c.no_dx = no_dx;
  // Half the cases write the parameter gradients (a step's first backward), across strategies.
  c.write_dparams = (B + cc.cin + cc.kh) % 2 == 1;
  c.name = fmt::format("N{}_c{}to{}_{}x{}_k{}x{}_s{}x{}_p{}x{}_d{}x{}_g{}{}{}_B{}_{}{}{}{}{}", cc.N,
                       cc.cin, cc.cout, cc.H, cc.W, cc.kh, cc.kw, cc.sh, cc.sw, cc.ph, cc.pw, cc.dh,
                       cc.dw, cc.groups, cc.bias ? "" : "_nobias", cc.shared ? "_shared" : "", B,
                       strategy_name(strategy), c.accumulate_dx ? "_acc" : "",
                       c.write_dparams ? "_wdp" : "", no_dx ? "_nodx" : "", suffix);
  return c;
}

}  // namespace hfta::test
