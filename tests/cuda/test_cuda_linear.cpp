// The CUDA fused linear (fused_ops/cuda/linear.cpp) against B reference single-model runs
// (fused_ops/ref/linear.cpp), through the dispatching linear_forward / linear_backward with every
// tensor in a device arena. Outputs start as NaN, so an element the kernels forget shows up;
// parameter gradients start random and must end at start + gradient; dx starts as NaN, or random
// with accumulate_dx. Without a CUDA device these tests skip. Run anywhere: the same cases through
// the op's GEMM plan on the host (ColumnMajorGemmsMatchReferenceOnHost), and CudaRuntime.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/linear_gemms.h"
#include "fused_ops/linear.h"
#include "host_gemm.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
using test::expect_close;
using test::random_buffer;

#define SKIP_WITHOUT_CUDA_DEVICE()                                                              \
  do {                                                                                          \
    if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status(); \
  } while (0)

struct LinearCase {
  std::string name;
  LinearParams p;
  bool accumulate_dx = false;
  bool want_dx = true;
};

void PrintTo(const LinearCase& c, std::ostream* os) { *os << c.name; }

// Sizes on both sides of 32 (cuBLAS tiles, the bias kernels' 32-column tiles and 8 row lanes).
std::vector<LinearCase> linear_cases() {
  struct Size {
    int64_t N, fi, fo;
  };
  const Size sizes[] = {{1, 1, 1},    {17, 33, 1}, {33, 17, 64},
                        {64, 64, 33}, {1, 64, 17}, {17, 1, 33}};
  std::vector<LinearCase> cases;
  for (const Size& s : sizes)
    for (int64_t B : {1, 2, 3, 8})
      for (bool shared : {false, true})
        for (bool bias : {true, false}) {
          LinearCase c;
          c.p = LinearParams{.B = B,
                             .N = s.N,
                             .in_features = s.fi,
                             .out_features = s.fo,
                             .bias = bias,
                             .shared_input = shared};
          c.accumulate_dx = (s.N + B + (bias ? 1 : 0)) % 2 == 0;
          c.want_dx = !(shared && B == 8 && s.fo == 33);  // a first layer: no dx
          c.name = fmt::format("N{}_fi{}_fo{}_B{}{}{}{}{}", s.N, s.fi, s.fo, B,
                               shared ? "_shared" : "", bias ? "" : "_nobias",
                               c.accumulate_dx ? "_acc" : "", c.want_dx ? "" : "_nodx");
          cases.push_back(c);
        }
  return cases;
}

Buffer nan_buffer(Shape s) { return Buffer(s, std::numeric_limits<float>::quiet_NaN()); }

// One case's tensors on the host: the inputs and the starting values of what the op writes.
struct LinearTensors {
  Buffer x, weight, bias, dy, y, dx, dweight, dbias;
};

LinearTensors make_inputs(const LinearCase& c, RngStream& rng) {
  const LinearParams& p = c.p;
  LinearTensors t;
  t.x = random_buffer(p.x_shape(), rng);
  t.weight = random_buffer(p.weight_shape(), rng);
  t.bias = random_buffer(p.bias_shape(), rng);
  t.dy = random_buffer(p.y_shape(), rng);
  t.y = nan_buffer(p.y_shape());
  t.dx = c.accumulate_dx ? random_buffer(p.x_shape(), rng) : nan_buffer(p.x_shape());
  t.dweight = random_buffer(p.weight_shape(), rng);
  t.dbias = random_buffer(p.bias_shape(), rng);
  return t;
}

// The tensors of one call, for tensors `d` (host or device): unwanted ones are empty views.
LinearForwardArgs forward_args(const LinearCase& c, const std::vector<TensorView>& d) {
  return {.x = d[0], .weight = d[1], .bias = c.p.bias ? d[2] : TensorView(), .y = d[4]};
}
LinearBackwardArgs backward_args(const LinearCase& c, const std::vector<TensorView>& d) {
  return {.x = d[0],
          .weight = d[1],
          .dy = d[3],
          .dx = c.want_dx ? d[5] : TensorView(),
          .dweight = d[6],
          .dbias = c.p.bias ? d[7] : TensorView(),
          .accumulate_dx = c.accumulate_dx};
}

