// `hfta train --model dcgan`: metrics per model and step, sample grids per model and epoch,
// summary.csv, --lr-d, checkpoints and exact resume (after an epoch and mid-epoch, fused and
// serial), extract/export of a trained run, `hfta trial` and a short sweep, the bilinear resize of
// the data, and the errors for bad options and data.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include "core/device_memory.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/csv.h"
#include "io/png.h"
#include "io/safetensors.h"
#include "run/data.h"
#include "run/trial.h"
#include "tasks/classifier/resume.h"
#include "tasks/gan/train_gan.h"
#include "tasks/tasks.h"
#include "test_files.h"

namespace hfta {
namespace {

using test::TempDir;

// A tiny run: 16x16 synthetic images, batch 4, 2 steps per epoch.
TrainOptions tiny(const std::string& out, int64_t epochs = 2) {
  TrainOptions o;
  o.model = "dcgan";
  o.dataset = "synthetic";
  o.synthetic_train_size = 8;
  o.image_size = 16;
  o.batch_size = 4;
  o.iters_per_epoch = 2;
  o.epochs = epochs;
  o.progress = false;
  o.hyper["lr"] = {1e-4f, 2e-4f};
  o.out = out;
  return o;
}

std::vector<std::vector<std::string>> metric_rows(const std::string& dir) {
  return read_csv(dir + "/metrics.csv").rows;
}

// Every tensor of the checkpoint (parameters, buffers, Adam state, step counts) and its progress.
void expect_same_checkpoint(const std::string& a, const std::string& b) {
  const Checkpoint x = load_checkpoint(a), y = load_checkpoint(b);
  EXPECT_EQ(x.step, y.step);
  EXPECT_EQ(x.epoch, y.epoch);
  EXPECT_EQ(x.optimizer_steps, y.optimizer_steps);
  ASSERT_EQ(x.tensors.size(), y.tensors.size());
  for (size_t i = 0; i < x.tensors.size(); ++i) {
    EXPECT_EQ(x.tensors[i].name, y.tensors[i].name);
    EXPECT_EQ(x.tensors[i].values, y.tensors[i].values) << x.tensors[i].name;
  }
}

TEST(TrainGan, SyntheticRunWritesMetricsSampleGridsAndSummary) {
  TempDir tmp("train_gan");
  TrainOptions o = tiny(tmp.str());
  o.image_size = 0;                    // the example's 64x64
  const TrainResult r = run_train(o);  // dispatches to run_train_gan
  EXPECT_EQ(r.B, 2);
  const CsvTable m = read_csv(tmp.str() + "/metrics.csv");
  EXPECT_EQ(m.header, (std::vector<std::string>{"model", "epoch", "step", "loss_d", "loss_g", "d_x",
                                                "d_g_z1", "d_g_z2"}));
  EXPECT_EQ(m.rows.size(), 2u * 2u * 2u);  // models x epochs x steps
  for (int b = 0; b < 2; ++b)
    for (int e = 0; e < 2; ++e) {
      const std::string png = fmt::format("{}/samples/model{}_epoch{}.png", tmp.str(), b, e);
      const std::string bytes = test::read_file(png);
      ASSERT_GT(bytes.size(), 8u) << png;
      EXPECT_EQ(bytes.substr(1, 3), "PNG") << png;
    }
  const CsvTable s = read_csv(tmp.str() + "/summary.csv");
  ASSERT_EQ(s.rows.size(), 2u);
  for (size_t b = 0; b < 2; ++b) {
    EXPECT_EQ(s.integer(b, s.column("model")), static_cast<int64_t>(b));
    EXPECT_EQ(s.integer(b, s.column("steps")), 4);
    // The last metrics row of the model.
    const auto& last = m.rows[m.rows.size() - 2 + b];
    EXPECT_EQ(s.rows[b][s.column("loss_d")], last[m.column("loss_d")]);
    EXPECT_EQ(s.rows[b][s.column("d_g_z2")], last[m.column("d_g_z2")]);
    EXPECT_EQ(s.rows[b][s.column("samples")],
              fmt::format("{}/samples/model{}_epoch1.png", tmp.str(), b));
    EXPECT_EQ(s.rows[b][s.column("lr_d")], s.rows[b][s.column("lr")]);
  }
  EXPECT_TRUE(std::filesystem::exists(tmp.str() + "/checkpoint.bin"));
}

// --lr-d: model 0 of an array whose D learns at its own rate trains as that model alone. The
// metrics are compared as printed, so the runs are --deterministic: by default model 0 equals the
// model alone to fp32 rounding only (README), enough to change a printed digit.
TEST(TrainGan, LrDTrainsTheDiscriminatorAtItsOwnRate) {
  TempDir two_dir("gan_lrd2"), one_dir("gan_lrd1"), same_dir("gan_lrd_same");
  TrainOptions two = tiny(two_dir.str(), 1);
  two.deterministic = true;
  two.lr_d = {8e-4f, 2e-4f};
  run_train_gan(two);
  TrainOptions one = tiny(one_dir.str(), 1);
  one.deterministic = true;
  one.hyper["lr"] = {1e-4f};
  one.lr_d = {8e-4f};
  run_train_gan(one);
  TrainOptions same = tiny(same_dir.str(), 1);
  same.deterministic = true;
  same.hyper["lr"] = {1e-4f};
  run_train_gan(same);
  const auto rows2 = metric_rows(two_dir.str()), rows1 = metric_rows(one_dir.str()),
             rows_same = metric_rows(same_dir.str());
  ASSERT_EQ(rows1.size(), 2u);
  for (size_t s = 0; s < 2; ++s) EXPECT_EQ(rows2[2 * s], rows1[s]);  // model 0 of each step
  // D stepped at another rate: step 1's D losses and D(x), D(G(z1)) are lr_d = lr's (taken
  // before D's update), its G loss (through the updated D) and everything after differ.
  for (size_t col : {3u, 5u, 6u}) EXPECT_EQ(rows1[0][col], rows_same[0][col]) << col;
  EXPECT_NE(rows1[0][4], rows_same[0][4]);
  EXPECT_NE(rows1[1][3], rows_same[1][3]);
  const CsvTable s = read_csv(two_dir.str() + "/summary.csv");
  EXPECT_EQ(s.rows[0][s.column("lr_d")], "0.0008");
  EXPECT_EQ(s.rows[1][s.column("lr_d")], "0.0002");
}

TEST(TrainGan, ResumingAfterAnEpochGivesTheUninterruptedRun) {
  TempDir full("gan_full"), split("gan_split");
  run_train_gan(tiny(full.str()));
  run_train_gan(tiny(split.str(), 1));
  TrainOptions resume = tiny(split.str());
  resume.resume = true;
  run_train_gan(resume);
  EXPECT_EQ(metric_rows(split.str()), metric_rows(full.str()));
  expect_same_checkpoint(split.str() + "/checkpoint.bin", full.str() + "/checkpoint.bin");
  EXPECT_EQ(test::read_file(split.str() + "/samples/model1_epoch1.png"),
            test::read_file(full.str() + "/samples/model1_epoch1.png"));
}

// Stopped inside the second epoch as by Ctrl-C (with periodic checkpoints on), then resumed: the
// metrics and final tensors are the uninterrupted run's. Serial: model 0 resumes, model 1 (no
// checkpoint yet) starts over.
TEST(TrainGan, StoppedMidEpochAndResumedGivesTheUninterruptedRun) {
  for (bool serial : {false, true}) {
    TempDir full("gan_full_mid"), cut("gan_cut");
    TrainOptions o = tiny(full.str());
    o.serial = serial;
    o.checkpoint_every = 1;
    run_train_gan(o);
    o.out = cut.str();
    EXPECT_THROW(run_train_gan(o, /*stop_after_step=*/3), Error);
    const std::string path = cut.str() + (serial ? "/checkpoint-model0.bin" : "/checkpoint.bin");
    const Checkpoint c = load_checkpoint(path);
    EXPECT_EQ(c.step, 3);
    EXPECT_EQ(c.epoch, 1);
    EXPECT_EQ(c.batch_in_epoch, 1);
    o.resume = true;
    run_train_gan(o);
    EXPECT_EQ(metric_rows(cut.str()), metric_rows(full.str())) << "serial " << serial;
    expect_same_checkpoint(path,
                           full.str() + (serial ? "/checkpoint-model0.bin" : "/checkpoint.bin"));
  }
}

// The real Ctrl-C through the CLI: SIGINT once a few steps are written saves a checkpoint and
// fails with the resume hint; --resume then finishes with the uninterrupted run's metrics.
TEST(TrainGan, CtrlCSavesACheckpointAndResumeFinishesIdentically) {
  TempDir full_tmp("gan_full_c"), cut_tmp("gan_cut_c");
  const std::string full = full_tmp.str(), cut = cut_tmp.str();
  const std::string run =
      "train --model dcgan --dataset synthetic --synthetic-size 64 --image-size 16 --batch-size 4 "
      "--epochs 2 --lr 0.0001,0.0002 --lr-d 0.0003 --threads 1 --out ";
  ASSERT_EQ(test::run_hfta(run + full).exit_code, 0);
  const pid_t pid = test::spawn_hfta(run + cut);
  ASSERT_GT(pid, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::filesystem::exists(cut + "/metrics.csv") &&
        test::read_file(cut + "/metrics.csv").size() > 300)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 0) GTEST_SKIP() << "the run finished before Ctrl-C reached it";
  const Checkpoint c = load_checkpoint(cut + "/checkpoint.bin");
  EXPECT_GT(c.step, 0);
  EXPECT_LT(c.step, 32);
  const test::CommandResult r = test::run_hfta(run + cut + " --resume");
  ASSERT_EQ(r.exit_code, 0) << r.output();
  EXPECT_NE(r.out.find(fmt::format("resuming after step {}", c.step)), std::string::npos) << r.out;
  EXPECT_EQ(metric_rows(cut), metric_rows(full));
  expect_same_checkpoint(cut + "/checkpoint.bin", full + "/checkpoint.bin");
}

// Model b of a fused run equals model b trained alone (serial), through the whole loop (up to
// the summation order of fused kernels: 1e-4 relative).
// Fused (plan fused and plan threads:1, each model on its own thread) and serial runs: the same
// metrics.
TEST(TrainGan, FusedAndSerialRunsGiveTheSameMetrics) {
  TempDir serial("gan_serial");
  TrainOptions o = tiny(serial.str());
  o.serial = true;
  run_train_gan(o);
  auto sorted = [](std::vector<std::vector<std::string>> rows) {
    std::stable_sort(rows.begin(), rows.end(),
                     [](const auto& a, const auto& b) { return a[0] < b[0]; });
    return rows;
  };
  const auto b = sorted(metric_rows(serial.str()));
  for (const char* plan : {"fused", "threads:1"}) {
    SCOPED_TRACE(plan);
    TempDir fused("gan_fused");
    TrainOptions f = tiny(fused.str());
    f.plan = plan;
    run_train_gan(f);
    const auto a = sorted(metric_rows(fused.str()));
    ASSERT_EQ(a.size(), b.size());
    for (size_t r = 0; r < a.size(); ++r)
      for (size_t c = 0; c < a[r].size(); ++c) {
        const double x = std::stod(a[r][c]), y = std::stod(b[r][c]);
        EXPECT_NEAR(x, y, 1e-4 * std::max(1.0, std::abs(y))) << "row " << r << " column " << c;
      }
  }
}

TEST(TrainGan, ResumeWithOtherFlagsIsRefusedNamingTheFlag) {
  TempDir tmp("gan_mismatch");
  run_train_gan(tiny(tmp.str(), 1));
  TrainOptions o = tiny(tmp.str());
  o.resume = true;
  o.lr_d = {5e-4f};
  try {
    run_train_gan(o);
    ADD_FAILURE() << "resumed with another --lr-d";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--lr-d"), std::string::npos) << e.what();
  }
}

TEST(TrainGan, ExtractAndExportWorkOnADcganRun) {
  TempDir tmp("gan_export");
  run_train_gan(tiny(tmp.str(), 1));
  const std::string dir = tmp.str();
  test::expect_hfta_error(fmt::format("eval --checkpoint {}/checkpoint.bin --device cuda", dir),
                          "hfta eval scores a DCGAN checkpoint on the CPU");
  test::CommandResult r = test::run_hfta(
      fmt::format("export --run {} --model 1 --net g --out {}/g.safetensors", dir, dir));
  ASSERT_EQ(r.exit_code, 0) << r.output();
  const Checkpoint c = model_from_run(dir, 1);
  std::map<std::string, std::string> meta;
  const std::vector<SafeTensor> g = read_safetensors(dir + "/g.safetensors", &meta);
  EXPECT_EQ(meta.at("hfta_model"), "dcgan_g");
  // PyTorch's Generator.main starts with ConvTranspose2d(nz, ngf * 2^s, 4): s = 1 at 16x16.
  ASSERT_FALSE(g.empty());
  EXPECT_EQ(g[0].name, "main.0.weight");
  EXPECT_EQ(g[0].shape, (std::vector<int64_t>{100, 128, 4, 4}));
  const CheckpointTensor& first = c.tensors[0];
  EXPECT_EQ(first.name, "g.0.main.0.weight");
  EXPECT_EQ(g[0].floats, first.values);  // the trained weights, model 1's

  r = test::run_hfta(fmt::format("extract --run {} --model 1 --out {}/one.bin", dir, dir));
  ASSERT_EQ(r.exit_code, 0) << r.output();
  r = test::run_hfta(
      fmt::format("export --checkpoint {}/one.bin --net d --out {}/d.safetensors", dir, dir));
  ASSERT_EQ(r.exit_code, 0) << r.output();
  const std::vector<SafeTensor> d = read_safetensors(dir + "/d.safetensors");
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d[0].name, "main.0.weight");
  EXPECT_EQ(d[0].shape, (std::vector<int64_t>{64, 3, 4, 4}));  // Conv2d(nc, ndf, 4, 2, 1)
}

