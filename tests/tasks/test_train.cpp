// `hfta train` end to end, through the command line: the fused run and the serial run of the
// same command give each model the same loss curve; results files have their documented columns;
// bad flags of train, extract and eval fail with one line naming the flag; the hyperparameter
// table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/device_memory.h"
#include "core/error.h"
#include "io/csv.h"
#include "models/model.h"
#include "optim/optimizer.h"
#include "run/hyper.h"
#include "run/train.h"
#include "test_files.h"

namespace hfta {
namespace {

using test::expect_hfta_error;
using test::run_hfta;
using test::TempDir;

// loss by (model, step) from a metrics.csv
std::map<std::pair<int, int>, double> losses(const std::string& metrics) {
  CsvTable t = read_csv(metrics);
  std::map<std::pair<int, int>, double> out;
  for (const auto& row : t.rows)
    out[{std::stoi(row[t.column("model")]), std::stoi(row[t.column("step")])}] =
        std::stod(row[t.column("loss")]);
  return out;
}

class TrainCli : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainCli, FusedAndSerialRunsGiveEveryModelTheSameLossCurve) {
  const std::string model = GetParam();
  const std::string common = "train --model " + model +
                             " --dataset synthetic --lr 0.001,0.004,0.0003 --beta1 0.9,0.8,0.95 "
                             "--epochs 2 --iters-per-epoch 3 --batch-size 16 --seed 7 "
                             "--no-progress --out ";
  TempDir fused_tmp(model + "_fused"), serial_tmp(model + "_serial");
  const std::string fused_dir = fused_tmp.str(), serial_dir = serial_tmp.str();
  test::CommandResult fused = run_hfta(common + fused_dir + " --fused --plan fused");
  ASSERT_EQ(fused.exit_code, 0) << fused.output();
  test::CommandResult serial = run_hfta(common + serial_dir + " --serial");
  ASSERT_EQ(serial.exit_code, 0) << serial.output();

  auto f = losses(fused_dir + "/metrics.csv"), s = losses(serial_dir + "/metrics.csv");
  ASSERT_EQ(f.size(), 3u * 6u) << "3 models x 2 epochs x 3 steps";
  ASSERT_EQ(s.size(), f.size());
  auto expect_same_curves = [&](std::map<std::pair<int, int>, double>& run, const char* what) {
    ASSERT_EQ(run.size(), s.size()) << what;
    for (const auto& [key, loss] : run) {
      ASSERT_TRUE(s.count(key)) << what << " lacks model " << key.first << " step " << key.second;
      // Losses are printed with 6 significant digits; every run agrees to fp32 rounding.
      EXPECT_NEAR(loss, s[key], 2e-5 * std::fabs(s[key]) + 1e-6)
          << what << ": model " << key.first << " step " << key.second;
    }
  };
  expect_same_curves(f, "fused");
  // Every execution plan trains the same models (models/plan.h).
  for (const char* plan : {"chunk:2", "threads", "threads:1/2", "auto"}) {
    TempDir plan_tmp(model + "_plan");
    test::CommandResult r = run_hfta(common + plan_tmp.str() + " --threads 2 --plan " + plan);
    ASSERT_EQ(r.exit_code, 0) << r.output();
    auto p = losses(plan_tmp.str() + "/metrics.csv");
    expect_same_curves(p, plan);
    if (std::string(plan) == "auto") {
      EXPECT_NE(r.err.find("plan auto"), std::string::npos) << r.output();
    }
  }
  // Different learning rates train differently: the comparison is not vacuous.
  EXPECT_NE(f[std::make_pair(0, 6)], f[std::make_pair(1, 6)]);