// What the op must leave in `start` (y, dx, dweight, dbias): B reference runs, one per model
// (B = 1, its own input), from `start`'s inputs and gradient starts.
LinearTensors reference(const LinearCase& c, const LinearTensors& start) {
  const LinearParams& p = c.p;
  LinearParams one = p;
  one.B = 1;
  one.shared_input = false;
  const int64_t x_numel = p.N * p.in_features, y_numel = p.N * p.out_features;
  const int64_t w_numel = p.in_features * p.out_features;
  LinearTensors want = start;
  want.y = Buffer(p.y_shape());
  if (!c.accumulate_dx && c.want_dx) want.dx = Buffer(p.x_shape());
  for (int64_t b = 0; b < p.B; ++b) {
    const float* xb = start.x.values.data() + (p.shared_input ? 0 : b * x_numel);
    Buffer xm(one.x_shape()), dxm(one.x_shape(), std::numeric_limits<float>::quiet_NaN());
    std::copy(xb, xb + x_numel, xm.data());
    const TensorView wm(want.weight.data() + b * w_numel, one.weight_shape());
    const TensorView bm(want.bias.data() + b * p.out_features, one.bias_shape());
    ref::linear_forward(one, {.x = xm.view(),
                              .weight = wm,
                              .bias = p.bias ? bm : TensorView(),
                              .y = TensorView(want.y.data() + b * y_numel, one.y_shape())});
    ref::linear_backward(
        one, {.x = xm.view(),
              .weight = wm,
              .dy = TensorView(want.dy.data() + b * y_numel, one.y_shape()),
              .dx = dxm.view(),
              .dweight = TensorView(want.dweight.data() + b * w_numel, one.weight_shape()),
              .dbias = p.bias ? TensorView(want.dbias.data() + b * p.out_features, one.bias_shape())
                              : TensorView()});
    if (!c.want_dx) continue;  // dx not wanted: left as it was
    float* dxb = want.dx.data() + (p.shared_input ? 0 : b * x_numel);
    for (int64_t i = 0; i < x_numel; ++i) dxb[i] += dxm.values[i];
  }
  return want;
}

// Equal where NaN (garbage left alone), else exactly equal.
void expect_same(const Buffer& got, const Buffer& want, const char* what) {
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_TRUE(std::isnan(want.values[i]) ? std::isnan(got.values[i])
                                           : got.values[i] == want.values[i])
        << what << "[" << i << "] = " << got.values[i] << ", expected " << want.values[i];
}

void expect_matches_reference(const LinearCase& c, const LinearTensors& got,
                              const LinearTensors& want) {
  const LinearParams& p = c.p;
  // fp32 GEMM vs the double-accumulated reference: error grows like sqrt(K) * 2^-24 * |terms|;
  // a shared input's gradient adds B models' errors.
  const double tol = 1e-5 * std::sqrt(double(std::max({p.in_features, p.out_features, p.N})));
  expect_close(got.y, want.y, tol, tol, "y");
  expect_close(got.dweight, want.dweight, tol, tol, "dweight");
  if (p.bias)
    expect_close(got.dbias, want.dbias, tol, tol, "dbias");
  else
    expect_same(got.dbias, want.dbias, "dbias (bias off: untouched)");
  const double dx_tol = p.shared_input ? tol * std::sqrt(double(p.B)) : tol;
  if (c.want_dx)
    expect_close(got.dx, want.dx, dx_tol, dx_tol, "dx");
  else
    expect_same(got.dx, want.dx, "dx (not wanted: untouched)");
}

std::vector<Buffer*> all(LinearTensors& t) {
  return {&t.x, &t.weight, &t.bias, &t.dy, &t.y, &t.dx, &t.dweight, &t.dbias};
}

class CudaLinear : public ::testing::TestWithParam<LinearCase> {};

