// The CUDA fused conv2d (fused_ops/cuda/conv2d.cpp) against the CPU reference
// (fused_ops/ref/conv2d.cpp: B independent single-model convolutions, double sums).
//
// Runs anywhere (HostPlan*): the op's plan (fused_ops/cuda/conv2d_gemms.h: chunks, kernels, GEMM
// descriptions) executed on the host, the kernels' elements by the same conv2d_math.h functions
// over every index, the GEMMs by a naive column-major GEMM; scratch is NaN-filled at every
// request, so a column the plan forgets to fill shows up. Once with the op's scratch cap, once
// with a cap of two images' columns (chunks of 1 or 2 images, the last one partial when N = 3).
// On a GPU (CudaConv2d.MatchesReference, skipped without one): the real op through the
// dispatching conv2d_forward / conv2d_backward with every tensor in a device arena.
// Cases, starting values and comparisons: conv2d_cuda_cases.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/cudnn.h"
#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "conv2d_cuda_cases.h"
#include "core/determinism.h"
#include "fused_ops/conv2d.h"
#include "fused_ops/cuda/conv2d_cudnn.h"
#include "fused_ops/cuda/conv2d_gemms.h"
#include "fused_ops/cuda/conv2d_math.h"
#include "host_gemm.h"
#include "test_util.h"

