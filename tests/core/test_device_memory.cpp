// core/device_memory.h on the host, and what a CUDA device's memory does where there is none:
// host copies and fills, views' shapes checked, arenas copied whole, --device's names; without a
// device, device arenas, models and optimizers raise an error that says so (the device side of
// these functions runs in tests/cuda/test_cuda_model.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/device_memory.h"
#include "models/model.h"
#include "optim/adam.h"

namespace hfta {
namespace {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(DeviceMemory, HostCopiesFillsAndZeroes) {
  std::vector<float> a = {1.0f, 2.0f, -3.0f, 4.5f}, b(4, NAN);
  copy_view(TensorView(a.data(), Shape{2, 2}), TensorView(b.data(), Shape{2, 2}));
  EXPECT_EQ(a, b);
  fill_view(TensorView(b.data(), Shape{3}), 7.0f);
  EXPECT_EQ(b, (std::vector<float>{7.0f, 7.0f, 7.0f, 4.5f})) << "only the view's elements";
  zero_memory(Device::kCpu, b.data() + 1, 2 * sizeof(float));
  EXPECT_EQ(b, (std::vector<float>{7.0f, 0.0f, 0.0f, 4.5f}));
  std::vector<float> middle(2);
  copy_view(TensorView(a.data() + 1, Shape{2}), TensorView(middle.data(), Shape{2}));
  EXPECT_EQ(middle, (std::vector<float>{2.0f, -3.0f}));
}

TEST(DeviceMemory, CopiesOfOtherShapesOrMissingTensorsAreRefused) {
  std::vector<float> a(6), b(6);
  EXPECT_NE(error_of([&] {
              copy_view(TensorView(a.data(), Shape{2, 3}), TensorView(b.data(), Shape{3, 2}),
                        "the test copy");
            }).find("the test copy: copying a tensor of shape [2, 3] into one of shape [3, 2]"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              copy_view(TensorView(), TensorView(b.data(), Shape{6}));
            }).find("a tensor is missing"),
            std::string::npos);
}

TEST(DeviceMemory, ArenasCopyWholeAndOnlyBetweenEqualSizes) {
  Arena a(256, "a"), b(256, "b"), small(64, "small");
  for (size_t i = 0; i < a.capacity(); ++i) a.data()[i] = static_cast<std::byte>(i);
  b.copy_from(a);
  for (size_t i = 0; i < b.capacity(); ++i) ASSERT_EQ(b.data()[i], static_cast<std::byte>(i));
  EXPECT_EQ(a.device(), Device::kCpu);
  EXPECT_EQ(a.carve(Shape{4}).device, Device::kCpu);
  EXPECT_NE(error_of([&] { small.copy_from(a); }).find("they need one size"), std::string::npos);
}

TEST(DeviceMemory, DeviceNames) {
  EXPECT_EQ(parse_device("cpu"), Device::kCpu);
  EXPECT_EQ(parse_device("cuda"), Device::kCuda);
  EXPECT_EQ(device_flag_name(Device::kCuda), "cuda");
  EXPECT_NE(error_of([] { parse_device("gpu"); }).find("unknown device 'gpu': choose cpu or cuda"),
            std::string::npos);
  EXPECT_TRUE(device_available(Device::kCpu));
  EXPECT_EQ(describe_device(Device::kCpu), "CPU");
  EXPECT_TRUE(describe_device(Device::kCuda).starts_with("CUDA: "))
      << describe_device(Device::kCuda);
}

// "no CUDA device" in a CUDA build on a machine without one, "no CUDA backend" in a build
// without the backend.
bool says_no_device(const std::string& message) {
  return message.find("no CUDA device") != std::string::npos ||
         message.find("no CUDA backend") != std::string::npos;
}

TEST(DeviceMemory, WithoutADeviceDeviceMemoryIsRefused) {
  if (device_available(Device::kCuda)) GTEST_SKIP() << "a CUDA device is here";
  const std::string arena = error_of([] { Arena a(1024, "test", Device::kCuda); });
  EXPECT_TRUE(says_no_device(arena)) << arena;
  EXPECT_NE(arena.find("the test arena"), std::string::npos) << arena;
  const std::string model = error_of([] {
    make_model("mlp", {.B = 2,
                       .batch_size = 4,
                       .sample_shape = {1, 28, 28},
                       .num_classes = 10,
                       .device = Device::kCuda});
  });
  EXPECT_TRUE(says_no_device(model)) << model;
  // An optimizer over a device table (as a device model's arena gives) needs the device too.
  const std::string optimizer = error_of([] {
    FusedAdam adam(
        ParamTable{.B = 1, .segments = {{0, 8, true}}, .total_floats = 8, .device = Device::kCuda},
        AdamHyper{});
  });
  EXPECT_TRUE(says_no_device(optimizer)) << optimizer;
  const std::string upload =
      error_of([] { StagedUpload u(Device::kCuda, 256, "the test upload"); });
  EXPECT_TRUE(says_no_device(upload)) << upload;
  EXPECT_NE(upload.find("the test upload"), std::string::npos) << upload;
  const std::string peak = error_of([] { measure_device_peak_gflops(Device::kCuda); });
  EXPECT_TRUE(says_no_device(peak)) << peak;
}

// The device's sgemm peak (`hfta sweep --device cuda`'s "% of peak"): positive on a device, and
// never asked of the CPU.
TEST(DeviceMemory, DevicePeakIsMeasuredOnDevicesOnly) {
  const std::string cpu = error_of([] { measure_device_peak_gflops(Device::kCpu); });
  EXPECT_NE(cpu.find("backend/cpu/peak.h"), std::string::npos) << cpu;
  if (!device_available(Device::kCuda)) GTEST_SKIP() << describe_device(Device::kCuda);
  const double peak = measure_device_peak_gflops(Device::kCuda);
  EXPECT_GT(peak, 100.0) << "GFLOP/s: any GPU the backend builds for does more";
}

TEST(StagedUpload, OnTheHostCopiesAndChecks) {
  StagedUpload u(Device::kCpu, 6 * sizeof(float), "host upload");
  EXPECT_EQ(u.capacity(), 6 * sizeof(float));
  std::vector<float> src = {1.0f, -2.0f, 3.5f, 4.0f}, dst(4, NAN);
  u.upload(TensorView(src.data(), Shape{2, 2}), TensorView(dst.data(), Shape{2, 2}));
  EXPECT_EQ(src, dst);
  std::vector<float> big(7, 1.0f), big_dst(7);
  const std::string too_big = error_of(
      [&] { u.upload(TensorView(big.data(), Shape{7}), TensorView(big_dst.data(), Shape{7})); });
  EXPECT_NE(too_big.find("28 bytes to upload, but its staging holds 24"), std::string::npos)
      << too_big;
  const std::string shapes = error_of([&] {
    u.upload(TensorView(src.data(), Shape{4}), TensorView(dst.data(), Shape{2, 2}));
  });
  EXPECT_NE(shapes.find("shape [4] into one of shape [2, 2]"), std::string::npos) << shapes;
  std::vector<int32_t> labels = {3, 1, 4}, labels_dst(3, -1);
  StagedUpload l(Device::kCpu, 3 * sizeof(int32_t), "label upload");
  l.upload(IndexView(labels.data(), Shape{3}), IndexView(labels_dst.data(), Shape{3}));
  EXPECT_EQ(labels, labels_dst);
}

// On a GPU: uploads in turn through the two staging buffers, the caller's memory overwritten right
// after each upload returns, every destination holds what was uploaded to it.
TEST(StagedUpload, OnTheDeviceEveryUploadArrives) {
  if (!device_available(Device::kCuda)) GTEST_SKIP() << describe_device(Device::kCuda);
  constexpr int64_t kUploads = 7, kFloats = 1000;
  Arena counting(Device::kCuda);  // sizes the arena with each carve's alignment
  for (int64_t k = 0; k < kUploads; ++k) counting.carve(Shape{kFloats});
  Arena arena(counting.used(), "uploads", Device::kCuda);
  StagedUpload u(Device::kCuda, kFloats * sizeof(float), "device upload");
  std::vector<float> src(kFloats);
  std::vector<TensorView> targets;
  for (int64_t k = 0; k < kUploads; ++k) {
    for (int64_t i = 0; i < kFloats; ++i) src[i] = static_cast<float>(k * kFloats + i);
    targets.push_back(arena.carve(Shape{kFloats}));
    u.upload(TensorView(src.data(), Shape{kFloats}), targets.back());
    std::fill(src.begin(), src.end(), NAN);  // reusable at once
  }
  synchronize(Device::kCuda);
  for (int64_t k = 0; k < kUploads; ++k) {
    std::vector<float> back(kFloats);
    copy_view(targets[k], TensorView(back.data(), Shape{kFloats}));
    for (int64_t i = 0; i < kFloats; ++i)
      ASSERT_EQ(back[i], static_cast<float>(k * kFloats + i)) << "upload " << k << " element " << i;
  }
}

TEST(DeviceMemory, DeviceModelsRunPlanFusedOnly) {
  // Refused before any memory is asked for, so this holds with and without a device.
  const std::string message = error_of([] {
    make_model("lenet", {.B = 4,
                         .batch_size = 4,
                         .sample_shape = {1, 28, 28},
                         .num_classes = 10,
                         .plan = ExecutionPlan::chunks(2),
                         .device = Device::kCuda});
  });
  EXPECT_NE(message.find("use --plan fused"), std::string::npos) << message;
  EXPECT_NE(message.find("chunk:2"), std::string::npos) << message;
}

}  // namespace
}  // namespace hfta
