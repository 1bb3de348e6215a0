// The fused conv2d on the implicit-GEMM kernels (conv2d_implicit.h): checks that the kernels'
// 32-bit indices hold, then one launch per direction (the weight gradient in passes over the
// models when its chunks' partial sums would not fit kImplicitPartialsCapFloats), and the bias
// gradient by conv2d_kernels.cu's conv_bias_grad (double sums in a fixed tree, independent of B).
#include "fused_ops/cuda/conv2d_implicit.h"

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <utility>

#include "backend/cuda/runtime.h"
#include "backend/cuda/scratch.h"
#include "core/error.h"
#include "fused_ops/cuda/kernels.h"

namespace hfta::cuda {

namespace {

constexpr int64_t kIntMax = std::numeric_limits<int>::max();

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks of a launch over `outer` (image, model, group) problems of [rows, cols] outputs, at most:
// the kernels' smallest tile has 4 rows and 64 columns.
int64_t max_blocks(int64_t outer, int64_t rows, int64_t cols) {
  return outer * ceil_div(rows, 4) * ceil_div(cols, 64);
}

}  // namespace

implicit_math::ImplicitGeometry implicit_conv_geometry(const Conv2dParams& p) {
  const int64_t cig = p.in_channels / p.groups, cog = p.out_channels / p.groups;
  const int64_t taps = p.kernel_h * p.kernel_w, P = p.out_h() * p.out_w();
  const std::pair<const char*, int64_t> sizes[] = {
      {"B*C_in", p.B * p.in_channels},
      {"B*C_out", p.B * p.out_channels},
      {"B*groups", p.B * p.groups},
      {"N", p.N},
      {"C_in*H*W (one image)", p.in_channels * p.H * p.W},
      {"OH*OW", P},
      {"C_out*OH*OW (one model's output image)", p.out_channels * P},
      {"N*OH*OW (the weight gradient's sum, plus a chunk)", p.N * P + implicit_math::kDweightChunk},
      {"C_out*C_in/groups*kH*kW (one model's weights)", p.out_channels * cig * taps},
      {"kernel, stride, padding or dilation",
       std::max({p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dilation_h,
                 p.dilation_w, p.H + 2 * p.pad_h, p.W + 2 * p.pad_w, p.dilation_h * p.kernel_h,
                 p.dilation_w * p.kernel_w})},
  };
  for (const auto& [what, v] : sizes)
    HFTA_CHECK(v <= kIntMax,
               "HFTA_CUDA_CONV=implicit: {} = {} exceeds the implicit-GEMM kernels' 32-bit "
               "indices: split the layer or the batch, or use HFTA_CUDA_CONV=gemm",
               what, v);
  const int64_t chunks = ceil_div(p.N * P, implicit_math::kDweightChunk);
  const std::pair<const char*, int64_t> grids[] = {
      {"forward", max_blocks(p.N * p.B * p.groups, cog, P)},
      {"backward data", max_blocks(p.N * (p.shared_input ? 1 : p.B) * p.groups, cig, p.H * p.W)},
      {"backward weight", max_blocks(p.B * p.groups * chunks, cog, cig * taps)},
  };
  for (const auto& [what, blocks] : grids)
    HFTA_CHECK(
        blocks <= kIntMax,
        "HFTA_CUDA_CONV=implicit: the {} kernel would need {} blocks, beyond CUDA's 2^31 - 1: "
        "split the batch, or use HFTA_CUDA_CONV=gemm",
        what, blocks);
  auto i = [](int64_t v) { return static_cast<int>(v); };
  return implicit_math::ImplicitGeometry{.B = i(p.B),
                                         .N = i(p.N),
                                         .in_channels = i(p.in_channels),
                                         .out_channels = i(p.out_channels),
                                         .groups = i(p.groups),
                                         .H = i(p.H),
                                         .W = i(p.W),
                                         .kernel_h = i(p.kernel_h),
                                         .kernel_w = i(p.kernel_w),
                                         .stride_h = i(p.stride_h),
                                         .stride_w = i(p.stride_w),
                                         .pad_h = i(p.pad_h),
                                         .pad_w = i(p.pad_w),
                                         .dilation_h = i(p.dilation_h),
                                         .dilation_w = i(p.dilation_w),
                                         .out_h = i(p.out_h()),
                                         .out_w = i(p.out_w()),
                                         .bias = p.bias,
                                         .shared_input = p.shared_input};
}

int64_t implicit_dweight_models_per_pass(const implicit_math::ImplicitGeometry& g) {
  const int64_t per_model = int64_t{g.dweight_chunks()} * g.out_channels * g.k_forward();
  return std::clamp<int64_t>(kImplicitPartialsCapFloats / per_model, 1, g.B);
}

void implicit_conv2d_forward(const Conv2dParams& p, const Conv2dForwardArgs& a) {
  const implicit_math::ImplicitGeometry g = implicit_conv_geometry(p);
  check(kernels::implicit_conv_forward(g, a.x.data, a.weight.data, p.bias ? a.bias.data : nullptr,
                                       a.y.data, stream()),
        "conv2d implicit forward kernel launch");
}

void implicit_conv2d_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a) {
  const implicit_math::ImplicitGeometry g = implicit_conv_geometry(p);
  cudaStream_t s = stream();
  if (p.bias && !a.dbias.empty())
    check(kernels::conv_bias_grad(a.dy.data, a.dbias.data, p.N, p.B * p.out_channels,
                                  p.out_h() * p.out_w(), s),
          "conv2d bias_grad kernel launch");
  if (!a.dx.empty())
    check(kernels::implicit_conv_backward_data(g, a.weight.data, a.dy.data, a.dx.data,
                                               a.accumulate_dx, s),
          "conv2d implicit backward-data kernel launch");
  if (a.dweight.empty()) return;
  if (g.dweight_chunks() == 1) {
    check(kernels::implicit_conv_backward_weight(g, a.x.data, a.dy.data, a.dweight.data, nullptr, 0,
                                                 g.B, s),
          "conv2d implicit backward-weight kernel launch");
    return;
  }
  // Passes over the models share the scratch: each pass's kernels run after the previous pass's
  // on the one stream.
  const int64_t models = implicit_dweight_models_per_pass(g);
  float* partials =
      device_scratch(models * g.dweight_chunks() * g.out_channels * int64_t{g.k_forward()});
  for (int64_t b0 = 0; b0 < g.B; b0 += models)
    check(kernels::implicit_conv_backward_weight(g, a.x.data, a.dy.data, a.dweight.data, partials,
                                                 static_cast<int>(b0),
                                                 static_cast<int>(std::min(models, g.B - b0)), s),
          "conv2d implicit backward-weight kernel launch");
}

}  // namespace hfta::cuda
