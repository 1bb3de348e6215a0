// `--deterministic` through the `hfta` binary: for every model of the zoo, on 1 and on 2 threads,
// every array of B in {1, 2, 3, 5, 8} models under every plan that lays the models out
// differently (fused, chunk:2, threads, threads:1, threads:1+fused; threads:1/K and
// threads:1+balanced/K are bit for bit threads:1 by tests/models/test_plans.cpp's PlanVisits)
// trains each model bit for bit as `--serial` on 2 threads trains it alone: summary.csv's
// state_crc32 of model b (the CRC-32 of its parameters, buffers and optimizer state) is the serial
// run's, which is checked against the bits of the serial run's checkpoint-model<b>.bin, and
// metrics.csv's rows for the model are the same text. Three steps each, at the tiny sizes of the
// CLI matrix (cli_models.h); the serial run trains eight models with eight learning rates, and
// the array of B the first B.
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
std::vector<std::string> distinct_plans(int64_t B, int threads) {
  const std::vector<std::string> names = {"fused", "chunk:2", "threads", "threads:1",
                                          "threads:1+fused"};
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

// summary.csv's state_crc32 (model_state_crc32 of the model's final state) by model.
std::map<std::string, std::string> state_crcs(const std::string& path) {
  const CsvTable t = read_csv(path);
  const size_t model = t.column("model"), crc = t.column("state_crc32");
  std::map<std::string, std::string> out;
  for (const auto& row : t.rows) out[row[model]] = row[crc];
  return out;
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

class Deterministic : public testing::TestWithParam<std::string> {};

TEST_P(Deterministic, EveryPlanBAndThreadCountTrainsEachModelBitForBitAsAlone) {
  const ModelCase& m = model_case(GetParam());
  TempDir dir("deterministic_" + m.name);
  const std::vector<std::string> lrs = learning_rates(m);
  const std::string serial_out = (dir.path / "serial").string();
  const std::string serial_cmd = train_command(m, dir, lrs, 2, "--serial", serial_out);
  {
    const test::CommandResult r = run_hfta(serial_cmd);
    ASSERT_EQ(r.exit_code, 0) << "hfta " << serial_cmd << "\n" << r.output();
  }
  const auto serial_crcs = state_crcs(serial_out + "/summary.csv");
  const auto serial_rows = rows_by_model(serial_out + "/metrics.csv");
  // summary.csv's CRC is that of the bits the checkpoint holds.
  for (int64_t b = 0; b < kMostModels; ++b) {
    const Checkpoint alone =
        load_checkpoint(fmt::format("{}/checkpoint-model{}.bin", serial_out, b));
    EXPECT_EQ(serial_crcs.at(std::to_string(b)), fmt::format("{:08x}", model_state_crc32(alone, 0)))
        << "model " << b;
  }

  for (const int threads : {1, 2})
    for (const int64_t B : {1, 2, 3, 5, 8}) {
      const std::vector<std::string> first(lrs.begin(), lrs.begin() + B);
      for (const std::string& plan : distinct_plans(B, threads)) {
        const std::string out = (dir.path / fmt::format("t{}_B{}_{}", threads, B, plan)).string();
        const std::string cmd =
            train_command(m, dir, first, threads, "--no-checkpoint --plan " + plan, out);
        SCOPED_TRACE("hfta " + cmd + "\nagainst hfta " + serial_cmd);
        const test::CommandResult r = run_hfta(cmd);
        ASSERT_EQ(r.exit_code, 0) << r.output();
        const auto crcs = state_crcs(out + "/summary.csv");
        const auto rows = rows_by_model(out + "/metrics.csv");
        ASSERT_EQ(static_cast<int64_t>(crcs.size()), B);
        for (int64_t b = 0; b < B; ++b) {
          const std::string id = std::to_string(b);
          EXPECT_EQ(crcs.at(id), serial_crcs.at(id)) << "model " << b << "'s final state";
          EXPECT_EQ(rows.at(id), serial_rows.at(id)) << "model " << b << "'s metrics.csv rows";
        }
      }
    }
}

std::vector<std::string> model_names() {
  std::vector<std::string> out;
  for (const ModelCase& m : model_cases()) out.push_back(m.name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Models, Deterministic, testing::ValuesIn(model_names()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace hfta
