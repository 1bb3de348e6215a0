// The implicit-GEMM conv2d (fused_ops/cuda/conv2d_implicit.h, HFTA_CUDA_CONV=implicit).
//
// Its point is determinism: every output element is one thread's fmaf chain in a fixed order
// (fused_ops/cuda/conv2d_implicit_math.h), so the host mirror below, which runs the math header's
// per-element functions over every index, must give the device's bits, and model b of a fused
// array must get exactly the bits of model b run alone (B = 1).
// Runs anywhere: the mirror against the reference (fused_ops/ref/conv2d.cpp), over the case list
// of conv2d_cuda_cases.h plus cases whose weight gradient spans several chunks; fused == serial
// bit for bit in the mirror; the env parsing and the size checks. On a GPU
// (ImplicitConv2d.DeviceEqualsMirrorBitForBit, skipped without one): the real op through the
// dispatching conv2d_forward / conv2d_backward on device arenas, bit for bit against the mirror.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "conv2d_cuda_cases.h"
#include "fused_ops/conv2d.h"
#include "fused_ops/cuda/conv2d_cudnn.h"
#include "fused_ops/cuda/conv2d_implicit.h"
#include "fused_ops/cuda/conv2d_implicit_math.h"
#include "fused_ops/cuda/conv2d_math.h"
#include "fused_ops/cuda/launch.cuh"
#include "test_util.h"

namespace hfta {
namespace {

using namespace conv2d_cuda_test;  // NOLINT(google-build-using-namespace): the shared case list
namespace im = implicit_math;

// conv2d_kernels.cu's conv_bias_grad on the host: per channel, kThreads shares
// (conv_math::bias_grad_thread_sum), added as the kernel's tree, rounded once onto dbias.
void mirror_bias_grad(const float* dy, float* dbias, int64_t N, int64_t BC, int64_t P) {
  constexpr int64_t threads = cuda::kernels::kThreads;
  for (int64_t c = 0; c < BC; ++c) {
    double partial[threads];
    for (int64_t t = 0; t < threads; ++t)
      partial[t] = conv_math::bias_grad_thread_sum(dy, N, BC, P, c, t, threads);
    for (int64_t half = threads / 2; half > 0; half /= 2)
      for (int64_t t = 0; t < half; ++t) partial[t] += partial[t + half];
    dbias[c] += static_cast<float>(partial[0]);
  }
}

// The op on host tensors: each element by the math header's function for it, as the kernels'
// threads compute it.
void mirror_forward(const Conv2dParams& p, const Conv2dForwardArgs& a) {
  const im::ImplicitGeometry g = cuda::implicit_conv_geometry(p);
  const int64_t P = g.positions();
  for (int64_t n = 0; n < g.N; ++n)
    for (int b = 0; b < g.B; ++b)
      for (int co = 0; co < g.out_channels; ++co)
        for (int q = 0; q < P; ++q)
          a.y.data[n * g.y_image() + (int64_t{b} * g.out_channels + co) * P + q] =
              im::forward_value(g, a.x.data, a.weight.data, a.bias.data, n, b, co, q);
}

void mirror_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a) {
  const im::ImplicitGeometry g = cuda::implicit_conv_geometry(p);
  if (p.bias && !a.dbias.empty())
    mirror_bias_grad(a.dy.data, a.dbias.data, p.N, p.B * p.out_channels, g.positions());
  if (!a.dx.empty())
    for (int64_t n = 0; n < g.N; ++n)
      for (int c = 0; c < g.x_channels(); ++c)
        for (int q = 0; q < g.plane(); ++q) {
          float& dx = a.dx.data[n * g.x_image() + int64_t{c} * g.plane() + q];
          dx = im::dx_value(g, a.weight.data, a.dy.data, n, c, q, dx, a.accumulate_dx);
        }
  if (a.dweight.empty()) return;
  const int chunks = g.dweight_chunks();
  const int64_t K = g.k_forward(), slice = int64_t{g.B} * g.out_channels * K;
  std::vector<float> partials(static_cast<size_t>(chunks * slice));
  for (int chunk = 0; chunk < chunks; ++chunk)
    for (int b = 0; b < g.B; ++b)
      for (int co = 0; co < g.out_channels; ++co)
        for (int k = 0; k < K; ++k)
          partials[chunk * slice + (int64_t{b} * g.out_channels + co) * K + k] =
              im::dweight_chunk_sum(g, a.x.data, a.dy.data, b, co, k, chunk);
  for (int64_t e = 0; e < slice; ++e)
    a.dweight.data[e] = im::dweight_value(a.dweight.data[e], partials.data() + e, slice, chunks);
}

// The mirror's result from the case's seeded starting values.
Conv2dTensors run_mirror(const Conv2dCudaCase& c, const Conv2dTensors& start) {
  Conv2dTensors got = start;
  std::vector<TensorView> d;
  for (Buffer* b : all(got)) d.push_back(b->view());
  mirror_forward(c.p, forward_args(c, d));
  mirror_backward(c.p, backward_args(c, d));
  return got;
}

// Same bits everywhere (NaN payloads and the sign of zero included).
void expect_bits(const float* got, const float* want, int64_t n, const std::string& what) {
  int64_t misses = 0, first = -1;
  for (int64_t i = 0; i < n; ++i)
    if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i]))
      if (misses++ == 0) first = i;
  EXPECT_EQ(misses, 0) << what << ": " << misses << " of " << n
                       << " elements differ in bits; first " << first << ": "
                       << (first >= 0 ? got[first] : 0.0f) << " vs "
                       << (first >= 0 ? want[first] : 0.0f);
}
void expect_bits(const Buffer& got, const Buffer& want, const std::string& what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  expect_bits(got.values.data(), want.values.data(), got.numel(), what);
}

