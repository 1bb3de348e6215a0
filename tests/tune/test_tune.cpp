// `hfta tune` end to end on mlp with synthetic data and tiny budgets (max-iters 9, eta 3, two
// steps per budget unit): the algorithms finish, serial and fused modes give the same history,
// an interrupted search resumed gives the same history (between arrays and inside one), a trial
// retrains alone with `hfta train`, and bad spaces or resumes fail with clear errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "core/device_memory.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/csv.h"
#include "models/language_model.h"
#include "models/masked_lm.h"
#include "models/model.h"
#include "run/train.h"
#include "tasks/tasks.h"
#include "test_files.h"
#include "tune/tune.h"

namespace hfta {
namespace {

using test::expect_hfta_error;
using test::TempDir;

constexpr const char* kSpace = R"({
  "lr": {"dist": "loguniform", "low": 1e-3, "high": 3e-2},
  "beta1": {"dist": "uniform", "low": 0.8, "high": 0.95},
  "batch_size": {"dist": "choice", "values": [16, 32], "fusible": false}
})";

std::string write_space(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = (dir.path / name).string();
  std::ofstream(path) << text;
  return path;
}

TuneOptions options(const TempDir& dir, const std::string& algorithm, const std::string& mode) {
  TuneOptions o;
  o.model = "mlp";
  o.dataset = "synthetic";
  o.synthetic_train_size = 128;
  o.synthetic_test_size = 128;
  o.space = write_space(dir, "space.json", kSpace);
  o.schedule = {.algorithm = algorithm,
                .num_samples = 6,
                .max_iters = 9,
                .eta = 3,
                .skip_last = 0,
                .min_iters = 1,
                .workers = 3};
  o.mode = mode;
  o.iters_per_epoch = 2;
  o.out = (dir.path / "out").string();
  o.seed = 5;
  o.quiet = true;
  o.threads = 1;  // tiny arrays: a second thread only waits (and the test machine is shared)
  return o;
}

struct Row {
  double acc, loss;
  std::string status;
};
// (trial, budget) -> the row, for rows of status ok.
std::map<std::pair<int64_t, int64_t>, Row> history(const std::string& dir) {
  CsvTable t = read_csv(dir + "/history.csv");
  std::map<std::pair<int64_t, int64_t>, Row> out;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    if (t.rows[r][t.column("status")] != "ok") continue;
    out[{t.integer(r, t.column("trial")), t.integer(r, t.column("budget"))}] = {
        t.number(r, t.column("val_acc")), t.number(r, t.column("val_loss")), "ok"};
  }
  return out;
}

void expect_same_history(const std::string& a, const std::string& b) {
  auto ha = history(a), hb = history(b);
  ASSERT_EQ(ha.size(), hb.size());
  for (const auto& [key, row] : ha) {
    ASSERT_TRUE(hb.contains(key)) << "trial " << key.first << " budget " << key.second;
    // The fused == serial tolerance: the same predictions, losses to float rounding.
    EXPECT_NEAR(row.acc, hb[key].acc, 2e-3) << "trial " << key.first << " budget " << key.second;
    EXPECT_NEAR(row.loss, hb[key].loss, 1e-4 * std::max(1.0, std::abs(row.loss)))
        << "trial " << key.first << " budget " << key.second;
  }
}