namespace hfta {
namespace {

using namespace conv2d_cuda_test;  // NOLINT(google-build-using-namespace): the shared case list

using test::HostConvExec;

void run_host_plan(const Conv2dCudaCase& c, int64_t cap_floats) {
  const uint64_t seed = test::case_seed(c.name);
  HFTA_CASE_TRACE(seed);
  RngStream rng(seed, 0);
  const Conv2dTensors start = make_inputs(c, rng);
  Conv2dTensors got = start;
  std::vector<TensorView> d;
  for (Buffer* b : all(got)) d.push_back(b->view());
  HostConvExec exec;
  cuda::conv2d_forward_plan(c.p, forward_args(c, d), cap_floats, exec);
  cuda::conv2d_backward_plan(c.p, backward_args(c, d), cap_floats, exec);
  expect_matches_reference(c, got, reference(c, start));
}

// The op through the dispatching conv2d_forward / conv2d_backward with every tensor in device
// memory, against the reference.
void run_on_device(const Conv2dCudaCase& c);

class CudaConv2d : public ::testing::TestWithParam<Conv2dCudaCase> {};

// No device needed: the op's whole plan on the host, with the op's scratch cap.
TEST_P(CudaConv2d, HostPlanMatchesReference) {
  run_host_plan(GetParam(), cuda::kConv2dScratchCapFloats);
}

// No device needed: the same with room for two images' columns, so chunks of 1 or 2 images.
TEST_P(CudaConv2d, HostPlanInSmallChunksMatchesReference) {
  const Conv2dParams& p = GetParam().p;
  const conv_math::ConvGeometry g = cuda::conv_geometry(p);
  run_host_plan(GetParam(), 2 * g.col_rows() * g.positions());
}

// Every backend the op can pick: hfta's GEMMs, hfta's implicit-GEMM kernels (bit for bit against
// their host mirror in test_cuda_conv2d_implicit.cpp) and, where it is loadable and can express
// the problem, cuDNN as one grouped call and as B per-model calls.
TEST_P(CudaConv2d, MatchesReference) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const Conv2dCudaCase& c = GetParam();
  for (const char* backend : {"gemm", "implicit", "cudnn", "cudnn-per-model"}) {
    SCOPED_TRACE(fmt::format("HFTA_CUDA_CONV={}", backend));
    const bool per_model = std::string(backend) == "cudnn-per-model";
    if (per_model || std::string(backend) == "cudnn") {
      const auto shapes = cuda::cudnn_conv_shapes(
          c.p, per_model ? cuda::CudnnConvMapping::kPerModel : cuda::CudnnConvMapping::kGrouped);
      if (!cuda::cudnn_available() || !shapes || !cuda::cudnn_conv2d_has_algorithms(c.p, *shapes)) {
        std::printf("%s: %s not run (%s)\n", c.name.c_str(), backend,
                    cuda::cudnn_available() ? "not expressible or no usable algorithm"
                                            : cuda::cudnn_status().c_str());
        continue;
      }
    }
    const ScopedConvBackend scoped(backend);
    run_on_device(c);
  }
}

void run_on_device(const Conv2dCudaCase& c) {
  const uint64_t seed = test::case_seed(c.name);
  HFTA_CASE_TRACE(seed);
  RngStream rng(seed, 0);
  Conv2dTensors start = make_inputs(c, rng);

  cuda::DeviceArena counting;
  for (Buffer* b : all(start)) counting.carve(b->shape);
  cuda::DeviceArena arena(counting.used(), "test arena");
  std::vector<TensorView> d;
  for (Buffer* b : all(start)) {
    d.push_back(arena.carve(b->shape));
    cuda::copy_to_device(b->view(), d.back());
  }
  conv2d_forward(c.p, forward_args(c, d));
  conv2d_backward(c.p, backward_args(c, d));
  cuda::synchronize();

  Conv2dTensors got = start;
  std::vector<Buffer*> got_buffers = all(got);
  for (size_t i = 0; i < d.size(); ++i) cuda::copy_to_host(d[i], got_buffers[i]->view());
  expect_matches_reference(c, got, reference(c, start));
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaConv2d, ::testing::ValuesIn(conv2d_cases()),
                         [](const auto& info) { return info.param.name; });

// No device needed: chunks hold at least one image and at most N, as many as the cap allows.
TEST(CudaConv2dPlan, ChunkSizes) {
  EXPECT_EQ(cuda::conv2d_chunk_images(5, 100, 1000), 5);
  EXPECT_EQ(cuda::conv2d_chunk_images(50, 100, 1000), 10);
  EXPECT_EQ(cuda::conv2d_chunk_images(50, 100, 199), 1);
  EXPECT_EQ(cuda::conv2d_chunk_images(50, 100, 50), 1);  // one image beyond the cap: still one
  EXPECT_EQ(cuda::conv2d_chunk_images(7, 0, 50), 7);     // nothing to hold
}

// No device needed: the forward's and dx's GEMMs take the way with fewer calls (per image a batch
// over the (model, group) pairs, or per pair a batch over the chunk's images); the weight
// gradient is one call per image (G per image for a shared input with groups).
TEST(CudaConv2dPlan, GemmCallsTakeTheShorterLoop) {
  struct Counter {
    std::vector<int64_t> batches;
    float* scratch(int64_t) { return nullptr; }
    void fill_bias(const float*, float*, int64_t, int64_t, int64_t) {}
    void bias_grad(const float*, float*, int64_t, int64_t, int64_t) {}
    void im2col(const conv_math::ConvGeometry&, const float*, float*, int64_t) {}
    void col2im(const conv_math::ConvGeometry&, const float*, float*, int64_t, bool) {}
    void gemm(const cuda::ColumnMajorGemm& g) { batches.push_back(g.batch); }
  };
  const auto calls = [](Conv2dParams p, bool backward) {
    p.bias = false;
    Counter c;
    // Never read (the counter runs no arithmetic); large enough for the plan's pointer offsets.
    std::vector<float> unread(1 << 16);
    const TensorView v(unread.data(), Shape{1});
    if (backward)
      cuda::conv2d_backward_plan(p, {.x = v, .weight = v, .dy = v, .dx = v, .dweight = v},
                                 cuda::kConv2dScratchCapFloats, c);
    else
      cuda::conv2d_forward_plan(p, {.x = v, .weight = v, .y = v}, cuda::kConv2dScratchCapFloats, c);
    return c.batches;
  };
  using Batches = std::vector<int64_t>;
  Conv2dParams p{.B = 2, .N = 5, .in_channels = 4, .out_channels = 4, .H = 4, .W = 4};
  EXPECT_EQ(calls(p, false), (Batches{5, 5}));  // 2 pairs: batches over the 5 images
  // dx: 2 pairs of 5 images, then dW per image
  EXPECT_EQ(calls(p, true), (Batches{5, 5, 2, 2, 2, 2, 2}));
  p.B = 8;
  EXPECT_EQ(calls(p, false), (Batches{8, 8, 8, 8, 8}));  // 5 images: batches over the 8 models
  p.B = 2, p.groups = 2, p.shared_input = true;          // 2 calls per image, batch B, or 4 pairs
  EXPECT_EQ(calls(p, false), (Batches{5, 5, 5, 5}));
  p.N = 1;
  EXPECT_EQ(calls(p, false), (Batches{2, 2}));
  EXPECT_EQ(calls(p, true), (Batches{4, 2, 2}));  // dx: one call over the 4 pairs; dW: G calls
}

// No device needed: host memory labelled as device memory raises before it is touched; tensors
// of one call on two devices raise.
TEST(CudaConv2dDevice, RaisesWithoutADeviceAndForMixedDevices) {
  const Conv2dParams p{.B = 2,
                       .N = 1,
                       .in_channels = 1,
                       .out_channels = 2,
                       .H = 3,
                       .W = 3,
                       .kernel_h = 3,
                       .kernel_w = 3,
                       .pad_h = 1,
                       .pad_w = 1,
                       .bias = false};
  std::vector<float> x(p.x_shape().numel()), w(p.weight_shape().numel()), y(p.y_shape().numel());
  const auto args = [&](Device x_device, Device w_device) {
    return Conv2dForwardArgs{.x = TensorView(x.data(), p.x_shape(), x_device),
                             .weight = TensorView(w.data(), p.weight_shape(), w_device),
                             .y = TensorView(y.data(), p.y_shape(), x_device)};
  };
  test::expect_error_containing_all([&] { conv2d_forward(p, args(Device::kCuda, Device::kCpu)); },
                                    {"conv2d weight is on the CPU", "runs on the CUDA device"});
  test::expect_error_containing_all([&] { conv2d_forward(p, args(Device::kCpu, Device::kCuda)); },
                                    {"conv2d weight is on the CUDA device", "runs on the CPU"});
  if (cuda::device_available()) GTEST_SKIP() << "a CUDA device is present";
  test::expect_error_containing([&] { conv2d_forward(p, args(Device::kCuda, Device::kCuda)); },
                                "no CUDA device");
  const TensorView dy(y.data(), p.y_shape(), Device::kCuda);
  test::expect_error_containing(
      [&] {
        conv2d_backward(p, {.x = TensorView(x.data(), p.x_shape(), Device::kCuda),
                            .weight = TensorView(w.data(), p.weight_shape(), Device::kCuda),
                            .dy = dy});
      },
      "no CUDA device");
}

// No device needed: the fused problem as one cuDNN convolution. Per-model inputs are a grouped
// convolution with B*groups groups whose group j = b*groups + g reads and writes exactly model b's
// group g's channels; a shared input with one group is one convolution of B*C_out outputs; a
// shared input with groups > 1 is refused (cuDNN would interleave the models' outputs).
TEST(CudnnConvShapes, TheFusedLayoutIsOneGroupedConvolution) {
  const Conv2dParams p{.B = 3,
                       .N = 5,
                       .in_channels = 4,
                       .out_channels = 6,
                       .H = 9,
                       .W = 7,
                       .kernel_h = 3,
                       .kernel_w = 2,
                       .stride_h = 2,
                       .stride_w = 1,
                       .pad_h = 1,
                       .pad_w = 0,
                       .dilation_h = 1,
                       .dilation_w = 2,
                       .groups = 2};
  const auto s = cuda::cudnn_conv_shapes(p);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->x.dims, (std::array<int, 4>{5, 12, 9, 7}));
  EXPECT_EQ(s->w, (std::array<int, 4>{18, 2, 3, 2}));
  EXPECT_EQ(s->y.dims,
            (std::array<int, 4>{5, 18, static_cast<int>(p.out_h()), static_cast<int>(p.out_w())}));
  EXPECT_EQ(s->bias.dims, (std::array<int, 4>{1, 18, 1, 1}));
  EXPECT_EQ(s->groups, 6);
  EXPECT_EQ(s->calls, 1);
  EXPECT_EQ((std::array<int, 6>{s->pad_h, s->pad_w, s->stride_h, s->stride_w, s->dilation_h,
                                s->dilation_w}),
            (std::array<int, 6>{1, 0, 2, 1, 1, 2}));
  // cuDNN's group j takes input channels [j*C_in/groups, ...) and output channels
  // [j*C_out/groups, ...): model b's group g in the fused layout.
  const int64_t cig = p.in_channels / p.groups, cog = p.out_channels / p.groups;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t g = 0; g < p.groups; ++g) {
      const int64_t j = b * p.groups + g;
      EXPECT_EQ(j * (s->x.dims[1] / s->groups), b * p.in_channels + g * cig);
      EXPECT_EQ(j * (s->y.dims[1] / s->groups), b * p.out_channels + g * cog);
      EXPECT_EQ(j * (s->w[0] / s->groups), b * p.out_channels + g * cog) << "weight rows";
    }

  Conv2dParams shared = p;
  shared.groups = 1;
  shared.shared_input = true;
  const auto t = cuda::cudnn_conv_shapes(shared);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->x.dims, (std::array<int, 4>{5, 4, 9, 7}));
  EXPECT_EQ(t->w, (std::array<int, 4>{18, 4, 3, 2}));
  EXPECT_EQ(t->groups, 1);

  shared.groups = 2;
  EXPECT_FALSE(cuda::cudnn_conv_shapes(shared).has_value());
  Conv2dParams huge = p;
  huge.N = int64_t{1} << 31;
  EXPECT_FALSE(cuda::cudnn_conv_shapes(huge).has_value());
}

