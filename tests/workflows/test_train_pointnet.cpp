// `hfta train --model pointnet_cls` end to end on the procedural shapes: the fused run and the
// serial run of the same command give each model the same loss curve (B = 4 and B = 1), with and
// without the feature transform; bad point-cloud flags fail naming the flag.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>

#include "test_files.h"
#include "workflows/csv.h"

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
  if (B > 1) EXPECT_NE(f[std::make_pair(0, 4)], f[std::make_pair(1, 4)]);
  EXPECT_NE(fused.out.find("test acc"), std::string::npos) << fused.output();
}

INSTANTIATE_TEST_SUITE_P(Models, TrainCliPointNet,
                         ::testing::Combine(::testing::Values("pointnet_cls", "pointnet_cls_ft"),
                                            ::testing::Values("0.001",
                                                              "0.001,0.002,0.0005,0.003")));

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
