// `hfta tune --optuna URL`: a real (tiny) ASHA search written into an SQLite Optuna study, read
// back by Debian's python3-optuna and compared with the run's history.csv, computed here
// independently of tune/optuna_study.py: one Optuna trial per hfta trial with the same
// parameters, its metric at each budget as intermediate values, COMPLETE with its last metric
// when it reached the search's largest budget, PRUNED otherwise.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "io/csv.h"
#include "test_files.h"
#include "tune/optuna_study.h"

namespace hfta {
namespace {

using test::run_hfta;
using test::TempDir;

// What the study says of one trial, as the Python side prints it.
struct StudyTrial {
  std::string state;
  double value = NAN;
  std::map<int64_t, double> intermediate;
  std::map<std::string, double> params;
};

// Runs python3 on `code`, returning its stdout (fails the test on an error).
std::string python(const std::string& code, const TempDir& tmp) {
  const std::string script = tmp.str() + "/read_study.py", out = tmp.str() + "/study.txt";
  {
    std::ofstream f(script);
    f << code;
  }
  const std::string cmd = fmt::format("{} {} > {} 2>&1", optuna_python(), script, out);
  const int status = std::system(cmd.c_str());
  const std::string text = test::read_file(out);
  EXPECT_EQ(status, 0) << cmd << "\n" << text;
  return text;
}

TEST(TuneOptuna, TheStudyHoldsEveryTrialOfHistoryCsv) {
  try {
    check_optuna_available();
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
  TempDir tmp("tune_optuna");
  const std::string db = tmp.str() + "/study.db";
  const test::CommandResult r = run_hfta(fmt::format(
      "tune --model mlp --dataset synthetic --synthetic-size 256 --synthetic-test-size 128 "
      "--space {}/tune/spaces/mlp.json --algorithm asha --num-samples 6 --max-iters 9 "
      "--iters-per-epoch 1 --out {}/search --optuna sqlite:///{} --optuna-study hfta-test",
      HFTA_SOURCE_DIR, tmp.str(), db));
  ASSERT_EQ(r.exit_code, 0) << r.output();
  EXPECT_NE(r.out.find("optuna study hfta-test"), std::string::npos) << r.out;

  // The study, one line per trial: hfta trial, state, value, budget:metric..., name=value...
  const std::string text = python(fmt::format(R"(
import optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.load_study(study_name="hfta-test", storage="sqlite:///{}")
print("direction", study.direction.name)
for t in study.trials:
    print(t.user_attrs["hfta_trial"], t.state.name, "nan" if t.value is None else repr(t.value),
          " ".join(f"{{k}}:{{v!r}}" for k, v in sorted(t.intermediate_values.items())), "|",
          " ".join(f"{{k}}={{v!r}}" for k, v in sorted(t.params.items())))
)",
                                              db),
                                  tmp);
  std::istringstream in(text);
  std::string direction_word, direction;
  in >> direction_word >> direction;
  EXPECT_EQ(direction, "MAXIMIZE") << text;  // mlp's metric: val_acc
  std::map<int64_t, StudyTrial> study;
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::istringstream words(line);
    int64_t trial = 0;
    std::string value, word;
    StudyTrial t;
    words >> trial >> t.state >> value;
    t.value = value == "nan" ? NAN : std::stod(value);
    bool params = false;
    while (words >> word) {
      if (word == "|") {
        params = true;
      } else if (params) {
        const size_t eq = word.find('=');
        t.params[word.substr(0, eq)] = std::stod(word.substr(eq + 1));
      } else {
        const size_t colon = word.find(':');
        t.intermediate[std::stoll(word.substr(0, colon))] = std::stod(word.substr(colon + 1));
      }
    }
    study[trial] = t;
  }

  // The same from history.csv.
  const CsvTable h = read_csv(tmp.str() + "/search/fused/history.csv");
  std::map<int64_t, std::map<int64_t, double>> metric_at;  // trial -> budget -> metric
  std::map<int64_t, std::map<std::string, double>> params;
  int64_t largest = 0;
  for (size_t row = 0; row < h.rows.size(); ++row) {
    ASSERT_EQ(h.rows[row][h.column("status")], "ok") << "a trial failed: see " << h.path;
    const int64_t trial = h.integer(row, h.column("trial")),
                  budget = h.integer(row, h.column("budget"));
    metric_at[trial][budget] = h.number(row, h.column("metric"));
    largest = std::max(largest, budget);
    for (const char* p : {"lr", "beta1", "beta2", "weight_decay", "batch_size"})
      params[trial][p] = h.number(row, h.column(p));
  }
  ASSERT_EQ(study.size(), metric_at.size()) << text;
  int64_t complete = 0, pruned = 0;
  for (const auto& [trial, at] : metric_at) {
    SCOPED_TRACE(fmt::format("trial {}", trial));
    ASSERT_TRUE(study.count(trial)) << text;
    const StudyTrial& t = study.at(trial);
    ASSERT_EQ(t.intermediate.size(), at.size());
    for (const auto& [budget, metric] : at) EXPECT_DOUBLE_EQ(t.intermediate.at(budget), metric);
    const bool reached = at.rbegin()->first == largest;
    EXPECT_EQ(t.state, reached ? "COMPLETE" : "PRUNED");
    if (reached) {
      EXPECT_DOUBLE_EQ(t.value, at.rbegin()->second);
    }
    (reached ? complete : pruned) += 1;
    for (const auto& [name, v] : params.at(trial))
      EXPECT_NEAR(t.params.at(name), v, 1e-6 * std::abs(v)) << name;
  }
  EXPECT_GT(complete, 0);
  EXPECT_GT(pruned, 0) << "ASHA stopped no trial: the test needs both states";
}

TEST(TuneOptuna, AMissingOptunaIsOneErrorLineBeforeTheSearch) {
  TempDir tmp("tune_optuna_missing");
  setenv("HFTA_PYTHON", "/nonexistent/python3", 1);
  test::expect_hfta_error(
      fmt::format("tune --model mlp --dataset synthetic --space {}/tune/spaces/mlp.json --out {} "
                  "--optuna sqlite:///{}/s.db",
                  HFTA_SOURCE_DIR, tmp.str(), tmp.str()),
      "apt-get install python3-optuna");
  unsetenv("HFTA_PYTHON");
  EXPECT_FALSE(std::filesystem::exists(tmp.path / "fused" / "history.csv"));
}

}  // namespace
}  // namespace hfta