// The offsets, from the fused tensor's start, that an NCHW descriptor starting `start` floats in
// reaches, in its (n, c, h, w) order.
std::vector<int64_t> reached(const cuda::CudnnTensorShape& t, int64_t start) {
  std::vector<int64_t> out;
  for (int n = 0; n < t.dims[0]; ++n)
    for (int c = 0; c < t.dims[1]; ++c)
      for (int h = 0; h < t.dims[2]; ++h)
        for (int w = 0; w < t.dims[3]; ++w)
          out.push_back(start + int64_t{n} * t.strides[0] + int64_t{c} * t.strides[1] +
                        int64_t{h} * t.strides[2] + int64_t{w} * t.strides[3]);
  return out;
}

// Channels [c0, c0 + C) of every image of a fused [N, channels, H, W] tensor, in (n, c, h, w)
// order: what one model's (or one call's) view must address.
std::vector<int64_t> channel_slice(int64_t N, int64_t channels, int64_t c0, int64_t C, int64_t H,
                                   int64_t W) {
  std::vector<int64_t> out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = c0; c < c0 + C; ++c)
      for (int64_t i = 0; i < H * W; ++i) out.push_back((n * channels + c) * H * W + i);
  return out;
}

// A packed tensor of `dims`, as the filter and bias descriptors are.
cuda::CudnnTensorShape packed(const std::array<int, 4>& dims) {
  return {dims, {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1}};
}