// conv2d_cuda_cases.h's list, plus weight gradients of N*OH*OW beyond one kDweightChunk (2 and 3
// chunks, the last one partial) and a layer wide enough for the kernels' largest tile in every
// direction.
std::vector<Conv2dCudaCase> implicit_cases() {
  std::vector<Conv2dCudaCase> cases = conv2d_cases();
  Conv2dCudaCase two{.name = "chunks2_N3_c2to3_40x40_B2_acc",
                     .p = {.B = 2,
                           .N = 3,
                           .in_channels = 2,
                           .out_channels = 3,
                           .H = 40,
                           .W = 40,
                           .kernel_h = 3,
                           .kernel_w = 3,
                           .pad_h = 1,
                           .pad_w = 1},
                     .accumulate_dx = true};
  Conv2dCudaCase three{.name = "chunks3_N4_c4to4_48x48_g2_B3_shared",
                       .p = {.B = 3,
                             .N = 4,
                             .in_channels = 4,
                             .out_channels = 4,
                             .H = 48,
                             .W = 48,
                             .kernel_h = 3,
                             .kernel_w = 3,
                             .pad_h = 1,
                             .pad_w = 1,
                             .groups = 2,
                             .shared_input = true}};
  // Channels and positions past every tile's rows and columns, partial tiles at both ends, and
  // a reduction of 630 (a partial last step of 16).
  Conv2dCudaCase wide{.name = "wide_N2_c70to70_11x11_B2_acc",
                      .p = {.B = 2,
                            .N = 2,
                            .in_channels = 70,
                            .out_channels = 70,
                            .H = 11,
                            .W = 11,
                            .kernel_h = 3,
                            .kernel_w = 3,
                            .pad_h = 1,
                            .pad_w = 1},
                      .accumulate_dx = true};
  cases.push_back(two);
  cases.push_back(three);
  cases.push_back(wide);
  return cases;
}

class ImplicitConv2d : public ::testing::TestWithParam<Conv2dCudaCase> {};

// No device needed: the mirror (the kernels' arithmetic) against the reference's double sums,
// within conv2d_cuda_cases.h's fp32-sum tolerances; y starts NaN, parameter gradients random,
// dx NaN or random (accumulate_dx), an unwanted dx untouched.
TEST_P(ImplicitConv2d, MirrorMatchesReference) {
  const Conv2dCudaCase& c = GetParam();
  const uint64_t seed = test::case_seed(c.name);
  HFTA_CASE_TRACE(seed);
  RngStream rng(seed, 0);
  const Conv2dTensors start = make_inputs(c, rng);
  expect_matches_reference(c, run_mirror(c, start), reference(c, start));
}