TEST_P(CudaLinear, MatchesReferencePerModel) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const LinearCase& c = GetParam();
  const uint64_t seed = test::case_seed(c.name);
  HFTA_CASE_TRACE(seed);
  RngStream rng(seed, 0);
  LinearTensors start = make_inputs(c, rng);

  // Every tensor in one device arena: counted, then carved for real.
  cuda::DeviceArena counting;
  for (Buffer* b : all(start)) counting.carve(b->shape);
  cuda::DeviceArena arena(counting.used(), "test arena");
  std::vector<TensorView> d;
  for (Buffer* b : all(start)) {
    d.push_back(arena.carve(b->shape));
    cuda::copy_to_device(b->view(), d.back());
  }
  linear_forward(c.p, forward_args(c, d));
  linear_backward(c.p, backward_args(c, d));
  cuda::synchronize();

  LinearTensors got = start;
  std::vector<Buffer*> got_buffers = all(got);
  for (size_t i = 0; i < d.size(); ++i) cuda::copy_to_host(d[i], got_buffers[i]->view());
  expect_matches_reference(c, got, reference(c, start));
}

// The plans call their GEMM executor with one argument.
void host_gemm(const cuda::ColumnMajorGemm& g) { test::host_column_major_gemm(g); }

TEST_P(CudaLinear, ColumnMajorGemmsMatchReferenceOnHost) {
  const LinearCase& c = GetParam();
  const LinearParams& p = c.p;
  const uint64_t seed = test::case_seed(c.name);
  HFTA_CASE_TRACE(seed);
  RngStream rng(seed, 0);
  const LinearTensors start = make_inputs(c, rng);
  LinearTensors got = start;
  std::vector<TensorView> d;
  for (Buffer* b : all(got)) d.push_back(b->view());
  const LinearForwardArgs f = forward_args(c, d);
  const LinearBackwardArgs bw = backward_args(c, d);
  if (p.bias)  // kernels::fill_bias
    for (int64_t i = 0; i < f.y.numel(); ++i)
      f.y.data[i] = f.bias.data[(i / (p.N * p.out_features)) * p.out_features + i % p.out_features];
  cuda::linear_forward_gemms(p, f, host_gemm);
  cuda::linear_backward_gemms(p, bw, host_gemm);
  if (p.bias)  // kernels::bias_grad
    for (int64_t b = 0; b < p.B; ++b)
      for (int64_t o = 0; o < p.out_features; ++o) {
        double sum = 0.0;
        for (int64_t n = 0; n < p.N; ++n) sum += bw.dy.data[(b * p.N + n) * p.out_features + o];
        bw.dbias.data[b * p.out_features + o] += static_cast<float>(sum);
      }
  expect_matches_reference(c, got, reference(c, start));
}

// Deterministic mode's per-entry calls (cuda::issue_per_entry) compute what the batched calls do,
// bit for bit, one call per model: the plan of model b alone is the same call.
TEST_P(CudaLinear, PerEntryCallsEqualTheBatchedCallsOnHost) {
  const LinearCase& c = GetParam();
  const uint64_t seed = test::case_seed(c.name);
  HFTA_CASE_TRACE(seed);
  RngStream rng(seed, 0);
  const LinearTensors start = make_inputs(c, rng);
  LinearTensors batched = start, per_entry = start;
  int64_t calls = 0, entries = 0;
  auto run = [&](LinearTensors& t, bool split) {
    std::vector<TensorView> d;
    for (Buffer* b : all(t)) d.push_back(b->view());
    auto issue = [&](const cuda::ColumnMajorGemm& g) {
      if (!split) return host_gemm(g);
      entries += g.batch;
      cuda::issue_per_entry(g, [&](const cuda::ColumnMajorGemm& one) {
        EXPECT_EQ(one.batch, 1);
        ++calls;
        host_gemm(one);
      });
    };
    cuda::linear_forward_gemms(c.p, forward_args(c, d), issue);
    cuda::linear_backward_gemms(c.p, backward_args(c, d), issue);
  };
  run(batched, false);
  run(per_entry, true);
  EXPECT_EQ(calls, entries);
  const std::vector<Buffer*> want = all(batched), got = all(per_entry);
  for (size_t i = 0; i < want.size(); ++i)
    test::expect_same_bits(got[i]->values, want[i]->values, fmt::format("tensor {}", i));
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaLinear, ::testing::ValuesIn(linear_cases()),
                         [](const auto& info) { return info.param.name; });

