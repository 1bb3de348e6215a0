// `--deterministic` through the `hfta` binary: for every model of the zoo, on 1 and on 2 threads,
// every array of B in {1, 2, 3, 5, 8} models under every plan that lays the models out
// differently (fused, chunk:2, threads, threads:1, and threads:1/2 for the classifiers, whose
// loop visits a group for K steps) trains each model bit for bit as `--serial` trains it alone:
// every tensor of model b's slice of the array's checkpoint (parameters, buffers, optimizer
// state) has the bits of the serial run's checkpoint-model<b>.bin, and metrics.csv's rows for the
// model are the same text. Three steps each, at the tiny sizes of the CLI matrix (cli_models.h);
// the serial run trains eight models with eight learning rates, and the array of B the first B.
//
// And the cases the default mode drifts on (README, "Deterministic mode"): LeNet on Fashion-MNIST
// with three learning rates for 40 steps under chunk:2 and threads, MobileNetV2 with two at batch
// size 16 under plan fused.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli_models.h"
#include "io/checkpoint.h"
#include "io/csv.h"
#include "models/plan.h"
#include "test_files.h"

namespace hfta {
namespace {

namespace fs = std::filesystem;
using cli_models::data_flags;
using cli_models::is_classifier;
using cli_models::model_case;
using cli_models::model_cases;
using cli_models::ModelCase;
using test::run_hfta;
using test::TempDir;

constexpr int64_t kMostModels = 8;

// Eight learning rates around the model's first one (as far apart as the matrix's).
std::vector<std::string> learning_rates(const ModelCase& m) {
  const double base = std::stod(m.lr2.substr(0, m.lr2.find(',')));
  std::vector<std::string> lrs;
  for (const double factor : {1.0, 4.0, 2.0, 0.5, 3.0, 1.5, 0.25, 6.0})
    lrs.push_back(fmt::format("{:g}", base * factor));
  return lrs;
}

std::string train_command(const ModelCase& m, const TempDir& dir,
                          const std::vector<std::string>& lrs, int threads, const std::string& how,
                          const std::string& out) {
  return fmt::format(
      "train --model {} {} --lr {} --epochs 1 --iters-per-epoch 3 --seed 3 --threads {} "
      "--deterministic --no-progress {} --out {}",
      m.name, data_flags(m, dir), fmt::join(lrs, ","), threads, how, out);
}

// The plans that lay B models out on `threads` threads in distinct ways (a plan whose layout is
// one group runs as fused, models/plan.h).
std::vector<std::string> distinct_plans(int64_t B, int threads, bool visits) {
  std::vector<std::string> names = {"fused", "chunk:2", "threads", "threads:1"};
  if (visits) names.push_back("threads:1/2");
  std::vector<std::string> out;
  std::vector<std::vector<std::pair<int64_t, int>>> seen;
  for (const std::string& name : names) {
    const PlanLayout layout = lay_out(ExecutionPlan::parse(name), B, threads);
    std::vector<std::pair<int64_t, int>> shape;
    for (const PlanGroup& g : layout.groups) shape.emplace_back(g.count, g.worker);
    shape.emplace_back(layout.steps_per_visit, layout.workers);
    if (std::find(seen.begin(), seen.end(), shape) != seen.end()) continue;
    seen.push_back(shape);
    out.push_back(name);
  }
  return out;
}

bool same_bits(const float* a, const float* b, int64_t n, int64_t* first_difference) {
  for (int64_t i = 0; i < n; ++i)
    if (std::memcmp(a + i, b + i, sizeof(float)) != 0) {
      *first_difference = i;
      return false;
    }
  return true;
}

// Model b's slice of every tensor of `array` against the one-model checkpoint `alone`.
void expect_model_bits(const Checkpoint& array, int64_t b, const Checkpoint& alone) {
  SCOPED_TRACE(fmt::format("model {}", b));
  ASSERT_EQ(array.tensors.size(), alone.tensors.size());
  EXPECT_EQ(array.step, alone.step);
  EXPECT_EQ(array.optimizer_steps.at(b), alone.optimizer_steps.at(0));
  for (size_t t = 0; t < array.tensors.size(); ++t) {
    const CheckpointTensor &fused = array.tensors[t], &single = alone.tensors[t];
    ASSERT_EQ(fused.name, single.name);
    const int64_t per_model = single.shape.numel();
    ASSERT_EQ(fused.shape.numel(), array.B * per_model) << fused.name;
    int64_t at = 0;
    EXPECT_TRUE(
        same_bits(fused.values.data() + b * per_model, single.values.data(), per_model, &at))
        << fused.name << " differs first at element " << at << ": "
        << fused.values[static_cast<size_t>(b * per_model + at)] << " in the array, "
        << single.values[static_cast<size_t>(at)] << " alone";
  }
}

// metrics.csv's rows of each model, as text, with the timing columns left out.
std::map<std::string, std::vector<std::string>> rows_by_model(const std::string& path) {
  const CsvTable t = read_csv(path);
  size_t model_col = t.header.size();
  std::vector<size_t> kept;
  for (size_t c = 0; c < t.header.size(); ++c) {
    const std::string& name = t.header[c];
    if (name == "model") model_col = c;
    if (name.find("per_s") == std::string::npos && name.find("second") == std::string::npos &&
        name.find("time") == std::string::npos && name != "wall_s")
      kept.push_back(c);
  }
  std::map<std::string, std::vector<std::string>> rows;
  for (const auto& row : t.rows) {
    std::string text;
    for (size_t c : kept) text += t.header[c] + "=" + row[c] + " ";
    rows[model_col < row.size() ? row[model_col] : ""].push_back(text);
  }
  return rows;
}

struct Case {
  std::string model;
  int threads;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  return fmt::format("{}_threads{}", info.param.model, info.param.threads);
}

class Deterministic : public testing::TestWithParam<Case> {};

TEST_P(Deterministic, EveryPlanAndBTrainsEachModelBitForBitAsAlone) {
  const ModelCase& m = model_case(GetParam().model);
  const int threads = GetParam().threads;
  TempDir dir(fmt::format("deterministic_{}_{}", m.name, threads));
  const std::vector<std::string> lrs = learning_rates(m);
  const std::string serial_out = (dir.path / "serial").string();
  const std::string serial_cmd = train_command(m, dir, lrs, threads, "--serial", serial_out);
  {
    const test::CommandResult r = run_hfta(serial_cmd);
    ASSERT_EQ(r.exit_code, 0) << "hfta " << serial_cmd << "\n" << r.output();
  }
  std::vector<Checkpoint> alone;
  for (int64_t b = 0; b < kMostModels; ++b)
    alone.push_back(load_checkpoint(fmt::format("{}/checkpoint-model{}.bin", serial_out, b)));
  const auto serial_rows = rows_by_model(serial_out + "/metrics.csv");

  for (const int64_t B : {1, 2, 3, 5, 8}) {
    const std::vector<std::string> first(lrs.begin(), lrs.begin() + B);
    for (const std::string& plan : distinct_plans(B, threads, is_classifier(m.kind))) {
      const std::string out = (dir.path / fmt::format("B{}_{}", B, plan)).string();
      const std::string cmd = train_command(m, dir, first, threads, "--plan " + plan, out);
      SCOPED_TRACE("hfta " + cmd + "\nagainst hfta " + serial_cmd);
      const test::CommandResult r = run_hfta(cmd);
      ASSERT_EQ(r.exit_code, 0) << r.output();
      const Checkpoint array = load_checkpoint(out + "/checkpoint.bin");
      ASSERT_EQ(array.B, B);
      const auto rows = rows_by_model(out + "/metrics.csv");
      for (int64_t b = 0; b < B; ++b) {
        expect_model_bits(array, b, alone[static_cast<size_t>(b)]);
        EXPECT_EQ(rows.at(std::to_string(b)), serial_rows.at(std::to_string(b))) << "model " << b;
      }
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const ModelCase& m : model_cases())
    for (const int threads : {1, 2}) out.push_back({m.name, threads});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Models, Deterministic, testing::ValuesIn(cases()), case_name);

}  // namespace
}  // namespace hfta