// Model b's channels [c0, c0 + channels) of each image of a [N, total, plane] buffer, as a
// [N, channels, plane] buffer of shape `shape`.
// NOLINTNEXTLINE(bugprone-easily-swappable-parameters): a test helper with named call sites
Buffer channel_slice(const Buffer& full, Shape shape, int64_t N, int64_t total, int64_t c0,
                     int64_t channels, int64_t plane) {
  Buffer out(shape);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < channels * plane; ++i)
      out.values[n * channels * plane + i] = full.values[(n * total + c0) * plane + i];
  return out;
}
Buffer flat_slice(const Buffer& full, Shape shape, int64_t offset) {
  Buffer out(shape);
  for (int64_t i = 0; i < out.numel(); ++i) out.values[i] = full.values[offset + i];
  return out;
}

// No device needed: model b of the fused run has the bits of the B = 1 run on model b's slices
// (y, dx of a per-model input, dweight, dbias), whatever B is.
TEST_P(ImplicitConv2d, FusedEqualsSerialBitForBit) {
  const Conv2dCudaCase& c = GetParam();
  const Conv2dParams& p = c.p;
  if (p.B == 1) GTEST_SKIP() << "B = 1 is the serial run";
  const uint64_t seed = test::case_seed(c.name);
  HFTA_CASE_TRACE(seed);
  RngStream rng(seed, 0);
  const Conv2dTensors start = make_inputs(c, rng);
  const Conv2dTensors fused = run_mirror(c, start);

  Conv2dCudaCase one = c;
  one.p.B = 1;
  const int64_t plane = p.H * p.W, P = p.out_h() * p.out_w();
  const int64_t w_model = p.weight_shape().numel() / p.B;
  for (int64_t b = 0; b < p.B; ++b) {
    SCOPED_TRACE(fmt::format("model {}", b));
    const int64_t x_c0 = p.shared_input ? 0 : b * p.in_channels;
    const int64_t x_total = p.shared_input ? p.in_channels : p.B * p.in_channels;
    const auto x_part = [&](const Buffer& full) {
      return channel_slice(full, one.p.x_shape(), p.N, x_total, x_c0, p.in_channels, plane);
    };
    const auto y_part = [&](const Buffer& full) {
      return channel_slice(full, one.p.y_shape(), p.N, p.B * p.out_channels, b * p.out_channels,
                           p.out_channels, P);
    };
    Conv2dTensors serial_start{
        .x = x_part(start.x),
        .weight = flat_slice(start.weight, one.p.weight_shape(), b * w_model),
        .bias = flat_slice(start.bias, one.p.bias_shape(), b * p.out_channels),
        .dy = y_part(start.dy),
        .y = y_part(start.y),
        .dx = x_part(start.dx),
        .dweight = flat_slice(start.dweight, one.p.weight_shape(), b * w_model),
        .dbias = flat_slice(start.dbias, one.p.bias_shape(), b * p.out_channels)};
    const Conv2dTensors serial = run_mirror(one, serial_start);
    expect_bits(y_part(fused.y), serial.y, "y");
    if (!p.shared_input) expect_bits(x_part(fused.dx), serial.dx, "dx");
    expect_bits(flat_slice(fused.dweight, one.p.weight_shape(), b * w_model), serial.dweight,
                "dweight");
    expect_bits(flat_slice(fused.dbias, one.p.bias_shape(), b * p.out_channels), serial.dbias,
                "dbias");
  }
}