// No device needed: the per-model mapping's call b addresses exactly model b's elements of the
// fused x, y (and so dx, dy), weight and bias, element by element in the single-model layout's
// order, for every case of the CUDA case list (shared input, groups, depthwise, B in
// {1, 2, 3, 8}); a shared input's calls all read the whole x. The grouped mapping's one call
// addresses every element of each tensor, in order.
TEST(CudnnConvShapes, PerModelCallsAddressEachModelsElements) {
  for (const Conv2dCudaCase& c : conv2d_cases()) {
    SCOPED_TRACE(c.name);
    const Conv2dParams& p = c.p;
    const auto s = cuda::cudnn_conv_shapes(p, cuda::CudnnConvMapping::kPerModel);
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(s->calls, p.B);
    EXPECT_EQ(s->groups, p.groups);
    EXPECT_EQ((std::array<int64_t, 6>{s->pad_h, s->pad_w, s->stride_h, s->stride_w, s->dilation_h,
                                      s->dilation_w}),
              (std::array<int64_t, 6>{p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dilation_h,
                                      p.dilation_w}));
    const int64_t OH = p.out_h(), OW = p.out_w();
    const int64_t x_channels = p.x_shape()[1];
    const int64_t w_model = p.weight_shape().numel() / p.B;
    for (int64_t b = 0; b < p.B; ++b) {
      SCOPED_TRACE(fmt::format("model {}", b));
      const int64_t x_c0 = p.shared_input ? 0 : b * p.in_channels;
      EXPECT_EQ(reached(s->x, b * s->x_step),
                channel_slice(p.N, x_channels, x_c0, p.in_channels, p.H, p.W));
      EXPECT_EQ(
          reached(s->y, b * s->y_step),
          channel_slice(p.N, p.B * p.out_channels, b * p.out_channels, p.out_channels, OH, OW));
      std::vector<int64_t> w(static_cast<size_t>(w_model)),
          bias(static_cast<size_t>(p.out_channels));
      for (int64_t i = 0; i < w_model; ++i) w[i] = b * w_model + i;
      for (int64_t i = 0; i < p.out_channels; ++i) bias[i] = b * p.out_channels + i;
      EXPECT_EQ(reached(packed(s->w), b * s->w_step), w);
      EXPECT_EQ(reached(s->bias, b * s->bias_step), bias);
    }
    const auto g = cuda::cudnn_conv_shapes(p, cuda::CudnnConvMapping::kGrouped);
    if (!g) {
      EXPECT_TRUE(p.shared_input && p.groups > 1);
      continue;
    }
    ASSERT_EQ(g->calls, 1);
    EXPECT_EQ(reached(g->x, 0), channel_slice(p.N, x_channels, 0, x_channels, p.H, p.W));
    EXPECT_EQ(reached(g->y, 0),
              channel_slice(p.N, p.B * p.out_channels, 0, p.B * p.out_channels, OH, OW));
  }
}