TEST(TrainGan, BadInputIsRefusedNamingTheProblem) {
  TempDir tmp("train_gan_errors");
  auto expect_error = [](const TrainOptions& o, const std::string& message) {
    try {
      run_train_gan(o);
      ADD_FAILURE() << "expected an error mentioning " << message;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  TrainOptions o = tiny(tmp.str());
  o.resume = true;
  expect_error(o, "no checkpoint");
  o = tiny(tmp.str());
  o.hyper["weight_decay"] = {0.1f};
  expect_error(o, "--weight-decay");
  o = tiny(tmp.str());
  o.synthetic_train_size = 3;  // fewer images than the batch of 4
  expect_error(o, "fewer than --batch-size 4");
  o = tiny(tmp.str());
  o.image_size = 48;
  expect_error(o, "--image-size 48");
  o = tiny(tmp.str());
  o.lr_d = {1e-4f, 2e-4f, 3e-4f};
  expect_error(o, "--lr-d has 3 values");
  o = tiny(tmp.str());
  o.lr_d = {-1.0f};
  expect_error(o, "lr");
  o = tiny(tmp.str());
  o.dataset = "fashion-mnist";
  o.data_dir = tmp.str() + "/no-such-dir";
  expect_error(o, "no-such-dir");
  // --device: a device runs plan fused; without one, the device says why (before any data).
  o = tiny(tmp.str());
  o.device = "cuda";
  o.plan = "chunk:1";
  expect_error(o, "--device cuda runs plan fused");
  if (!device_available(Device::kCuda)) {
    o.plan = "auto";
    o.data_dir = tmp.str() + "/no-such-dir";
    o.dataset = "fashion-mnist";
    expect_error(o, "--device cuda: CUDA: ");
  }
  // The GAN's flags on a classifier.
  o = tiny(tmp.str());
  o.model = "mlp";
  o.hyper.clear();
  o.lr_d = {1e-3f};
  try {
    run_train(o);
    ADD_FAILURE() << "--lr-d accepted for mlp";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--lr-d"), std::string::npos) << e.what();
  }
}

TEST(GanTrial, FusedAndSerialTrialsMeasureImagesPerSecond) {
  for (bool serial : {false, true}) {
    TrialOptions o{.model = "dcgan",
                   .B = 2,
                   .serial = serial,
                   .batch_size = 4,
                   .warmup_steps = 1,
                   .steps = 2,
                   .image_size = 16};
    const TrialResult r = run_trial(o);  // dispatches to run_gan_trial
    EXPECT_GT(r.seconds, 0.0);
    EXPECT_FALSE(r.plan.empty());  // auto resolved (fused for the serial B=1 arrays)
    EXPECT_NEAR(r.samples_per_second, 2 * 2 * 4 / r.seconds, 1e-6 * r.samples_per_second);
    EXPECT_GT(r.flops_per_step, 0.0);
    EXPECT_GT(r.params_per_model, 0);
  }
}

// The FLOPs of a step are the model's, whatever plan ran it (a plan's state-only nets count
// none of the input gradients).
TEST(GanTrial, FlopsDoNotDependOnThePlan) {
  TrialOptions o{
      .model = "dcgan", .B = 2, .batch_size = 4, .warmup_steps = 0, .steps = 1, .image_size = 16};
  o.plan = "fused";
  const double fused = run_trial(o).flops_per_step;
  o.plan = "chunk:1";
  const TrialResult chunks = run_trial(o);
  EXPECT_EQ(chunks.plan, "chunk:1");
  EXPECT_DOUBLE_EQ(chunks.flops_per_step, fused);
}

TEST(GanTrial, ShortSweepMeasuresEveryMode) {
  TempDir tmp("gan_sweep");
  test::CommandResult r = test::run_hfta(
      fmt::format("sweep --model dcgan --dataset synthetic --image-size 16 --batch-size 4 --modes "
                  "serial,concurrent,fused --B 1,2 --repeats 1 --steps 2 --warmup 1 --threads 2 "
                  "--peak-gflops 100 --retries 0 --quiet-wait 0 --out {}",
                  tmp.str()));
  ASSERT_EQ(r.exit_code, 0) << r.output();
  const CsvTable t = read_csv(tmp.str() + "/dcgan/throughput.csv");
  ASSERT_EQ(t.rows.size(), 6u);
  for (const auto& row : t.rows) EXPECT_EQ(row[t.column("status")], "ok") << row.back();
}

// PyTorch: F.interpolate(torch.tensor([[[[0., 1.]]]]), size=(1, 4), mode="bilinear",
// align_corners=False) = [0, 0.25, 0.75, 1].
TEST(ResizeImages, BilinearWithHalfPixelCenters) {
  Dataset d{.name = "t", .sample_shape = Shape{1, 1, 2}, .size = 1, .num_classes = 1};
  d.images = {0.0f, 1.0f};
  d.labels = {0};
  const Dataset r = resize_images(d, 4);
  EXPECT_EQ(r.sample_shape, (Shape{1, 4, 4}));
  for (int y = 0; y < 4; ++y) {
    EXPECT_FLOAT_EQ(r.images[static_cast<size_t>(y * 4 + 0)], 0.0f);
    EXPECT_FLOAT_EQ(r.images[static_cast<size_t>(y * 4 + 1)], 0.25f);
    EXPECT_FLOAT_EQ(r.images[static_cast<size_t>(y * 4 + 2)], 0.75f);
    EXPECT_FLOAT_EQ(r.images[static_cast<size_t>(y * 4 + 3)], 1.0f);
  }
}

TEST(PngGrid, RejectsTwoChannelImages) {
  TempDir tmp("png");
  std::vector<float> x(2 * 2 * 4 * 4, 0.0f);
  EXPECT_THROW(write_png_grid(tmp.str() + "/a.png", TensorView(x.data(), Shape{2, 2, 4, 4})),
               Error);
}

}  // namespace
}  // namespace hfta
