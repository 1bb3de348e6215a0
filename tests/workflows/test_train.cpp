// `hfta train` end to end, through the command line: the fused run and the serial run of the
// same command give each model the same loss curve; results files have their documented columns;
// bad flags fail with a message naming the flag.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include "core/error.h"
#include "workflows/csv.h"
#include "workflows/train.h"

namespace hfta {
namespace {

struct CommandResult {
  int exit_code;
  std::string output;
};

CommandResult run_hfta(const std::string& args) {
  std::string cmd = std::string(HFTA_CLI_PATH) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("hfta_test_train_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  return dir.string();
}

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
  const std::string fused_dir = temp_dir(model + "_fused"),
                    serial_dir = temp_dir(model + "_serial");
  CommandResult fused = run_hfta(common + fused_dir + " --fused");
  ASSERT_EQ(fused.exit_code, 0) << fused.output;
  CommandResult serial = run_hfta(common + serial_dir + " --serial");
  ASSERT_EQ(serial.exit_code, 0) << serial.output;

  auto f = losses(fused_dir + "/metrics.csv"), s = losses(serial_dir + "/metrics.csv");
  ASSERT_EQ(f.size(), 3u * 6u) << "3 models x 2 epochs x 3 steps";
  ASSERT_EQ(s.size(), f.size());
  for (const auto& [key, loss] : f) {
    ASSERT_TRUE(s.count(key)) << "serial run lacks model " << key.first << " step " << key.second;
    // Losses are printed with 6 significant digits; fused and serial agree to fp32 rounding.
    EXPECT_NEAR(loss, s[key], 2e-5 * std::fabs(s[key]) + 1e-6)
        << "model " << key.first << " step " << key.second;
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
  EXPECT_NE(fused.output.find("test acc"), std::string::npos) << fused.output;
  std::filesystem::remove_all(fused_dir);
  std::filesystem::remove_all(serial_dir);
}

INSTANTIATE_TEST_SUITE_P(Models, TrainCli, ::testing::Values("mlp", "lenet"));

TEST(TrainCliErrors, BadFlagsNameTheProblem) {
  const std::string out =
      " --dataset synthetic --epochs 1 --iters-per-epoch 1 --no-progress --out " +
      temp_dir("errors");
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
           {"--lr abc", "--lr"}}) {
    CommandResult r = run_hfta("train " + c.args + out);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.output.find(c.message), std::string::npos)
        << c.args << " should mention '" << c.message << "', printed: " << r.output;
  }
  CommandResult missing =
      run_hfta("train --dataset fashion-mnist --data-dir /nonexistent/dir --no-progress --out " +
               temp_dir("missing"));
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("/nonexistent/dir"), std::string::npos) << missing.output;
}

TEST(TrainOptions, ArraySizeIsTheLongestListAndOtherLengthsAreErrors) {
  TrainOptions o;
  o.lr = {0.1f, 0.2f, 0.3f};
  EXPECT_EQ(array_size(o), 3);
  o.weight_decay = {0.0f, 0.1f, 0.2f};
  EXPECT_EQ(array_size(o), 3);
  o.eps = {1e-8f, 1e-7f};
  EXPECT_THROW(array_size(o), Error);
  o.eps = {};
  EXPECT_THROW(array_size(o), Error);
}

}  // namespace
}  // namespace hfta