TEST(Tune, HyperbandGivesTheSameHistoryInEveryMode) {
  TempDir dir("tune_hyperband");
  TuneRunResult fused = run_tune(options(dir, "hyperband", "fused"));
  TuneRunResult serial = run_tune(options(dir, "hyperband", "serial"));
  // Brackets of R = 9, eta = 3: 9@1, 3@3, 1@9 | 5@3, 1@9 | 3@9.
  EXPECT_EQ(fused.records.size(), 22u);
  EXPECT_EQ(history(fused.dir).size(), 22u);
  EXPECT_GT(serial.arrays_trained, fused.arrays_trained);
  expect_same_history(fused.dir, serial.dir);
  TuneRunResult concurrent = run_tune(options(dir, "hyperband", "concurrent"));
  expect_same_history(fused.dir, concurrent.dir);
  EXPECT_EQ(fused.best_trial, serial.best_trial);
  for (const char* f : {"trajectory.csv", "best.bin", "best.safetensors", "tune.json"})
    EXPECT_TRUE(std::filesystem::exists(fused.dir + "/" + f)) << f;
  EXPECT_TRUE(std::filesystem::exists(fused.dir + "/trials/0/command.txt"));
  // Without --resume an existing search is kept, not overwritten.
  EXPECT_THROW(run_tune(options(dir, "hyperband", "fused")), Error);
}

TEST(Tune, RandomSearchAndAshaFinish) {
  TempDir dir("tune_random_asha");
  TuneOptions r = options(dir, "random", "fused");
  r.schedule.num_samples = 4;
  r.schedule.max_iters = 2;
  TuneRunResult random = run_tune(r);
  EXPECT_EQ(random.records.size(), 4u);
  EXPECT_GE(random.best_trial, 0);
  TuneOptions a = options(dir, "asha", "fused");
  a.out += "_asha";
  a.schedule.num_samples = 9;  // rung 0: 9 results -> 3 to rung 1 -> 1 to the top
  TuneRunResult asha = run_tune(a);
  int64_t started = 0, at_top = 0;
  for (const TuneRecord& rec : asha.records) {
    started += rec.job.from == 0;
    at_top += rec.job.to == 9;
  }
  EXPECT_EQ(started, 9);
  EXPECT_GE(at_top, 1);
}

// The Hyperband search run whole, in an --out of its own: what an interrupted one, resumed, must
// reproduce.
TuneRunResult whole_search(const TempDir& dir) {
  TuneOptions whole = options(dir, "hyperband", "fused");
  whole.out += "_whole";
  return run_tune(whole);
}

TEST(Tune, ResumeAfterAnInterruptGivesTheSameHistory) {
  TempDir dir("tune_resume");
  TuneRunResult reference = whole_search(dir);
  TuneOptions o = options(dir, "hyperband", "fused");
  o.interrupt_after_arrays = 5;
  EXPECT_THROW(run_tune(o), Error);
  o.interrupt_after_arrays = 0;
  o.resume = true;
  TuneRunResult resumed = run_tune(o);
  EXPECT_LT(resumed.arrays_trained, reference.arrays_trained);
  expect_same_history(reference.dir, resumed.dir);
  EXPECT_EQ(resumed.best_trial, reference.best_trial);
  // A resume with another space names both files.
  TuneOptions other = o;
  other.space =
      write_space(dir, "other.json", R"({"lr": {"dist": "uniform", "low": 0.001, "high": 0.002}})");
  try {
    run_tune(other);
    ADD_FAILURE() << "resumed with another space";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("space.json"), std::string::npos) << what;
    EXPECT_NE(what.find("other.json"), std::string::npos) << what;
  }
}

// An interrupt inside a multi-unit array: its trials resume from the last whole unit saved (their
// checkpoints hold it), not from the rung's start, and the history is the same.
TEST(Tune, ResumeInsideAnArrayContinuesFromItsLastUnit) {
  TempDir dir("tune_resume_unit");
  TuneRunResult reference = whole_search(dir);
  TuneOptions o = options(dir, "hyperband", "fused");
  o.interrupt_after_units = 3;
  EXPECT_THROW(run_tune(o), Error);
  // The stopped rows name an array that was past its first unit: its trials' checkpoints are
  // strictly between the rung's budgets.
  const std::string dir_fused = o.out + "/fused";
  CsvTable t = read_csv(dir_fused + "/history.csv");
  int64_t stopped = 0;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    if (t.rows[r][t.column("status")] != "stopped") continue;
    ++stopped;
    const int64_t trial = t.integer(r, t.column("trial"));
    const int64_t from = t.integer(r, t.column("from_budget")),
                  to = t.integer(r, t.column("budget"));
    const int64_t at =
        load_checkpoint(fmt::format("{}/trials/{}/checkpoint.bin", dir_fused, trial)).epoch;
    EXPECT_GT(at, from) << "trial " << trial;
    EXPECT_LT(at, to) << "trial " << trial;
  }
  EXPECT_GT(stopped, 0);
  o.interrupt_after_units = 0;
  o.resume = true;
  TuneRunResult resumed = run_tune(o);
  expect_same_history(reference.dir, resumed.dir);
  EXPECT_EQ(resumed.best_trial, reference.best_trial);
}