// A device arena: views on the device, 256-byte aligned, moves leave the source empty.
TEST(CudaDeviceArena, CarvesAlignedDeviceViewsAndCopiesRoundTrip) {
  SKIP_WITHOUT_CUDA_DEVICE();
  cuda::DeviceArena arena(4096, "round trip");
  const TensorView a = arena.carve(Shape{3, 5}), b = arena.carve(Shape{7});
  EXPECT_EQ(a.device, Device::kCuda);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data) % cuda::DeviceArena::kAlignment, 0u);
  EXPECT_THROW(arena.carve(Shape{4096}), Error);
  cuda::DeviceArena moved = std::move(arena);
  EXPECT_TRUE(arena.counting());  // NOLINT(bugprone-use-after-move): the moved-from state
  RngStream rng(test::seed_for_test(), 1);
  Buffer host = random_buffer(Shape{3, 5}, rng), back(Shape{3, 5}, -1.0f);
  cuda::PinnedHostBuffer pinned(host.numel() * sizeof(float));
  const TensorView staged = pinned.view(Shape{3, 5});
  std::copy(host.values.begin(), host.values.end(), staged.data);
  cuda::copy_to_device_async(staged, a);
  cuda::synchronize();
  cuda::copy_to_host(a, back.view());
  EXPECT_EQ(back.values, host.values);
}

// No device needed: asking never throws, and says why there is (or is not) a device.
TEST(CudaRuntime, DeviceAvailableNeverThrows) {
  bool available = false;
  EXPECT_NO_THROW(available = cuda::device_available());
  EXPECT_EQ(available, cuda::device_available());
  const std::string status = cuda::device_status();
  EXPECT_FALSE(status.empty());
  if (!available) {
    EXPECT_NE(status.find("cudaGetDeviceCount"), std::string::npos) << status;
  }
}

// No device needed: the vendor status check names the call and the error.
TEST(CudaRuntime, CheckNamesTheCallAndTheError) {
  test::expect_error_containing_all(
      [] { cuda::check(cudaErrorMemoryAllocation, "cudaMalloc(&p, n)"); },
      {"cudaMalloc(&p, n) failed", "cudaErrorMemoryAllocation"});
  test::expect_error_containing_all(
      [] { cuda::check(CUBLAS_STATUS_INVALID_VALUE, "cublasSgemm(...)"); },
      {"cublasSgemm(...) failed", "CUBLAS_STATUS_INVALID_VALUE"});
  EXPECT_NO_THROW(cuda::check(cudaSuccess, "cudaFree(p)"));
}

// HFTA_CUDA_TF32: plain fp32 unless set to 1; anything else names the choices.
TEST(CudaRuntime, Tf32IsOptIn) {
  {
    const test::ScopedEnv unset("HFTA_CUDA_TF32", nullptr);
    EXPECT_FALSE(cuda::tf32_from_env());
  }
  {
    const test::ScopedEnv off("HFTA_CUDA_TF32", "0");
    EXPECT_FALSE(cuda::tf32_from_env());
  }
  {
    const test::ScopedEnv on("HFTA_CUDA_TF32", "1");
    EXPECT_TRUE(cuda::tf32_from_env());
  }
  {
    const test::ScopedEnv bad("HFTA_CUDA_TF32", "yes");
    test::expect_error_containing(
        [] { cuda::tf32_from_env(); },
        "HFTA_CUDA_TF32=yes: choose 0 (plain fp32, the default) or 1 (TF32 tensor cores)");
  }
}

// Without a device, a CUDA op and a device arena raise hfta::Error saying so (never crash).
TEST(CudaRuntime, WithoutADeviceCudaWorkRaises) {
  if (cuda::device_available()) GTEST_SKIP() << "a CUDA device is present";
  test::expect_error_containing([] { cuda::DeviceArena arena(1024); }, "no CUDA device");
  // Host memory labelled as device memory: the op must fail before touching it.
  std::vector<float> x(6), w(6), y(4);
  const LinearParams p{.B = 1, .N = 2, .in_features = 3, .out_features = 2, .bias = false};
  test::expect_error_containing(
      [&] {
        linear_forward(p, {.x = TensorView(x.data(), p.x_shape(), Device::kCuda),
                           .weight = TensorView(w.data(), p.weight_shape(), Device::kCuda),
                           .y = TensorView(y.data(), p.y_shape(), Device::kCuda)});
      },
      "no CUDA device");
}

}  // namespace
}  // namespace hfta