// No device needed: a size, stride or tensor span beyond cuDNN's 32-bit ints is refused under
// either mapping; sizes just inside are not.
TEST(CudnnConvShapes, SizesBeyond32BitIntsAreRefused) {
  using cuda::CudnnConvMapping;
  const auto both = [](const Conv2dParams& p) {
    return std::array<bool, 2>{cuda::cudnn_conv_shapes(p, CudnnConvMapping::kGrouped).has_value(),
                               cuda::cudnn_conv_shapes(p, CudnnConvMapping::kPerModel).has_value()};
  };
  // Model images of 2^29 floats, the fused image 2^30: every stride and span fits.
  Conv2dParams p{.B = 2,
                 .N = 1,
                 .in_channels = 1,
                 .out_channels = 1,
                 .H = 16384,
                 .W = 32768,
                 .kernel_h = 3,
                 .kernel_w = 3,
                 .pad_h = 1,
                 .pad_w = 1};
  EXPECT_EQ(both(p), (std::array<bool, 2>{true, true}));
  // Three such images span 2^31 + 2^29 floats, though each size and stride fits.
  p.N = 3;
  EXPECT_EQ(both(p), (std::array<bool, 2>{false, false}));
  // A fused image of 2^31 floats: the per-model view's image stride overflows.
  p.N = 1;
  p.B = 4;
  EXPECT_EQ(both(p), (std::array<bool, 2>{false, false}));
  // A shared input with groups > 1: only per model, until the batch overflows.
  Conv2dParams shared{.B = 3, .N = 2, .in_channels = 4, .out_channels = 4, .H = 5, .W = 5};
  shared.shared_input = true;
  shared.groups = 2;
  EXPECT_EQ(both(shared), (std::array<bool, 2>{false, true}));
  shared.N = int64_t{1} << 31;
  EXPECT_EQ(both(shared), (std::array<bool, 2>{false, false}));
  Conv2dParams wide{.B = 2, .N = 1, .in_channels = 1, .out_channels = 1, .H = 1, .W = 1};
  wide.out_channels = int64_t{1} << 31;
  EXPECT_EQ(both(wide), (std::array<bool, 2>{false, false}));
}