TEST(Tune, ATrialRetrainsAloneWithHftaTrain) {
  TempDir dir("tune_alone");
  TuneOptions o = options(dir, "hyperband", "fused");
  o.schedule.max_iters = 3;  // 3@1 -> 1@3 | 2@3
  TuneRunResult r = run_tune(o);
  ASSERT_GE(r.best_trial, 0);
  const TuneSpace space = TuneSpace::load(o.space, o.optimizer);
  TrainOptions t = trial_train_options(o, space.sample(o.seed, r.best_trial), r.best_trial,
                                       r.best_budget, (dir.path / "alone").string());
  TrainResult alone = run_train(t);
  auto h = history(r.dir);
  const Row& row = h.at({r.best_trial, r.best_budget});
  EXPECT_NEAR(alone.models[0].test_accuracy, row.acc, 2e-3);
  EXPECT_NEAR(alone.models[0].test_loss, row.loss, 1e-4 * std::max(1.0, row.loss));
  // The command the search printed for the trial does the same (trials/<id>/command.txt holds
  // the trial's last budget, here the best one).
  std::string command =
      test::read_file(fmt::format("{}/trials/{}/command.txt", r.dir, r.best_trial));
  ASSERT_EQ(command.rfind("hfta train ", 0), 0u) << command;
  command = command.substr(5);
  command.erase(command.find_last_not_of('\n') + 1);
  test::CommandResult run = test::run_hfta(command + " --threads 1");
  ASSERT_EQ(run.exit_code, 0) << run.output();
  CsvTable summary =
      read_csv(fmt::format("{}/trials/{}/reproduce/summary.csv", r.dir, r.best_trial));
  EXPECT_NEAR(summary.number(0, summary.column("test_accuracy")), row.acc, 2e-3);
}

// `hfta train`'s model-specific flags given to `hfta tune` reach every trial, and the command
// that retrains a trial alone repeats them: its test accuracy on the same (small) test split is
// the search's.
TEST(Tune, TheModelFlagsReachEveryTrialAndItsRetrainCommand) {
  TempDir dir("tune_model_flags");
  const std::string space = write_space(dir, "lr.json", R"({
  "lr": {"dist": "loguniform", "low": 1e-3, "high": 1e-2}
})");
  const std::string out = (dir.path / "out").string();
  test::CommandResult r = test::run_hfta(
      "tune --model lenet --dataset synthetic --synthetic-size 96 --synthetic-test-size 40 "
      "--dropout 0.3 --no-decay-norm-bias --space " +
      space +
      " --algorithm random --num-samples 2 --max-iters 1 --iters-per-epoch 2 --batch-size 16 "
      "--threads 1 --out " +
      out);
  ASSERT_EQ(r.exit_code, 0) << r.output();
  const std::string dir1 = out + "/fused";
  std::string command = test::read_file(dir1 + "/trials/1/command.txt");
  for (const char* flag :
       {"--synthetic-size 96", "--synthetic-test-size 40", "--dropout 0.3", "--no-decay-norm-bias"})
    EXPECT_NE(command.find(flag), std::string::npos) << flag << " missing from " << command;
  command = command.substr(5);
  command.erase(command.find_last_not_of('\n') + 1);
  test::CommandResult run = test::run_hfta(command + " --threads 1");
  ASSERT_EQ(run.exit_code, 0) << run.output();
  const CsvTable summary = read_csv(dir1 + "/trials/1/reproduce/summary.csv");
  const CsvTable h = read_csv(dir1 + "/history.csv");
  ASSERT_EQ(h.rows.size(), 2u);
  const size_t row = h.rows[0][h.column("trial")] == "1" ? 0 : 1;
  EXPECT_NEAR(summary.number(0, summary.column("test_accuracy")),
              h.number(row, h.column("val_acc")), 1e-6);
  // A flag the model does not read is refused by name.
  expect_hfta_error("tune --model lenet --dataset synthetic --emsize 8 --space " + space +
                        " --out " + (dir.path / "o3").string(),
                    "--emsize");
}