  CsvTable summary = read_csv(fused_dir + "/summary.csv");
  ASSERT_EQ(summary.rows.size(), 3u);
  EXPECT_EQ(summary.rows[1][summary.column("lr")], "0.004");
  EXPECT_EQ(summary.rows[2][summary.column("beta1")], "0.95");
  EXPECT_EQ(summary.rows[0][summary.column("mode")], "fused");
  for (const auto& row : summary.rows) {
    double acc = std::stod(row[summary.column("test_accuracy")]);
    EXPECT_GE(acc, 0.0);
    EXPECT_LE(acc, 1.0);
    EXPECT_GT(std::stod(row[summary.column("wall_seconds")]), 0.0);
  }
  EXPECT_NE(fused.out.find("test acc"), std::string::npos) << fused.output();
}

INSTANTIATE_TEST_SUITE_P(Models, TrainCli, ::testing::Values("mlp", "lenet"));

// The deep BatchNorm nets through the command, B = 4 and B = 1: model b's loss column is the same
// fused and serial. Small learning rates and batches of 32: at large steps their fp32
// trajectories are chaotic whatever computes them (tests/models/test_torch_golden.cpp). Without
// --deterministic a model of an array equals the model alone to fp32 rounding only (README), and
// Adam turns rounding into lr-sized steps: each step already taken may add up to 2 lr to the
// loss difference (MobileNetV2 on AVX2, lr 3e-5: 1e-5, 2e-5, 7e-5 at steps 2, 3, 4).
class TrainCliDeep : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(TrainCliDeep, FusedAndSerialRunsGiveEveryModelTheSameLossCurve) {
  const auto& [model, lrs] = GetParam();
  const int64_t B = static_cast<int64_t>(std::count(lrs.begin(), lrs.end(), ',')) + 1;
  const std::string common = "train --model " + model + " --dataset synthetic --lr " + lrs +
                             " --epochs 2 --iters-per-epoch 2 --batch-size 32 --seed 3 "
                             "--synthetic-size 256 --no-progress --out ";
  TempDir fused_tmp(model + "_deep_fused"), serial_tmp(model + "_deep_serial");
  test::CommandResult fused = run_hfta(common + fused_tmp.str() + " --fused");
  ASSERT_EQ(fused.exit_code, 0) << fused.output();
  test::CommandResult serial = run_hfta(common + serial_tmp.str() + " --serial");
  ASSERT_EQ(serial.exit_code, 0) << serial.output();
  auto f = losses(fused_tmp.str() + "/metrics.csv"), s = losses(serial_tmp.str() + "/metrics.csv");
  ASSERT_EQ(f.size(), static_cast<size_t>(B * 4)) << "B models x 2 epochs x 2 steps";
  const auto lr_row = std::find_if(hyper_table().begin(), hyper_table().end(),
                                   [](const HyperRow& r) { return r.name == "lr"; });
  ASSERT_NE(lr_row, hyper_table().end());
  const std::vector<float> lr = parse_hyper_list(*lr_row, lrs);
  ASSERT_EQ(lr.size(), static_cast<size_t>(B));
  for (const auto& [key, loss] : f) {
    ASSERT_TRUE(s.count(key)) << "serial run lacks model " << key.first << " step " << key.second;
    const double drift = 2.0 * lr[static_cast<size_t>(key.first)] * (key.second - 1);
    EXPECT_NEAR(loss, s[key], 2e-5 * std::fabs(s[key]) + 1e-6 + drift)
        << "model " << key.first << " step " << key.second;
  }
  if (B > 1) {
    EXPECT_NE(f[std::make_pair(0, 4)], f[std::make_pair(1, 4)]);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TrainCliDeep,
                         ::testing::Combine(::testing::Values("resnet18", "mobilenetv2"),
                                            ::testing::Values("0.00001",
                                                              "0.00001,0.00003,0.000003,0.00002")));

TEST(TrainCliErrors, BadFlagsNameTheProblem) {
  TempDir tmp("errors");
  const std::string out =
      " --dataset synthetic --epochs 1 --iters-per-epoch 1 --no-progress --out " + tmp.str();
  struct Case {
    std::string args, message;
  };
  for (const Case& c : std::vector<Case>{
           {"--lr 0.1,0.2,0.3 --beta1 0.9,0.8", "--beta1 has 2 values but --lr has 3"},
           {"--lr 0.1,-0.2", "lr"},
           {"--lr 0.1 --beta1 1.5", "beta1"},
           {"--model nosuch", "nosuch"},
           {"--epochs 0", "--epochs"},
           {"--fused --serial", "excludes"},
           {"--plan fast", "unknown plan 'fast'"},
           {"--plan chunk:0", "chunk size must be a whole number"},
           {"--memory-budget 12apples", "--memory-budget '12apples' is not a memory size"},
           {"--lr abc", "--lr: 'abc' is not a number"},
           // Empty lists and elements are errors, not zeros.
           {"--lr ''", "--lr is empty"},
           {"--lr 0.1,,0.2", "--lr '0.1,,0.2' has an empty value at position 2"},
           {"--lr 0.1,", "has an empty value at position 2"},
           // Hyperparameters are finite; switches are 0 or 1; each belongs to its optimizers.
           {"--lr nan", "--lr: model 0 has nan"},
           {"--beta2 0.9,inf", "--beta2: model 1 has inf"},
           {"--optimizer sgd --momentum 0.9 --nesterov 2", "--nesterov: model 0 has 2"},
           {"--momentum 0.9", "--momentum is not a hyperparameter of --optimizer adam"},
           {"--optimizer sgd --beta1 0.9", "--beta1 is not a hyperparameter of --optimizer sgd"},
           // Counts: whole numbers in range, never empty.
           {"--threads -3", "--threads: -3 is less than 0"},
           {"--threads ''", "--threads: '' is not an integer"},
           {"--epochs ''", "--epochs: '' is not an integer"},
           {"--batch-size 0", "--batch-size: 0 is less than 1"},
           {"--iters-per-epoch -1", "--iters-per-epoch: -1 is less than 0"},
           {"--seed -1", "--seed: -1 is less than 0"},
           {"--seed 1.5", "--seed: '1.5' is not an integer"},
           {"--synthetic-size ''", "--synthetic-size: '' is not an integer"},
           {"--device gpu", "--device: unknown device 'gpu': choose cpu or cuda"},
           {"--device cuda --plan chunk:2", "--device cuda runs plan fused"},
           {"--model bert --device cuda --plan chunk:2", "--device cuda runs plan fused"}}) {
    expect_hfta_error("train " + c.args + out, c.message);
  }
  TempDir missing("missing");
  expect_hfta_error(
      "train --dataset fashion-mnist --data-dir /nonexistent/dir --no-progress --out " +
          missing.str(),
      "/nonexistent/dir");
}

// Without a CUDA device (or without the backend in this build), --device cuda says why before
// any data is read.
TEST(TrainCliErrors, DeviceCudaWithoutADeviceSaysWhy) {
  if (device_available(Device::kCuda)) GTEST_SKIP() << "a CUDA device is here";
  TempDir tmp("no_device");
  expect_hfta_error(
      "train --model lenet --dataset synthetic --device cuda --no-progress --out " + tmp.str(),
      "--device cuda: CUDA: ");
}

// `hfta eval --device`: a CPU run's checkpoint evaluated where asked; without a device it says
// why, and a bad name is refused by the command line.
TEST(TrainCliErrors, EvalDeviceIsCheckedBeforeTheDataIsRead) {
  TempDir tmp("eval_device");
  const std::string run =
      "train --model mlp --dataset synthetic --synthetic-size 64 "
      "--synthetic-test-size 32 --epochs 1 --iters-per-epoch 1 "
      "--batch-size 16 --lr 0.001,0.002 --no-progress --out " +
      tmp.str();
  test::CommandResult trained = run_hfta(run);
  ASSERT_EQ(trained.exit_code, 0) << trained.output();
  const std::string checkpoint = tmp.str() + "/checkpoint.bin";
  test::CommandResult cpu = run_hfta("eval --checkpoint " + checkpoint + " --device cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output();
  EXPECT_NE(cpu.output().find("2 mlp models after 1 steps"), std::string::npos) << cpu.output();
  expect_hfta_error("eval --checkpoint " + checkpoint + " --device gpu",
                    "--device: unknown device 'gpu': choose cpu or cuda");
  if (!device_available(Device::kCuda))
    expect_hfta_error("eval --checkpoint " + checkpoint + " --device cuda",
                      "--device cuda: CUDA: ");
}

TEST(TrainCliErrors, ExtractAndEvalFlagsNameTheProblem) {
  expect_hfta_error("extract --run /nonexistent --model -2 --out x.bin",
                    "--model: -2 is less than 0");
  expect_hfta_error("extract --run /nonexistent --model '' --out x.bin", "--model: '' is not");
  expect_hfta_error("extract --run /nonexistent --model 0 --out x.bin",
                    "no checkpoint for model 0");
  expect_hfta_error("eval --checkpoint /nonexistent.bin",
                    "cannot read checkpoint /nonexistent.bin");
}

TEST(HyperTable, EveryRowHasAFlagAndADefaultPerOptimizerThatReadsIt) {
  for (const HyperRow& row : hyper_table()) {
    EXPECT_FALSE(row.used_by.empty()) << row.name;
    for (const HyperDefault& d : row.used_by) {
      const auto& names = optimizer_names();
      EXPECT_NE(std::find(names.begin(), names.end(), d.optimizer), names.end())
          << row.name << " names an unknown optimizer " << d.optimizer;
    }
  }
  auto row = [](std::string_view name) {
    return *std::find_if(hyper_table().begin(), hyper_table().end(),
                         [&](const HyperRow& r) { return r.name == name; });
  };
  EXPECT_EQ(row("weight_decay").flag(), "--weight-decay");
  // Every optimizer builds from its defaults alone.
  for (const std::string& name : optimizer_names())
    EXPECT_NO_THROW(resolve_hyper(name, {}, 2)) << name;
  HyperValues sgd = resolve_hyper("sgd", {{"lr", {0.1f, 0.2f}}}, 2);
  EXPECT_EQ(sgd.at("lr"), (std::vector<float>{0.1f, 0.2f}));
  EXPECT_EQ(sgd.at("momentum"), (std::vector<float>{0.0f, 0.0f}));
  EXPECT_EQ(sgd.count("beta1"), 0u);
  // torch.optim's defaults: Adadelta(lr=1.0, rho=0.9, eps=1e-6), RMSprop(lr=0.01, alpha=0.99,
  // eps=1e-8, centered=False).
  HyperValues adadelta = resolve_hyper("adadelta", {}, 1);
  EXPECT_EQ(adadelta.at("lr")[0], 1.0f);
  EXPECT_EQ(adadelta.at("rho")[0], 0.9f);
  EXPECT_EQ(adadelta.at("eps")[0], 1e-6f);
  HyperValues rmsprop = resolve_hyper("rmsprop", {}, 1);
  EXPECT_EQ(rmsprop.at("lr")[0], 0.01f);
  EXPECT_EQ(rmsprop.at("alpha")[0], 0.99f);
  EXPECT_EQ(rmsprop.at("eps")[0], 1e-8f);
  EXPECT_EQ(rmsprop.at("centered")[0], 0.0f);
  EXPECT_EQ(rmsprop.count("rho"), 0u);
}

TEST(HyperTable, ArraySizeIsTheLongestListAndOtherLengthsAreErrors) {
  HyperValues given;
  EXPECT_EQ(array_size(given), 1);
  given["lr"] = {0.1f, 0.2f, 0.3f};
  EXPECT_EQ(array_size(given), 3);
  given["weight_decay"] = {0.0f, 0.1f, 0.2f};
  EXPECT_EQ(array_size(given), 3);
  given["eps"] = {1e-8f, 1e-7f};
  EXPECT_THROW(array_size(given), Error);
  given["eps"] = {};
  EXPECT_THROW(array_size(given), Error);
}

}  // namespace
}  // namespace hfta

namespace hfta {
namespace {

// --no-decay-norm-bias: BatchNorm parameters and biases get segments without weight decay,
// weights keep theirs.
TEST(HyperTable, NoDecayNormBiasExemptsNormParametersAndBiases) {
  auto model = make_model("resnet18", {.B = 1, .batch_size = 2, .seed = 1});
  const HyperValues values = resolve_hyper("adamw", {{"weight_decay", {0.01f}}}, 1);
  for (bool exempt : {false, true}) {
    auto optimizer = make_optimizer("adamw", *model, values, exempt);
    const auto& segments = optimizer->table().segments;
    ASSERT_EQ(segments.size(), model->params().size());
    int decayed = 0;
    for (size_t i = 0; i < segments.size(); ++i) {
      const Param& p = model->params()[i];
      EXPECT_EQ(segments[i].decay, !exempt || p.kind == ParamKind::kWeight) << p.name;
      decayed += segments[i].decay;
    }
    // ResNet-18: 20 conv weights and the fc weight decay; 20 BatchNorms (weight and bias) and
    // the fc bias do not.
    EXPECT_EQ(decayed, exempt ? 21 : 62);
  }
}

}  // namespace
}  // namespace hfta