// No device needed: which backend runs, by HFTA_CUDA_CONV, whether cuDNN loads and whether it can
// express the problem.
TEST(CudnnConvShapes, BackendChoice) {
  const Conv2dParams p{.B = 2, .N = 1, .in_channels = 2, .out_channels = 2, .H = 4, .W = 4};
  Conv2dParams shared_grouped = p;
  shared_grouped.shared_input = true;
  shared_grouped.groups = 2;
  using cuda::CudaConvBackend;
  EXPECT_TRUE(cuda::conv2d_uses_cudnn(p, CudaConvBackend::kAuto, true));
  EXPECT_FALSE(cuda::conv2d_uses_cudnn(p, CudaConvBackend::kAuto, false));
  EXPECT_FALSE(cuda::conv2d_uses_cudnn(shared_grouped, CudaConvBackend::kAuto, true));
  EXPECT_FALSE(cuda::conv2d_uses_cudnn(p, CudaConvBackend::kGemm, true));
  EXPECT_TRUE(cuda::conv2d_uses_cudnn(p, CudaConvBackend::kCudnn, true));
  test::expect_error_containing(
      [&] { cuda::conv2d_uses_cudnn(shared_grouped, CudaConvBackend::kCudnn, true); },
      "a shared input with groups > 1");
  test::expect_error_containing([&] { cuda::conv2d_uses_cudnn(p, CudaConvBackend::kCudnn, false); },
                                "HFTA_CUDA_CONV=cudnn");
  // Per model, a shared input with groups > 1 is each model's own grouped convolution.
  EXPECT_TRUE(cuda::conv2d_uses_cudnn(p, CudaConvBackend::kCudnnPerModel, true));
  EXPECT_TRUE(cuda::conv2d_uses_cudnn(shared_grouped, CudaConvBackend::kCudnnPerModel, true));
  test::expect_error_containing(
      [&] { cuda::conv2d_uses_cudnn(p, CudaConvBackend::kCudnnPerModel, false); },
      "HFTA_CUDA_CONV=cudnn-per-model: ");
  Conv2dParams huge = p;
  huge.N = int64_t{1} << 31;
  test::expect_error_containing_all(
      [&] { cuda::conv2d_uses_cudnn(huge, CudaConvBackend::kCudnnPerModel, true); },
      {"HFTA_CUDA_CONV=cudnn-per-model", "32-bit ints"});
  EXPECT_EQ(cuda::cudnn_conv_mapping(CudaConvBackend::kCudnnPerModel),
            cuda::CudnnConvMapping::kPerModel);
  EXPECT_EQ(cuda::cudnn_conv_mapping(CudaConvBackend::kAuto), cuda::CudnnConvMapping::kGrouped);
  {
    const ScopedConvBackend unset(nullptr);
    EXPECT_EQ(cuda::cuda_conv_backend_from_env(), CudaConvBackend::kAuto);
  }
  {
    const ScopedConvBackend gemm("gemm");
    EXPECT_EQ(cuda::cuda_conv_backend_from_env(), CudaConvBackend::kGemm);
  }
  {
    const ScopedConvBackend per_model("cudnn-per-model");
    EXPECT_EQ(cuda::cuda_conv_backend_from_env(), CudaConvBackend::kCudnnPerModel);
  }
  {
    const ScopedConvBackend bad("fast");
    test::expect_error_containing(
        [] { cuda::cuda_conv_backend_from_env(); },
        "HFTA_CUDA_CONV=fast: choose auto (the default), gemm, cudnn, cudnn-per-model or implicit");
  }
  {
    const test::ScopedEnv unset("HFTA_CUDNN_BACKWARD", nullptr);
    EXPECT_FALSE(cuda::cudnn_atomic_backward_from_env());
  }
  {
    const test::ScopedEnv atomic("HFTA_CUDNN_BACKWARD", "atomic");
    EXPECT_TRUE(cuda::cudnn_atomic_backward_from_env());
    const bool was = deterministic();
    set_deterministic(true);  // deterministic mode keeps the fixed-order algorithms
    EXPECT_FALSE(cuda::cudnn_atomic_backward_from_env());
    set_deterministic(was);
  }
  {
    const test::ScopedEnv bad("HFTA_CUDNN_BACKWARD", "fast");
    test::expect_error_containing(
        [] { cuda::cudnn_atomic_backward_from_env(); },
        "HFTA_CUDNN_BACKWARD=fast: choose deterministic (the default) or atomic");
  }
  if (!cuda::device_available()) {
    EXPECT_FALSE(cuda::cudnn_available());
    EXPECT_NE(cuda::cudnn_status().find("no CUDA device"), std::string::npos)
        << cuda::cudnn_status();
  }
}

}  // namespace
}  // namespace hfta