// On a GPU: the op under HFTA_CUDA_CONV=implicit, every tensor in a device arena, equals the
// mirror bit for bit (so also the reference, within the tolerances above).
TEST_P(ImplicitConv2d, DeviceEqualsMirrorBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const Conv2dCudaCase& c = GetParam();
  const uint64_t seed = test::case_seed(c.name);
  HFTA_CASE_TRACE(seed);
  RngStream rng(seed, 0);
  Conv2dTensors start = make_inputs(c, rng);
  const ScopedConvBackend scoped("implicit");

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
  Conv2dTensors want = run_mirror(c, start);
  const char* names[] = {"x", "weight", "bias", "dy", "y", "dx", "dweight", "dbias"};
  std::vector<Buffer*> want_buffers = all(want);
  for (size_t i = 0; i < d.size(); ++i) expect_bits(*got_buffers[i], *want_buffers[i], names[i]);
}

INSTANTIATE_TEST_SUITE_P(Cases, ImplicitConv2d, ::testing::ValuesIn(implicit_cases()),
                         [](const auto& info) { return info.param.name; });

// No device needed: HFTA_CUDA_CONV=implicit selects the kernels (never cuDNN); a bad value's
// error lists every choice.
TEST(ImplicitConv2dBackend, EnvSelectsImplicit) {
  using cuda::CudaConvBackend;
  {
    const ScopedConvBackend implicit("implicit");
    EXPECT_EQ(cuda::cuda_conv_backend_from_env(), CudaConvBackend::kImplicit);
  }
  {
    const ScopedConvBackend unset(nullptr);
    EXPECT_EQ(cuda::cuda_conv_backend_from_env(), CudaConvBackend::kAuto);
  }
  {
    const ScopedConvBackend bad("implicit_gemm");
    test::expect_error_containing_all(
        [] { cuda::cuda_conv_backend_from_env(); },
        {"HFTA_CUDA_CONV=implicit_gemm", "auto (the default)", "gemm", "cudnn", "or implicit"});
  }
  const Conv2dParams p{.B = 2, .N = 1, .in_channels = 2, .out_channels = 2, .H = 4, .W = 4};
  EXPECT_FALSE(cuda::conv2d_uses_cudnn(p, CudaConvBackend::kImplicit, true));
}

// No device needed: sizes beyond the kernels' 32-bit indices raise, naming the size.
TEST(ImplicitConv2dBackend, SizesBeyond32BitIndicesRaise) {
  Conv2dParams p{.B = 2, .N = 1, .in_channels = 2, .out_channels = 2, .H = 4, .W = 4};
  EXPECT_EQ(cuda::implicit_conv_geometry(p).dweight_chunks(), 1);
  p.N = int64_t{1} << 28;  // N*OH*OW = 2^32
  test::expect_error_containing([&] { cuda::implicit_conv_geometry(p); }, "N*OH*OW");
  p.N = 1;
  p.H = p.W = 1 << 16;
  test::expect_error_containing([&] { cuda::implicit_conv_geometry(p); }, "C_in*H*W");
  p.H = p.W = 4;
  p.B = int64_t{1} << 31;
  test::expect_error_containing([&] { cuda::implicit_conv_geometry(p); }, "32-bit");
}

// No device needed: the weight gradient's chunks depend on N*OH*OW only, and its passes over the
// models keep the partial sums within the cap (at least one model a pass).
TEST(ImplicitConv2dBackend, WeightGradientChunksAndPasses) {
  im::ImplicitGeometry g{.B = 8, .N = 2, .in_channels = 64, .out_channels = 64, .H = 64, .W = 64};
  g.kernel_h = g.kernel_w = 3, g.pad_h = g.pad_w = 1, g.out_h = g.out_w = 64;
  EXPECT_EQ(g.dweight_chunks(), 2);  // 8192 positions
  EXPECT_EQ(cuda::implicit_dweight_models_per_pass(g), 8);
  g.N = 5;  // 20480 positions: 5 chunks
  EXPECT_EQ(g.dweight_chunks(), 5);
  g.out_channels = g.in_channels = 4096;  // a model's 5 chunks of 151M weights: one per pass
  EXPECT_EQ(cuda::implicit_dweight_models_per_pass(g), 1);
  g.out_channels = g.in_channels = 512;  // 5 * 2.36M floats a model: 5 models in 64M
  EXPECT_EQ(cuda::implicit_dweight_models_per_pass(g), 5);
}

}  // namespace
}  // namespace hfta
