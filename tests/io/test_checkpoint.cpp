// Checkpoints: the file format round-trips and rejects damaged files with a clear message; a run
// stopped (at an epoch boundary or by Ctrl-C mid-epoch) and resumed writes exactly the metrics of
// an uninterrupted run; one model extracted from an array evaluates as it did inside it.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/csv.h"
#include "io/safetensors.h"
#include "models/model.h"
#include "optim/optimizer.h"
#include "run/hyper.h"
#include "test_files.h"
#include "tests/io/seed_files.h"

namespace hfta {
namespace {

namespace fs = std::filesystem;

using test::expect_hfta_error;
using test::read_file;
using test::run_hfta;
using test::TempDir;

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The hostile-bytes tests' small seed (tests/io/seed_files.h): two models, two tensors.
Checkpoint small_checkpoint() { return seed_checkpoint(false); }

TEST(CheckpointFile, RoundTripsEveryField) {
  TempDir tmp("roundtrip");
  const std::string path = tmp.str() + "/c.bin";
  Checkpoint c = small_checkpoint();
  c.dataset = "synthetic";
  c.data_dir = "/data/x";
  c.synthetic_test_size = 16;
  c.plan = "threads:1/8";
  save_checkpoint(path, c);
  Checkpoint d = load_checkpoint(path);
  EXPECT_EQ(d.model, c.model);
  EXPECT_EQ(d.dataset, c.dataset);
  EXPECT_EQ(d.data_dir, c.data_dir);
  EXPECT_EQ(d.synthetic_test_size, c.synthetic_test_size);
  EXPECT_EQ(d.plan, c.plan);
  EXPECT_EQ(d.B, c.B);
  EXPECT_EQ(d.seed, c.seed);
  EXPECT_EQ(d.model_ids, c.model_ids);
  EXPECT_EQ(d.hyper, c.hyper);
  EXPECT_EQ(d.step, c.step);
  EXPECT_EQ(d.batch_in_epoch, c.batch_in_epoch);
  EXPECT_EQ(d.epoch_loss_sum, c.epoch_loss_sum);
  EXPECT_EQ(d.optimizer_steps, c.optimizer_steps);
  EXPECT_EQ(d.skipped_steps, c.skipped_steps);
  ASSERT_EQ(d.tensors.size(), 2u);
  EXPECT_EQ(d.tensors[0].values, c.tensors[0].values);
  EXPECT_EQ(d.tensors[1].shape, c.tensors[1].shape);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

// A diverged model's training loss is NaN or infinite, which JSON cannot hold: the checkpoint
// must still load (before, nlohmann wrote null and no such checkpoint could be resumed).
TEST(CheckpointFile, NonFiniteLossesRoundTrip) {
  TempDir tmp("nonfinite");
  Checkpoint c = small_checkpoint();
  c.epoch_loss_sum.assign(c.epoch_loss_sum.size(), std::numeric_limits<double>::quiet_NaN());
  c.last_train_loss.assign(c.last_train_loss.size(), -std::numeric_limits<double>::infinity());
  c.last_train_loss.front() = std::numeric_limits<double>::infinity();
  const std::string path = tmp.str() + "/c.bin";
  save_checkpoint(path, c);
  const Checkpoint back = load_checkpoint(path);
  ASSERT_EQ(back.epoch_loss_sum.size(), c.epoch_loss_sum.size());
  for (double v : back.epoch_loss_sum) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(back.last_train_loss, c.last_train_loss);
}

TEST(CheckpointFile, ExtractTakesReplicaBOfEveryTensor) {
  Checkpoint one = extract_model(small_checkpoint(), 1);
  EXPECT_EQ(one.B, 1);
  EXPECT_EQ(one.model_ids, std::vector<int64_t>{1});
  EXPECT_EQ(one.hyper.at("lr"), std::vector<double>{0.2});
  EXPECT_EQ(one.optimizer_steps, std::vector<int64_t>{6});
  EXPECT_EQ(one.tensors[0].shape, (Shape{1, 2, 3}));
  EXPECT_EQ(one.tensors[0].values, (std::vector<float>{7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(one.tensors[1].values, (std::vector<float>{-4, -5, -6}));
  EXPECT_THROW(extract_model(small_checkpoint(), 2), Error);
}

void expect_load_error(const std::string& path, const std::string& fragment) {
  try {
    load_checkpoint(path);
    ADD_FAILURE() << "loading " << path << " should fail with '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(CheckpointFile, DamagedFilesAreRejectedNamingTheProblem) {
  TempDir tmp("damaged");
  const std::string dir = tmp.str();
  save_checkpoint(dir + "/good.bin", small_checkpoint());
  const std::string good = read_file(dir + "/good.bin");

  expect_load_error(dir + "/missing.bin", "cannot read");
  write_file(dir + "/magic.bin", "NOTACKPT" + good.substr(8));
  expect_load_error(dir + "/magic.bin", "not an hfta checkpoint");
  write_file(dir + "/short.bin", good.substr(0, good.size() - 10));
  expect_load_error(dir + "/short.bin", "truncated");
  std::string flipped = good;
  flipped[good.size() - 8] ^= 0x40;  // inside the float data
  write_file(dir + "/flipped.bin", flipped);
  expect_load_error(dir + "/flipped.bin", "checksum");
  std::string version = good;
  version[8] = 7;
  write_file(dir + "/version.bin", version);
  expect_load_error(dir + "/version.bin", "version 7");
  write_file(dir + "/header.bin", good.substr(0, 20) + std::string(good.size() - 20, '{'));
  expect_load_error(dir + "/header.bin", "checksum of its header and data");
  // A changed hyperparameter in the JSON header: the CRC covers the header too.
  std::string hyper = good;
  const size_t lr = hyper.find("0.2");
  ASSERT_NE(lr, std::string::npos);
  hyper[lr + 2] = '3';
  write_file(dir + "/hyper.bin", hyper);
  expect_load_error(dir + "/hyper.bin", "checksum of its header and data");
}

// A save that fails part way leaves neither a half-written file nor its temporary: a file size
// limit stops the write (as a full disk would), a directory in the way stops the rename.
TEST(CheckpointFile, AFailedSaveLeavesNoTemporaryFileBehind) {
  TempDir tmp("failed_save");
  const std::string dir = tmp.str();
  Checkpoint big = small_checkpoint();
  big.tensors[0].values.assign(1 << 16, 1.0f);
  big.tensors[0].shape = Shape{2, 1 << 15};
  auto expect_nothing_but = [&](const std::vector<std::string>& names) {
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(dir)) found.push_back(e.path().filename());
    std::sort(found.begin(), found.end());
    EXPECT_EQ(found, names);
  };

  ::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead of killing the process
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string limit_error, safetensors_error;
  try {
    save_checkpoint(dir + "/c.ckpt", big);
  } catch (const Error& e) {
    limit_error = e.what();
  }
  try {
    write_safetensors(dir + "/m.safetensors",
                      {{.name = "w", .shape = {1 << 16}, .floats = big.tensors[0].values}});
  } catch (const Error& e) {
    safetensors_error = e.what();
  }
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
  EXPECT_NE(limit_error.find("cannot write checkpoint"), std::string::npos) << limit_error;
  EXPECT_NE(safetensors_error.find("m.safetensors"), std::string::npos) << safetensors_error;
  expect_nothing_but({});

  fs::create_directories(dir + "/taken.ckpt/inside");
  expect_load_error(dir + "/missing.ckpt", "cannot read");
  EXPECT_THROW(save_checkpoint(dir + "/taken.ckpt", small_checkpoint()), Error);
  EXPECT_THROW(write_safetensors(dir + "/taken.ckpt", {{.name = "b", .shape = {1}, .floats = {2}}}),
               Error);
  expect_nothing_but({"taken.ckpt"});
}

// Version 2 files (the same layout, the CRC over the data only) load as they did.
TEST(CheckpointFile, ReadsVersion2Files) {
  TempDir tmp("version2");
  const std::string path = tmp.str() + "/v2.bin";
  const Checkpoint c = small_checkpoint();
  save_checkpoint(path, c);
  std::string bytes = read_file(path);
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data() + 12, sizeof header_bytes);
  const size_t data_begin = 20 + header_bytes, data_size = bytes.size() - 4 - data_begin;
  const uint32_t version = 2;
  std::memcpy(bytes.data() + 8, &version, sizeof version);
  const auto data_crc = static_cast<uint32_t>(
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data() + data_begin),
            static_cast<uInt>(data_size)));
  std::memcpy(bytes.data() + bytes.size() - 4, &data_crc, sizeof data_crc);
  write_file(path, bytes);
  const Checkpoint back = load_checkpoint(path);
  EXPECT_EQ(back.hyper, c.hyper);
  ASSERT_EQ(back.tensors.size(), c.tensors.size());
  for (size_t i = 0; i < c.tensors.size(); ++i)
    EXPECT_EQ(back.tensors[i].values, c.tensors[i].values);
}

// --- through the command line ---------------------------------------------------------------

const std::string kRun =
    "train --model lenet --dataset synthetic --synthetic-size 2048 --lr 0.001,0.003 --epochs 2 "
    "--iters-per-epoch 12 --batch-size 32 --seed 3 --no-progress";

std::vector<std::vector<std::string>> metric_rows(const std::string& dir) {
  return read_csv(dir + "/metrics.csv").rows;
}

// Runs `hfta <args>`, expecting it to succeed; returns what it printed.
std::string succeed(const std::string& args) {
  test::CommandResult r = run_hfta(args);
  EXPECT_EQ(r.exit_code, 0) << args << " printed: " << r.output();
  return r.output();
}

TEST(CheckpointCli, ResumingAfterAnEpochGivesTheUninterruptedMetrics) {
  TempDir full("full"), split("split");
  succeed(kRun + " --out " + full.str());
  std::string once = kRun;
  once.replace(once.find("--epochs 2"), 10, "--epochs 1");
  succeed(once + " --out " + split.str());
  const std::string out = succeed(kRun + " --out " + split.str() + " --resume");
  EXPECT_NE(out.find("resuming after step 12"), std::string::npos) << out;
  EXPECT_EQ(metric_rows(split.str()), metric_rows(full.str()));
}

// Through the command line: an array with one model that diverges resumes, and the diverged
// model stays diverged while the other trains on as in the uninterrupted run.
TEST(CheckpointCli, ARunWithADivergedModelResumes) {
  TempDir full("diverged_full"), split("diverged_split");
  const std::string run =
      "train --model mlp --dataset synthetic --lr 0.001,1e12 --iters-per-epoch 4 --seed 2";
  succeed(run + " --epochs 2 --out " + full.str());
  succeed(run + " --epochs 1 --out " + split.str());
  const std::string out = succeed(run + " --epochs 2 --resume --out " + split.str());
  EXPECT_NE(out.find("resuming"), std::string::npos) << out;
  EXPECT_EQ(metric_rows(split.str()), metric_rows(full.str()));
}

TEST(CheckpointCli, CtrlCSavesACheckpointAndResumeFinishesIdentically) {
  TempDir full_tmp("full_c"), cut_tmp("cut");
  const std::string full = full_tmp.str(), cut = cut_tmp.str();
  succeed(kRun + " --out " + full);

  // Start the same run and press Ctrl-C once it has written a few steps.
  const pid_t pid = test::spawn_hfta(kRun + " --out " + cut);
  ASSERT_GT(pid, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(cut + "/metrics.csv") && read_file(cut + "/metrics.csv").size() > 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 0) GTEST_SKIP() << "the run finished before Ctrl-C reached it";
  ASSERT_TRUE(fs::exists(cut + "/checkpoint.bin"));
  Checkpoint c = load_checkpoint(cut + "/checkpoint.bin");
  EXPECT_GT(c.step, 0);
  EXPECT_LT(c.step, 24);

  succeed(kRun + " --out " + cut + " --resume");
  EXPECT_EQ(metric_rows(cut), metric_rows(full));
}

// A periodic checkpoint lies inside an epoch: a run killed (SIGKILL: no Ctrl-C checkpoint) once
// the log reports one written resumes from it and writes the uninterrupted run's metrics.
TEST(CheckpointCli, ResumingFromAPeriodicCheckpointMidEpochGivesTheUninterruptedMetrics) {
  TempDir full_tmp("full_p"), cut_tmp("cut_p");
  const std::string full = full_tmp.str(), cut = cut_tmp.str();
  succeed(kRun + " --out " + full);
  const std::string periodic = kRun + " --checkpoint-every 5";
  const std::string log = cut + "/log.txt";
  const pid_t pid = test::spawn_hfta(periodic + " --out " + cut, log);
  ASSERT_GT(pid, 0);
  // The first periodic checkpoint (step 5, or later if the writer was still busy).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  bool exited = false;
  while (std::chrono::steady_clock::now() < deadline &&
         read_file(log).find(" written to ") == std::string::npos) {
    if ((exited = waitpid(pid, &status, WNOHANG) == pid)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  if (WIFEXITED(status)) GTEST_SKIP() << "the run finished before the kill reached it";
  const Checkpoint c = load_checkpoint(cut + "/checkpoint.bin");
  EXPECT_GE(c.step, 5);
  const std::string out = succeed(periodic + " --out " + cut + " --resume");
  EXPECT_NE(out.find(fmt::format("resuming after step {} (epoch {}, batch {})", c.step, c.epoch + 1,
                                 c.batch_in_epoch)),
            std::string::npos)
      << out;
  EXPECT_EQ(metric_rows(cut), metric_rows(full));
}

TEST(CheckpointCli, ResumeWithOtherFlagsIsRefusedNamingTheFlag) {
  TempDir dir("mismatch");
  succeed(kRun + " --out " + dir.str());
  std::string other = kRun;
  other.replace(other.find("--lr 0.001,0.003"), 16, "--lr 0.001,0.005");
  expect_hfta_error(other + " --out " + dir.str() + " --resume",
                    "it was trained with --lr 0.001,0.003, this command gives 0.001,0.005");
  TempDir empty("empty");
  expect_hfta_error(kRun + " --out " + empty.str() + " --resume", "no checkpoint");
}

TEST(CheckpointCli, MalformedNumbersInTheRunsCsvFilesNameTheFileLineAndColumn) {
  TempDir dir("malformed");
  succeed(kRun + " --out " + dir.str());
  // metrics.csv, read back by --resume: line 3 (the second row), column 2 (step).
  const std::string metrics = dir.str() + "/metrics.csv";
  std::string text = read_file(metrics);
  const size_t second_row = text.find('\n', text.find('\n') + 1) + 1;
  text.replace(text.find(',', second_row) + 1, 1, "x");
  write_file(metrics, text);
  expect_hfta_error(kRun + " --out " + dir.str() + " --resume",
                    metrics + " line 3, column 2 (step): 'x' is not an integer");
  // summary.csv, read by extract --best.
  const std::string summary = dir.str() + "/summary.csv";
  CsvTable t = read_csv(summary);
  text = read_file(summary);
  const std::string accuracy = t.rows[1][t.column("test_accuracy")];
  text.replace(text.rfind(accuracy), accuracy.size(), "0.5.1");
  write_file(summary, text);
  expect_hfta_error("extract --run " + dir.str() + " --best --out " + dir.str() + "/best.bin",
                    fmt::format("{} line 3, column {} (test_accuracy): '0.5.1' is not a number",
                                summary, t.column("test_accuracy") + 1));
}

TEST(CheckpointCli, ExtractedBestModelEvaluatesAsInsideTheArray) {
  TempDir tmp("extract");
  const std::string dir = tmp.str();
  succeed(kRun + " --out " + dir);
  succeed("extract --run " + dir + " --model 1 --out " + dir + "/m1.bin");
  Checkpoint one = load_checkpoint(dir + "/m1.bin");
  EXPECT_EQ(one.B, 1);
  EXPECT_EQ(one.model_ids, std::vector<int64_t>{1});
  const std::string out = succeed("eval --dataset synthetic --checkpoint " + dir + "/m1.bin");
  CsvTable summary = read_csv(dir + "/summary.csv");
  const double acc = std::stod(summary.rows[1][summary.column("test_accuracy")]);
  EXPECT_NE(out.find(fmt::format("test acc {:.2f}%", 100.0 * acc)), std::string::npos)
      << out << " should report the accuracy summary.csv gives model 1: " << acc;
  succeed("extract --run " + dir + " --best --out " + dir + "/best.bin");
  expect_hfta_error("extract --run " + dir + " --model 5 --out " + dir + "/x.bin", "model 5");
}

}  // namespace
}  // namespace hfta

namespace hfta {
namespace {

// BatchNorm running statistics are part of a checkpoint: restored into a fresh array they give
// the same buffers (and so the same eval-mode outputs).
TEST(CheckpointFile, BatchNormRunningStatisticsRoundTrip) {
  auto trained = make_model("mobilenetv2", {.B = 2, .batch_size = 4, .seed = 5});
  std::vector<float> images(4 * 3 * 32 * 32, 0.0f);
  for (size_t i = 0; i < images.size(); ++i) images[i] = static_cast<float>(i % 97) / 50.0f - 1;
  std::vector<int32_t> labels = {1, 2, 3, 4};
  trained->forward(TensorView(images.data(), {4, 3, 32, 32}), IndexView(labels.data(), {4}), true);
  Checkpoint c;
  c.tensors = capture_tensors(*trained, nullptr);
  auto fresh = make_model("mobilenetv2", {.B = 2, .batch_size = 4, .seed = 6});
  c.model = "mobilenetv2";
  c.B = 2;
  restore_tensors(c, *fresh, nullptr);
  ASSERT_EQ(fresh->buffers().size(), trained->buffers().size());
  for (size_t i = 0; i < fresh->buffers().size(); ++i) {
    const TensorView a = trained->buffers()[i].value, b = fresh->buffers()[i].value;
    EXPECT_TRUE(std::equal(a.data, a.data + a.numel(), b.data)) << trained->buffers()[i].name;
  }
  // The running statistics moved off their initial values, so the check is not vacuous.
  EXPECT_NE(trained->buffers()[0].value[0], 0.0f);
  EXPECT_EQ(trained->buffers()[2].value[0], 1.0f) << "num_batches_tracked after one step";
}

// B MobileNetV2s (BatchNorm buffers) after one Adam step at learning rates 0.01, 0.02, ...: every
// parameter, buffer and moment moved off its initial value.
std::pair<std::unique_ptr<Model>, std::unique_ptr<Optimizer>> stepped_mobilenetv2(int64_t B) {
  auto model = make_model("mobilenetv2", {.B = B, .batch_size = 4, .seed = 5});
  std::vector<float> lrs;
  for (int64_t b = 0; b < B; ++b) lrs.push_back(0.01f * static_cast<float>(b + 1));
  auto optimizer = make_optimizer("adam", *model, resolve_hyper("adam", {{"lr", lrs}}, B));
  std::vector<float> images(4 * 3 * 32 * 32);
  for (size_t i = 0; i < images.size(); ++i) images[i] = static_cast<float>(i % 97) / 50.0f - 1;
  std::vector<int32_t> labels = {1, 2, 3, 4};
  model->forward(TensorView(images.data(), {4, 3, 32, 32}), IndexView(labels.data(), {4}), true);
  model->backward();
  optimizer->step(model->param_arena(), model->grad_arena());
  return {std::move(model), std::move(optimizer)};
}

// model_state_crc32s of a checkpoint that borrows the live tensors, as a run's end takes them.
std::vector<uint32_t> live_state_crc32s(const Model& model, const Optimizer* optimizer) {
  Checkpoint live;
  live.B = model.B();
  capture_tensors(model, optimizer, live.tensors, /*values=*/true, /*borrow=*/true);
  return model_state_crc32s(live);
}

// A run's summary takes each model's state_crc32 from the live array, its tensors borrowed: it
// must be model_state_crc32 of the checkpoint the array would save, model by model, with and
// without the optimizer's state, and change for model b alone when only model b's bits change.
TEST(CheckpointFile, LiveStateCrcsAreThoseOfTheCheckpoint) {
  for (const int64_t B : {1, 3}) {
    SCOPED_TRACE(fmt::format("B={}", B));
    auto [model, optimizer] = stepped_mobilenetv2(B);
    const Optimizer* const state_of[] = {nullptr, optimizer.get()};
    for (const Optimizer* opt : state_of) {
      Checkpoint c;
      c.B = B;
      c.tensors = capture_tensors(*model, opt);
      const std::vector<uint32_t> live = live_state_crc32s(*model, opt);
      ASSERT_EQ(static_cast<int64_t>(live.size()), B);
      for (int64_t b = 0; b < B; ++b)
        EXPECT_EQ(live[b], model_state_crc32(c, b))
            << "model " << b << (opt ? " with" : " without") << " the optimizer's state";
    }
    // One bit of the last model's last parameter.
    const std::vector<uint32_t> before = live_state_crc32s(*model, optimizer.get());
    const TensorView last = model->params().back().value;
    float* value = last.data + last.numel() - 1;
    *value = std::nextafter(*value, 1e30f);
    const std::vector<uint32_t> after = live_state_crc32s(*model, optimizer.get());
    for (int64_t b = 0; b < B; ++b) EXPECT_EQ(after[b] != before[b], b == B - 1) << "model " << b;
  }
}

// A checkpoint that borrows the live tensors (an epoch's end, the run's end) writes the bytes of
// one that copies them, hashes to its CRCs, and copies nothing.
TEST(CheckpointFile, ABorrowingCheckpointSavesTheBytesOfACopy) {
  TempDir dir("borrowed");
  auto [model, optimizer] = stepped_mobilenetv2(2);
  Checkpoint copied;
  copied.model = "mobilenetv2";
  copied.B = 2;
  copied.model_ids = {0, 1};
  copied.epoch_loss_sum = copied.last_train_loss = {1.5, 2.5};
  copied.optimizer_steps = {1, 1};
  copied.skipped_steps = {0, 0};
  Checkpoint borrowed = copied;
  capture_tensors(*model, optimizer.get(), copied.tensors);
  capture_tensors(*model, optimizer.get(), borrowed.tensors, true, /*borrow=*/true);
  ASSERT_EQ(borrowed.tensors.size(), copied.tensors.size());
  for (const CheckpointTensor& t : borrowed.tensors) {
    EXPECT_NE(t.source, nullptr) << t.name;
    EXPECT_TRUE(t.values.empty()) << t.name << " was copied";
  }
  EXPECT_EQ(borrowed.tensors.front().source, model->params().front().value.data);
  const std::string a = (dir.path / "copied.bin").string(),
                    b = (dir.path / "borrowed.bin").string();
  save_checkpoint(a, copied);
  save_checkpoint(b, borrowed);
  EXPECT_EQ(read_file(a), read_file(b));
  for (int64_t b = 0; b < 2; ++b)
    EXPECT_EQ(model_state_crc32(borrowed, b), model_state_crc32(copied, b));
  EXPECT_EQ(model_state_crc32s(borrowed), model_state_crc32s(copied));
  EXPECT_EQ(model_state_crc32s(copied),
            (std::vector<uint32_t>{model_state_crc32(copied, 0), model_state_crc32(copied, 1)}));
}

// A model with BatchNorm and dropout (MobileNetV2: dropout 0.2 before its classifier) resumes
// exactly: running statistics come back from the checkpoint, dropout masks from the step count.
TEST(CheckpointCli, BatchNormAndDropoutModelResumesExactly) {
  const std::string run =
      "train --model mobilenetv2 --dataset synthetic --synthetic-size 64 --lr 0.00001,0.00002 "
      "--epochs 2 --iters-per-epoch 2 --batch-size 16 --seed 2 --no-progress";
  TempDir full("mnv2_full"), split("mnv2_split");
  succeed(run + " --out " + full.str());
  std::string once = run;
  once.replace(once.find("--epochs 2"), 10, "--epochs 1");
  succeed(once + " --out " + split.str());
  succeed(run + " --out " + split.str() + " --resume");
  EXPECT_EQ(metric_rows(split.str()), metric_rows(full.str()));
  CsvTable a = read_csv(full.str() + "/summary.csv"), b = read_csv(split.str() + "/summary.csv");
  ASSERT_EQ(a.rows.size(), 2u);
  for (size_t r = 0; r < a.rows.size(); ++r)
    EXPECT_EQ(a.rows[r][a.column("test_loss")], b.rows[r][b.column("test_loss")]) << "model " << r;
}

}  // namespace
}  // namespace hfta