TEST(Tune, BadSpacesFailWithOneLine) {
  TempDir dir("tune_bad");
  const std::string bad =
      write_space(dir, "bad.json", R"({"lr": {"dist": "gauss", "low": 0, "high": 1}})");
  expect_hfta_error(
      "tune --model mlp --dataset synthetic --space " + bad + " --out " + (dir.path / "o").string(),
      "unknown dist");
  const std::string conflict =
      write_space(dir, "conflict.json", R"({"batch_size": {"dist": "choice", "values": [9999]}})");
  expect_hfta_error("tune --model mlp --dataset synthetic --synthetic-size 64 --space " + conflict +
                        " --out " + (dir.path / "o2").string(),
                    "exceeds the 64 training samples");
  expect_hfta_error(
      "tune --model mlp --dataset synthetic --space " + (dir.path / "none.json").string(),
      "cannot read the search space");
}

// --device: a name the command line knows, a plan a device array runs, a model whose task reads
// the flag, and (here, without a GPU) a device that is there, each checked before data is read.
TEST(Tune, DeviceFlagIsChecked) {
  TempDir dir("tune_device");
  const std::string space =
      write_space(dir, "s.json", R"({"lr": {"dist": "loguniform", "low": 1e-4, "high": 1e-2}})");
  const std::string base =
      "tune --dataset synthetic --space " + space + " --out " + (dir.path / "o").string();
  expect_hfta_error(base + " --model mlp --device gpu",
                    "--device: unknown device 'gpu': choose cpu or cuda");
  expect_hfta_error(base + " --model mlp --device cuda --plan chunk:2",
                    "--device cuda runs each array under plan fused");
  expect_hfta_error(base + " --model bert --device cuda --plan chunk:2",
                    "--device cuda runs each array under plan fused");
  if (!device_available(Device::kCuda))
    expect_hfta_error(base + " --model mlp --device cuda", "--device cuda: CUDA: ");
}

// tune/spaces/<model>.json: each shipped space loads and samples (with the optimizer it names
// or Adam), and every model `hfta tune` accepts (classifiers, transformer, bert) has one.
TEST(Tune, EveryTunableModelShipsASpaceThatLoads) {
  const std::filesystem::path dir = std::filesystem::path(HFTA_SOURCE_DIR) / "tune/spaces";
  std::set<std::string> shipped;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    SCOPED_TRACE(e.path().string());
    const TuneSpace space = TuneSpace::load(e.path().string(), "adam");
    EXPECT_FALSE(space.params().empty());
    const TuneConfig config = space.sample(1, 0);
    EXPECT_FALSE(config_hyper(config, array_key(config, {.optimizer = "adam"}).optimizer).empty());
    shipped.insert(e.path().stem().string());
  }
  std::vector<std::string> tunable = model_names();
  for (const auto& names : {language_model_names(), masked_lm_names()})
    tunable.insert(tunable.end(), names.begin(), names.end());
  for (const std::string& model : tunable)
    EXPECT_TRUE(shipped.contains(model)) << "no tune/spaces/" << model << ".json";
}

}  // namespace
}  // namespace hfta
