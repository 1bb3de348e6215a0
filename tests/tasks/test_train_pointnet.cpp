// `hfta train --model pointnet_cls` and `pointnet_seg` end to end on the procedural shapes: the
// fused run and the serial run of the same command give each model the same loss curve (B = 4
// and B = 1), with and without the feature transform; segmentation reports each model's mean
// IoU and extracts, evaluates, resumes and exports; bad point-cloud flags fail naming the flag.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>

#include "io/csv.h"
#include "io/safetensors.h"
#include "test_files.h"

namespace hfta {
namespace {

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

class TrainCliPointNet : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(TrainCliPointNet, FusedAndSerialRunsGiveEveryModelTheSameLossCurve) {
  const auto& [model, lrs] = GetParam();
  const int64_t B = static_cast<int64_t>(std::count(lrs.begin(), lrs.end(), ',')) + 1;
  const std::string common = "train --model " + model + " --dataset shapes --npoints 32 --lr " +
                             lrs +
                             " --epochs 2 --iters-per-epoch 2 --batch-size 16 --seed 3 "
                             "--synthetic-size 64 --no-progress --out ";
  TempDir fused_tmp(model + "_pn_fused"), serial_tmp(model + "_pn_serial");
  test::CommandResult fused = run_hfta(common + fused_tmp.str() + " --fused");
  ASSERT_EQ(fused.exit_code, 0) << fused.output();
  test::CommandResult serial = run_hfta(common + serial_tmp.str() + " --serial");
  ASSERT_EQ(serial.exit_code, 0) << serial.output();
  auto f = losses(fused_tmp.str() + "/metrics.csv"), s = losses(serial_tmp.str() + "/metrics.csv");
  ASSERT_EQ(f.size(), static_cast<size_t>(B * 4)) << "B models x 2 epochs x 2 steps";
  for (const auto& [key, loss] : f) {
    ASSERT_TRUE(s.count(key)) << "serial run lacks model " << key.first << " step " << key.second;
    EXPECT_NEAR(loss, s[key], 2e-5 * std::fabs(s[key]) + 1e-6)
        << "model " << key.first << " step " << key.second;
  }
  if (B > 1) {
    EXPECT_NE(f[std::make_pair(0, 4)], f[std::make_pair(1, 4)]);
  }
  EXPECT_NE(fused.out.find("test acc"), std::string::npos) << fused.output();
}

INSTANTIATE_TEST_SUITE_P(Models, TrainCliPointNet,
                         ::testing::Combine(::testing::Values("pointnet_cls", "pointnet_cls_ft"),
                                            ::testing::Values("0.001",
                                                              "0.001,0.002,0.0005,0.003")));

// pointnet_seg (fxia22's PointNetDenseCls) through the CLI: per-point labels of the shapes'
// parts, fused == serial per model and step, per-model mean IoU in the log and summary.csv; the
// feature transform by --feature-transform.
class TrainCliPointNetSeg : public ::testing::TestWithParam<std::tuple<bool, std::string>> {};

TEST_P(TrainCliPointNetSeg, FusedAndSerialRunsAgreeAndReportMeanIoU) {
  const auto& [feature_transform, lrs] = GetParam();
  const int64_t B = static_cast<int64_t>(std::count(lrs.begin(), lrs.end(), ',')) + 1;
  const std::string common = "train --model pointnet_seg --dataset shapes --npoints 32 --lr " +
                             lrs + (feature_transform ? " --feature-transform" : "") +
                             " --epochs 2 --iters-per-epoch 2 --batch-size 8 --seed 3 "
                             "--synthetic-size 32 --synthetic-test-size 16 "
                             "--no-progress --out ";
  const std::string tag = feature_transform ? "seg_ft" : "seg";
  TempDir fused_tmp(tag + "_fused"), serial_tmp(tag + "_serial");
  test::CommandResult fused = run_hfta(common + fused_tmp.str() + " --fused --plan fused");
  ASSERT_EQ(fused.exit_code, 0) << fused.output();
  test::CommandResult serial = run_hfta(common + serial_tmp.str() + " --serial");
  ASSERT_EQ(serial.exit_code, 0) << serial.output();
  auto f = losses(fused_tmp.str() + "/metrics.csv"), s = losses(serial_tmp.str() + "/metrics.csv");
  ASSERT_EQ(f.size(), static_cast<size_t>(B * 4)) << "B models x 2 epochs x 2 steps";
  for (const auto& [key, loss] : f) {
    ASSERT_TRUE(s.count(key)) << "serial run lacks model " << key.first << " step " << key.second;
    EXPECT_NEAR(loss, s[key], 2e-5 * std::fabs(s[key]) + 1e-6)
        << "model " << key.first << " step " << key.second;
  }
  // The shapes have 22 parts: the first loss is near log(22).
  EXPECT_NEAR(f[std::make_pair(0, 1)], std::log(22.0), 1.0);
  EXPECT_NE(fused.out.find("mIoU"), std::string::npos) << fused.output();
  EXPECT_NE(fused.out.find(feature_transform ? "pointnet_seg_ft" : "pointnet_seg"),
            std::string::npos)
      << fused.output();
  EXPECT_NE(fused.out.find("best: model"), std::string::npos) << fused.output();
  EXPECT_NE(fused.out.find("mean IoU"), std::string::npos) << fused.output();
  for (const std::string& dir : {fused_tmp.str(), serial_tmp.str()}) {
    CsvTable summary = read_csv(dir + "/summary.csv");
    ASSERT_EQ(summary.rows.size(), static_cast<size_t>(B));
    for (size_t r = 0; r < summary.rows.size(); ++r) {
      const double miou = summary.number(r, summary.column("test_miou"));
      EXPECT_GT(miou, 0.0);
      EXPECT_LE(miou, 1.0);
      const double acc = summary.number(r, summary.column("test_accuracy"));
      EXPECT_GE(acc, 0.0);
      EXPECT_LE(acc, 1.0);
    }
  }
  // Evaluation is the same whatever ran the models.
  CsvTable fs = read_csv(fused_tmp.str() + "/summary.csv"),
           ss = read_csv(serial_tmp.str() + "/summary.csv");
  for (size_t r = 0; r < fs.rows.size(); ++r)
    EXPECT_NEAR(fs.number(r, fs.column("test_miou")), ss.number(r, ss.column("test_miou")), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(
    Models, TrainCliPointNetSeg,
    ::testing::Combine(::testing::Bool(), ::testing::Values("0.001", "0.001,0.002,0.0005,0.003")));

// A trained seg run's checkpoint: extract --best picks by mean IoU, eval reports it, and
// --feature-transform on a model without one fails naming the flag.
TEST(TrainCliPointNetSeg, ExtractEvalAndResume) {
  TempDir tmp("seg_extract");
  const std::string common =
      "train --model pointnet_seg --dataset shapes --npoints 32 --lr 0.001,0.003 "
      "--iters-per-epoch 2 --batch-size 8 --seed 5 --synthetic-size 32 --synthetic-test-size 16 "
      "--plan fused --no-progress --out " +
      tmp.str();
  test::CommandResult r = run_hfta(common + " --epochs 1");
  ASSERT_EQ(r.exit_code, 0) << r.output();
  r = run_hfta(common + " --epochs 2 --resume");
  ASSERT_EQ(r.exit_code, 0) << r.output();
  EXPECT_NE(r.out.find("mIoU"), std::string::npos) << r.output();
  const std::string one = tmp.str() + "/best.bin";
  r = run_hfta("extract --run " + tmp.str() + " --best --out " + one);
  ASSERT_EQ(r.exit_code, 0) << r.output();
  r = run_hfta("eval --checkpoint " + one + " --dataset shapes");
  ASSERT_EQ(r.exit_code, 0) << r.output();
  EXPECT_NE(r.out.find("mIoU"), std::string::npos) << r.output();
  // Export with fxia22's PointNetDenseCls names and PyTorch's Conv1d layouts (the golden script
  // loads such files into that module, strict).
  const std::string st = tmp.str() + "/model1.safetensors";
  r = run_hfta("export --run " + tmp.str() + " --model 1 --out " + st);
  ASSERT_EQ(r.exit_code, 0) << r.output();
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const SafeTensor& t : read_safetensors(st)) shapes[t.name] = t.shape;
  EXPECT_EQ(shapes.at("feat.stn.conv1.weight"), (std::vector<int64_t>{64, 3, 1}));
  EXPECT_EQ(shapes.at("conv1.weight"), (std::vector<int64_t>{512, 1088, 1}));
  EXPECT_EQ(shapes.at("conv4.weight"), (std::vector<int64_t>{22, 128, 1}));
  EXPECT_EQ(shapes.at("bn3.running_mean"), (std::vector<int64_t>{128}));
  EXPECT_EQ(shapes.count("feat.fstn.conv1.weight"), 0u);
  r = run_hfta(
      "train --model lenet --feature-transform --dataset synthetic --epochs 1 "
      "--no-progress --out " +
      tmp.str() + "/x");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output().find("--feature-transform"), std::string::npos) << r.output();
  r = run_hfta("train --model pointnet_seg --dataset synthetic --epochs 1 --no-progress --out " +
               tmp.str() + "/y");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output().find("part labels"), std::string::npos) << r.output();
}

// `hfta trial` (what `hfta sweep` runs) takes --npoints, so the sweep can time the PointNets on
// clouds of its size; a model that takes no clouds refuses it.
TEST(TrialPointNet, TakesNpoints) {
  test::CommandResult r = run_hfta(
      "trial --model pointnet_seg --dataset shapes --npoints 16 --B 2 --steps 1 --warmup 0 "
      "--batch-size 4 --plan fused");
  ASSERT_EQ(r.exit_code, 0) << r.output();
  EXPECT_NE(r.out.find("hfta-trial-result"), std::string::npos) << r.output();
  r = run_hfta("trial --model lenet --dataset synthetic --npoints 16 --steps 1 --plan fused");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output().find("--npoints"), std::string::npos) << r.output();
}

TEST(TrainCliPointNetErrors, BadFlagsNameTheProblem) {
  TempDir tmp("pn_errors");
  const std::string out = " --epochs 1 --iters-per-epoch 1 --no-progress --out " + tmp.str();
  test::CommandResult r = run_hfta("train --model pointnet_cls --dataset shapes --npoints 0" + out);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output().find("--npoints"), std::string::npos) << r.output();
  r = run_hfta("train --model pointnet_cls --dataset shapenet-part" + out);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output().find("--data-dir"), std::string::npos) << r.output();
}

}  // namespace
}  // namespace hfta
