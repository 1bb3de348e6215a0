// A DCGAN array on the GPU (models/gan.h with GanSpec::device = kCuda) against the same array on
// the CPU: from the same host-drawn weights and noise, every step's statistics (the example's
// losses and mean D outputs) agree to rounding, the samples for the fixed noise too, and a
// checkpoint of the device array holds the CPU array's values. Runs anywhere: a device spec
// without a device, and a device spec with a plan other than fused, raise before allocating.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/device_memory.h"
#include "core/rng.h"
#include "io/checkpoint.h"
#include "io/csv.h"
#include "models/gan.h"
#include "run/hyper.h"
#include "tasks/gan/gan_checkpoint.h"
#include "test_files.h"
#include "test_util.h"

namespace hfta {
namespace {

constexpr int64_t kSteps = 3, kBatch = 4;
constexpr double kRtol = 1e-4;

GanSpec spec_on(Device device) {
  GanSpec s{.arch = {.nz = 8, .ngf = 4, .ndf = 4, .nc = 1, .image = 16},
            .B = 3,
            .batch = kBatch,
            .seed = 7,
            .device = device};
  s.g_adam.lr = {2e-4f, 1e-3f, 5e-4f};
  s.d_adam.lr = {1e-3f, 2e-4f, 4e-4f};
  s.g_adam.beta1 = s.d_adam.beta1 = {0.5f};
  return s;
}

std::vector<float> real_batch(const GanSpec& s, int64_t step) {
  std::vector<float> v(static_cast<size_t>(kBatch * s.arch.nc * s.arch.image * s.arch.image));
  RngStream rng(123, static_cast<uint64_t>(step));
  for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

std::vector<std::vector<float>> all_stats(const GanStepStats& s) {
  return {s.loss_d, s.loss_g, s.d_x, s.d_g_z1, s.d_g_z2};
}

void expect_close_values(const std::vector<float>& got, const std::vector<float>& want,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], kRtol * std::fabs(want[i]) + 1e-6) << what << " element " << i;
}

TEST(CudaGan, TrainsAsOnTheCpu) {
  if (!device_available(Device::kCuda)) GTEST_SKIP() << describe_device(Device::kCuda);
  GanArray cpu(spec_on(Device::kCpu)), gpu(spec_on(Device::kCuda));
  EXPECT_EQ(gpu.generator().param_arena().device(), Device::kCuda);
  for (int64_t step = 0; step < kSteps; ++step) {
    SCOPED_TRACE(fmt::format("step {}", step));
    std::vector<float> real = real_batch(cpu.spec(), step);
    const TensorView batch(real.data(), Shape{kBatch, 1, 16, 16});
    const auto want = all_stats(cpu.step(batch)), got = all_stats(gpu.step(batch));
    for (size_t k = 0; k < want.size(); ++k)
      expect_close_values(got[k], want[k], fmt::format("statistic {}", k));
  }
  const TensorView want_samples = cpu.samples(), got_samples = gpu.samples();
  EXPECT_EQ(got_samples.device, Device::kCpu) << "samples() hands back host memory";
  expect_close_values(
      std::vector<float>(got_samples.data, got_samples.data + got_samples.numel()),
      std::vector<float>(want_samples.data, want_samples.data + want_samples.numel()), "samples");
  // A checkpoint reads the device's tensors back; restoring it into a fresh device array and
  // reading again gives the same values.
  const HyperValues hyper{{"lr", {2e-4f, 1e-3f, 5e-4f}}};
  Checkpoint from_cpu, from_gpu, again;
  fill_gan_checkpoint(from_cpu, cpu, hyper, {}, kBatch, true);
  fill_gan_checkpoint(from_gpu, gpu, hyper, {}, kBatch, true);
  ASSERT_EQ(from_gpu.tensors.size(), from_cpu.tensors.size());
  for (size_t i = 0; i < from_cpu.tensors.size(); ++i)
    expect_close_values(from_gpu.tensors[i].values, from_cpu.tensors[i].values,
                        from_cpu.tensors[i].name);
  GanArray restored(spec_on(Device::kCuda));
  restore_gan_checkpoint(from_gpu, restored);
  fill_gan_checkpoint(again, restored, hyper, {}, kBatch, true);
  for (size_t i = 0; i < from_gpu.tensors.size(); ++i)
    EXPECT_EQ(again.tensors[i].values, from_gpu.tensors[i].values) << from_gpu.tensors[i].name;
}

// `hfta train --model dcgan --device cuda` writes the metrics the CPU run writes (every model's
// losses and mean D outputs, step by step).
TEST(CudaGan, CliRunMatchesTheCpuRun) {
  if (!device_available(Device::kCuda)) GTEST_SKIP() << describe_device(Device::kCuda);
  const std::string common =
      "train --model dcgan --dataset synthetic --synthetic-size 32 --image-size 16 --batch-size 8 "
      "--lr 0.0002,0.001 --epochs 1 --iters-per-epoch 3 --seed 5 --no-progress --out ";
  test::TempDir cpu_dir("cuda_gan_cpu"), gpu_dir("cuda_gan_gpu");
  const test::CommandResult cpu = test::run_hfta(common + cpu_dir.str() + " --plan fused");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output();
  const test::CommandResult gpu = test::run_hfta(common + gpu_dir.str() + " --device cuda");
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output();
  const CsvTable want = read_csv(cpu_dir.str() + "/metrics.csv");
  const CsvTable got = read_csv(gpu_dir.str() + "/metrics.csv");
  ASSERT_EQ(got.rows.size(), want.rows.size());
  for (const std::string column : {"loss_d", "loss_g", "d_x", "d_g_z1", "d_g_z2"}) {
    const size_t c = want.column(column);
    for (size_t r = 0; r < want.rows.size(); ++r)
      EXPECT_NEAR(got.number(r, c), want.number(r, c), kRtol * std::fabs(want.number(r, c)) + 1e-6)
          << column << " row " << r;
  }
}

TEST(CudaGan, DeviceArraysRunPlanFusedOnAnAvailableDevice) {
  GanSpec chunked = spec_on(Device::kCuda);
  chunked.plan = ExecutionPlan::chunks(1);
  test::expect_error_containing([&] { GanArray gan(chunked); }, "runs plan fused");
  if (device_available(Device::kCuda)) return;
  test::expect_error_containing([] { GanArray gan(spec_on(Device::kCuda)); }, "CUDA");
}

}  // namespace
}  // namespace hfta
