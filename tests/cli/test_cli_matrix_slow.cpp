// Every workflow of the `hfta` command against every model it trains, through the real binary
// (HFTA_CLI_PATH), with tiny sizes so that the whole matrix runs in a few minutes on 2 cores.
//
// The matrix: rows are the 13 model names
//   mlp, lenet, resnet18, mobilenetv2,           (image classifiers, --dataset synthetic)
//   mobilenetv3_small, mobilenetv3_large
//   pointnet_cls, pointnet_cls_ft,               (point-cloud classifiers and part segmenters,
//   pointnet_seg, pointnet_seg_ft                 --dataset shapes, few points per cloud)
//   transformer, bert                            (language models, --dataset text on a small
//                                                 corpus written into the test's directory)
//   dcgan                                        (a GAN, --dataset synthetic at 8x8)
// and columns are the workflows, one parameterized test each (CliMatrix/<Workflow>/<model>), each
// in a fresh TempDir:
//   1. TrainFusedEqualsSerial...: `hfta train --lr a,b --plan fused` and the same with --serial;
//      both exit 0 and each model's loss columns of metrics.csv (every column whose name holds
//      "loss") agree within 1e-4 relative, row by row (model, step / epoch).
//      Then, on the fused run's directory F:
//   3. `hfta eval --checkpoint F/checkpoint.bin` (no --dataset: the checkpoint names its data)
//      exits 0 and its stdout mentions model 0 and model 1.
//   4. `hfta extract --run F --best` exits 0 and writes the file, except for dcgan;
//      `hfta extract --run F --model 1` exits 0 for every model.
//   5. `hfta export --run F --model 1` writes safetensors (an 8-byte little-endian header length,
//      then a JSON header starting with '{') whose tensors (names, dtypes, shapes; the header's
//      "__metadata__" aside) are exactly the state_dict of the model's PyTorch module at the
//      matrix's sizes, as tests/cli/golden/state_dicts.txt lists it (written by
//      benchmarks/torch_state_dicts.py from benchmarks/torch_models.py; the language models'
//      vocabularies are those of write_corpus's 30 words: 31 tokens with <eos>, BERT 32 with its
//      mask). dcgan also with `--net d` (the golden file's "dcgan:d"). A model the golden file
//      lacks fails.
//   2. ResumeEqualsUninterrupted: `--epochs 2 --iters-per-epoch 2` in one go versus `--epochs 1`
//      then `--epochs 2 --resume` in another directory: the same metrics.csv row for row (numbers
//      within 1e-5 relative; timing columns such as tokens_per_s left out).
//   6. SweepWritesAFusedRow: `hfta sweep --modes fused --B 1 --repeats 1 --steps 1 --warmup 0`
//      with the model's data flags exits 0 and <out>/<model>/throughput.csv has a fused row (ok).
//   7. TuneRandomSearch: `hfta tune --algorithm random --num-samples 2 --max-iters 1` over a
//      two-parameter space, without --metric (the model's task knows its metric): exit 0,
//      except for dcgan.
//   8. Plans: `--lr a,b,c --plan threads` exits 0 for every model (BERT included: its arrays run
//      under the threads plans, tests/tasks/test_train_bert.cpp trains one with threads:1);
//      `--plan threads:1/2` exits 0 for the classifiers (the PointNets included) only.
//   9. UnreadFlagIsAnError: `hfta train` with a model-specific flag the model does not read.
//
// The error cases (each must exit non-zero with exactly one stderr line starting
// "hfta: error:"):
//   - `extract --best` of a dcgan run: a GAN has no metric that ranks its models (no test
//     accuracy, mIoU or validation perplexity; run/task.h's primary_metric is none), so there is
//     no "best" model; the line must mention "metric". `--model 1` still works.
//   - `tune --model dcgan`: tune ranks trials by a validation metric, and a GAN has none; the line
//     must say so (mention "metric").
//   - `--plan threads:1/2` for transformer, bert and dcgan: a /K plan runs each group of models
//     for K steps in a row on K minibatches, which only the classifier's loop can hand over; the
//     language-model and GAN loops hand over one batch at a time (README: "one step per visit:
//     no /K").
//   - A model-specific flag (run/task.h's kModelSpecificFlags) the model does not read is refused
//     naming it rather than silently ignored: e.g. --emsize on lenet, --image-size on the
//     transformer, --npoints on dcgan.
//
// Every expectation carries a SCOPED_TRACE with the model, the workflow and the command line.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_models.h"
#include "io/csv.h"
#include "state_dict_golden.h"
#include "test_files.h"

namespace hfta {
namespace {

namespace fs = std::filesystem;
using namespace cli_models;  // NOLINT(google-build-using-namespace): the model cases
using test::CommandResult;
using test::run_hfta;
using test::TempDir;

// The same for `hfta tune`, which has no --synthetic-test-size (a search validates on its own
// split) and no --image-size (it cannot search a GAN: the command fails before any data).
std::string tune_data_flags(const ModelCase& m, const TempDir& dir) {
  std::string flags = data_flags(m, dir);
  for (const std::string flag : {" --synthetic-test-size 16", "--image-size 8 "}) {
    const size_t at = flags.find(flag);
    if (at != std::string::npos) flags.erase(at, flag.size());
  }
  return flags;
}

// `hfta train` of the model with `lrs`, its tiny data, `epochs` epochs of 2 steps, into `out`.
std::string train_command(const ModelCase& m, const TempDir& dir, const std::string& lrs,
                          const std::string& out, int epochs = 1, int threads = 1) {
  return fmt::format(
      "train --model {} {} --lr {} --epochs {} --iters-per-epoch 2 --seed 3 --threads {} "
      "--no-progress --out {}",
      m.name, data_flags(m, dir), lrs, epochs, threads, out);
}

// The data flags of `hfta sweep` (it has no corpus sizes: synthetic text for the LMs).
std::string sweep_data_flags(const ModelCase& m) {
  switch (m.kind) {
    case Kind::kImage:
      return "--dataset synthetic --batch-size 4";
    case Kind::kPoints:
      return "--dataset shapes --npoints 32 --batch-size 4";
    case Kind::kLm:
    case Kind::kMaskedLm:
      return "--dataset synthetic-text --vocab 50 --batch-size 1";
    case Kind::kGan:
      return "--dataset synthetic --image-size 8 --batch-size 4";
  }
  return "";
}

// A two-parameter search space the model's optimizer reads.
std::string space_json(const ModelCase& m) {
  switch (m.kind) {
    case Kind::kLm:
    case Kind::kMaskedLm:  // Adadelta
      return R"({
  "lr": {"dist": "loguniform", "low": 0.3, "high": 3.0},
  "rho": {"dist": "uniform", "low": 0.85, "high": 0.95}
})";
    default:  // Adam
      return R"({
  "lr": {"dist": "loguniform", "low": 1e-5, "high": 1e-3},
  "beta1": {"dist": "uniform", "low": 0.8, "high": 0.95}
})";
  }
}

// Model-specific flags (run/task.h's kModelSpecificFlags) the model does not read.
std::vector<std::string> unread_flags(const ModelCase& m) {
  switch (m.kind) {
    case Kind::kImage:
      return {"--emsize 8", "--npoints 16"};
    case Kind::kPoints:
      return {"--emsize 8", "--image-size 8"};
    case Kind::kLm:
      return {"--image-size 8", "--npoints 16"};
    case Kind::kMaskedLm:
      return {"--image-size 8", "--lr-d 0.001"};
    case Kind::kGan:
      return {"--npoints 16", "--emsize 8"};
  }
  return {};
}

// ---- checks ---------------------------------------------------------------------------------

std::string trace(const ModelCase& m, const std::string& workflow, const std::string& args) {
  return fmt::format("model {}, workflow {}: hfta {}", m.name, workflow, args);
}

// A failure as every failure must be: a non-zero exit, one stderr line "hfta: error: ...",
// mentioning `mention` (if not empty).
void expect_one_error_line(const CommandResult& r, const std::string& mention) {
  EXPECT_GT(r.exit_code, 0) << "expected a failure (-1: killed by a signal); printed:\n"
                            << r.output();
  EXPECT_EQ(r.error_lines(), 1) << "stderr:\n" << r.err;
  EXPECT_EQ(r.err.rfind("hfta: error:", 0), 0u) << "stderr:\n" << r.err;
  if (!mention.empty()) {
    EXPECT_NE(r.err.find(mention), std::string::npos)
        << "the error should mention '" << mention << "'; stderr:\n"
        << r.err;
  }
}

std::optional<CsvTable> load_csv(const std::string& path) {
  try {
    return read_csv(path);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "cannot read " << path << ": " << e.what();
    return std::nullopt;
  }
}

std::optional<double> as_number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

// metrics.csv's loss columns by (model, step/epoch key): the key is the model column and the
// step and epoch columns the file has (classifiers: step; LMs: epoch; dcgan: epoch and step).
struct LossTable {
  std::vector<std::string> loss_columns;
  std::map<std::vector<std::string>, std::vector<double>> rows;
};

std::optional<LossTable> loss_table(const std::string& path) {
  std::optional<CsvTable> t = load_csv(path);
  if (!t) return std::nullopt;
  LossTable out;
  std::vector<size_t> key_cols, loss_cols;
  for (size_t c = 0; c < t->header.size(); ++c) {
    const std::string& name = t->header[c];
    if (name == "model" || name == "step" || name == "epoch") key_cols.push_back(c);
    if (name.find("loss") != std::string::npos) {
      loss_cols.push_back(c);
      out.loss_columns.push_back(name);
    }
  }
  EXPECT_FALSE(loss_cols.empty()) << path << " has no loss column";
  EXPECT_TRUE(std::find(t->header.begin(), t->header.end(), "model") != t->header.end())
      << path << " has no model column";
  for (const auto& row : t->rows) {
    std::vector<std::string> key;
    for (size_t c : key_cols) key.push_back(t->header[c] + "=" + row[c]);
    std::vector<double> losses;
    for (size_t c : loss_cols) {
      const auto v = as_number(row[c]);
      EXPECT_TRUE(v.has_value()) << path << ": " << t->header[c] << " '" << row[c] << "'";
      losses.push_back(v.value_or(NAN));
    }
    EXPECT_FALSE(out.rows.count(key)) << path << ": two rows for one key";
    out.rows[key] = losses;
  }
  return out;
}

std::string key_str(const std::vector<std::string>& key) {
  std::string s;
  for (const auto& k : key) s += (s.empty() ? "" : " ") + k;
  return s;
}

// Whether a column is a timing (differs between any two runs).
bool timing_column(const std::string& name) {
  return name.find("per_s") != std::string::npos || name.find("second") != std::string::npos ||
         name.find("time") != std::string::npos || name == "wall_s";
}

// Every file under `dir` (recursively) named `name`.
std::vector<fs::path> find_named(const fs::path& dir, const std::string& name) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec))
    if (it->path().filename() == name) out.push_back(it->path());
  return out;
}

// ---- the matrix -----------------------------------------------------------------------------

class CliMatrix : public ::testing::TestWithParam<std::string> {
 protected:
  const ModelCase& m() const { return model_case(GetParam()); }
};

// 1, 3, 4, 5: fused == serial per model; eval, extract and export of the fused run (its tensors
// those of PyTorch's module).
TEST_P(CliMatrix, TrainFusedEqualsSerialThenEvalExtractExport) {
  const ModelCase& model = m();
  TempDir dir("matrix_train_" + model.name);
  const std::string F = dir.str() + "/F", S = dir.str() + "/S";

  // 1. fused and serial.
  const std::string fused_cmd = train_command(model, dir, model.lr2, F) + " --plan fused";
  const std::string serial_cmd = train_command(model, dir, model.lr2, S) + " --serial";
  {
    SCOPED_TRACE(trace(model, "train fused", fused_cmd));
    const CommandResult r = run_hfta(fused_cmd);
    ASSERT_EQ(r.exit_code, 0) << r.output();
  }
  {
    SCOPED_TRACE(trace(model, "train serial", serial_cmd));
    const CommandResult r = run_hfta(serial_cmd);
    EXPECT_EQ(r.exit_code, 0) << r.output();
    if (r.exit_code == 0) {
      SCOPED_TRACE(trace(model, "train fused (compared)", fused_cmd));
      const auto f = loss_table(F + "/metrics.csv"), s = loss_table(S + "/metrics.csv");
      if (f && s) {
        EXPECT_EQ(f->loss_columns, s->loss_columns);
        EXPECT_EQ(f->rows.size(), s->rows.size());
        EXPECT_GE(f->rows.size(), 2u) << "both models should have rows";
        int model1_rows = 0;
        for (const auto& [key, losses] : f->rows) {
          model1_rows += std::find(key.begin(), key.end(), "model=1") != key.end();
          auto it = s->rows.find(key);
          if (it == s->rows.end()) {
            ADD_FAILURE() << "the serial run has no row " << key_str(key);
            continue;
          }
          for (size_t c = 0; c < losses.size() && c < it->second.size(); ++c) {
            const double a = losses[c], b = it->second[c];
            EXPECT_TRUE(std::isfinite(a)) << key_str(key) << " " << f->loss_columns[c];
            EXPECT_NEAR(a, b, 1e-4 * std::fabs(b) + 1e-6)
                << "fused vs serial, " << key_str(key) << " " << f->loss_columns[c];
          }
        }
        EXPECT_GT(model1_rows, 0) << "no rows of model 1 in " << F << "/metrics.csv";
      }
    }
  }

  // 3. eval of the fused run's checkpoint, its data taken from the checkpoint.
  {
    const std::string cmd = "eval --checkpoint " + F + "/checkpoint.bin";
    SCOPED_TRACE(trace(model, "eval", cmd));
    const CommandResult r = run_hfta(cmd);
    EXPECT_EQ(r.exit_code, 0) << r.output();
    for (int b = 0; b < 2; ++b)
      EXPECT_TRUE(std::regex_search(r.out, std::regex(fmt::format("model\\s+{}\\b", b))))
          << "stdout should mention model " << b << "; printed:\n"
          << r.output();
  }

  // 4. extract --best (none for a GAN) and --model 1.
  {
    const std::string best = dir.str() + "/best.bin";
    const std::string cmd = "extract --run " + F + " --best --out " + best;
    SCOPED_TRACE(trace(model, "extract --best", cmd));
    const CommandResult r = run_hfta(cmd);
    if (model.kind == Kind::kGan) {
      expect_one_error_line(r, "metric");
    } else {
      EXPECT_EQ(r.exit_code, 0) << r.output();
      EXPECT_TRUE(fs::exists(best)) << best << " was not written; printed:\n" << r.output();
    }
  }
  {
    const std::string one = dir.str() + "/one.bin";
    const std::string cmd = "extract --run " + F + " --model 1 --out " + one;
    SCOPED_TRACE(trace(model, "extract --model 1", cmd));
    const CommandResult r = run_hfta(cmd);
    EXPECT_EQ(r.exit_code, 0) << r.output();
    EXPECT_TRUE(fs::exists(one)) << one << " was not written";
  }

  // 5. export of model 1 (a GAN: the generator by default, and the discriminator).
  {
    const std::string st = dir.str() + "/m.safetensors";
    const std::string cmd = "export --run " + F + " --model 1 --out " + st;
    SCOPED_TRACE(trace(model, "export", cmd));
    const CommandResult r = run_hfta(cmd);
    EXPECT_EQ(r.exit_code, 0) << r.output();
    if (r.exit_code == 0) test::expect_torch_state_dict(st, model.name);
  }
  if (model.kind == Kind::kGan) {
    const std::string st = dir.str() + "/d.safetensors";
    const std::string cmd = "export --run " + F + " --model 1 --net d --out " + st;
    SCOPED_TRACE(trace(model, "export --net d", cmd));
    const CommandResult r = run_hfta(cmd);
    EXPECT_EQ(r.exit_code, 0) << r.output();
    if (r.exit_code == 0) test::expect_torch_state_dict(st, model.name + ":d");
  }
}

// 2. A run stopped after an epoch and resumed writes the uninterrupted run's metrics.
TEST_P(CliMatrix, ResumeEqualsUninterrupted) {
  const ModelCase& model = m();
  TempDir dir("matrix_resume_" + model.name);
  const std::string R1 = dir.str() + "/R1", R2 = dir.str() + "/R2";
  const std::string whole = train_command(model, dir, model.lr2, R1, 2) + " --plan fused";
  const std::string first = train_command(model, dir, model.lr2, R2, 1) + " --plan fused";
  const std::string resume = train_command(model, dir, model.lr2, R2, 2) + " --plan fused --resume";
  for (const std::string& cmd : {whole, first, resume}) {
    SCOPED_TRACE(trace(model, "resume", cmd));
    const CommandResult r = run_hfta(cmd);
    ASSERT_EQ(r.exit_code, 0) << r.output();
  }
  SCOPED_TRACE(trace(model, "resume (compared with the uninterrupted run)", whole));
  const auto a = load_csv(R1 + "/metrics.csv"), b = load_csv(R2 + "/metrics.csv");
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->header, b->header);
  ASSERT_EQ(a->rows.size(), b->rows.size()) << "rows of the uninterrupted and resumed runs";
  EXPECT_GE(a->rows.size(), 4u) << "2 models x 2 epochs at least";
  for (size_t r = 0; r < a->rows.size(); ++r)
    for (size_t c = 0; c < a->header.size(); ++c) {
      if (timing_column(a->header[c])) continue;
      const std::string &x = a->rows[r][c], &y = b->rows[r][c];
      const auto nx = as_number(x), ny = as_number(y);
      if (nx && ny && std::isfinite(*nx) && std::isfinite(*ny)) {
        EXPECT_NEAR(*nx, *ny, 1e-5 * std::max(std::fabs(*nx), std::fabs(*ny)))
            << "row " << r + 1 << " column " << a->header[c];
      } else {
        EXPECT_EQ(x, y) << "row " << r + 1 << " column " << a->header[c];
      }
    }
}

// 6. A one-step sweep of the fused mode.
TEST_P(CliMatrix, SweepWritesAFusedRow) {
  const ModelCase& model = m();
  TempDir dir("matrix_sweep_" + model.name);
  const std::string cmd = fmt::format(
      "sweep --model {} {} --modes fused --B 1 --repeats 1 --steps 1 --warmup 0 --threads 1 "
      "--no-plot --peak-gflops 10 --retries 0 --quiet-wait 0 --out {}",
      model.name, sweep_data_flags(model), dir.str());
  SCOPED_TRACE(trace(model, "sweep", cmd));
  const CommandResult r = run_hfta(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.output();
  const auto t = load_csv(dir.str() + "/" + model.name + "/throughput.csv");
  ASSERT_TRUE(t);
  const auto column = [&](const std::string& name) {
    const auto it = std::find(t->header.begin(), t->header.end(), name);
    EXPECT_NE(it, t->header.end()) << "throughput.csv has no column " << name;
    return static_cast<size_t>(it - t->header.begin());
  };
  const size_t mode = column("mode"), status = column("status");
  ASSERT_LT(std::max(mode, status), t->header.size());
  int fused = 0;
  for (const auto& row : t->rows)
    if (row[mode] == "fused") {
      ++fused;
      EXPECT_EQ(row[status], "ok") << fmt::format("{}", fmt::join(row, ","));
    }
  EXPECT_GE(fused, 1) << "no fused row in throughput.csv; printed:\n" << r.output();
}

// 7. A random search of two trials, one budget unit each, by the task's own metric.
TEST_P(CliMatrix, TuneRandomSearch) {
  const ModelCase& model = m();
  TempDir dir("matrix_tune_" + model.name);
  const std::string space = dir.str() + "/space.json";
  std::ofstream(space) << space_json(model);
  const std::string T = dir.str() + "/T";
  const std::string cmd = fmt::format(
      "tune --model {} {} --space {} --algorithm random --num-samples 2 --max-iters 1 "
      "--iters-per-epoch 2 --seed 3 --threads 1 --out {}",
      model.name, tune_data_flags(model, dir), space, T);
  SCOPED_TRACE(trace(model, "tune", cmd));
  const CommandResult r = run_hfta(cmd);
  if (model.kind == Kind::kGan) {
    expect_one_error_line(r, "metric");
    return;
  }
  ASSERT_EQ(r.exit_code, 0) << r.output();
  const auto histories = find_named(T, "history.csv");
  ASSERT_FALSE(histories.empty()) << "no history.csv under " << T;
  const auto h = load_csv(histories.front().string());
  ASSERT_TRUE(h);
  EXPECT_EQ(h->rows.size(), 2u) << "two trials of one budget unit";
}

// 8. Plans: threads for all; threads:1/2 for the classifiers only.
TEST_P(CliMatrix, Plans) {
  const ModelCase& model = m();
  TempDir dir("matrix_plans_" + model.name);
  {
    const std::string cmd =
        train_command(model, dir, model.lr3, dir.str() + "/threads", 1, 2) + " --plan threads";
    SCOPED_TRACE(trace(model, "plan threads", cmd));
    const CommandResult r = run_hfta(cmd);
    EXPECT_EQ(r.exit_code, 0) << r.output();
  }
  {
    const std::string cmd =
        train_command(model, dir, model.lr3, dir.str() + "/visits", 1, 2) + " --plan threads:1/2";
    SCOPED_TRACE(trace(model, "plan threads:1/2", cmd));
    const CommandResult r = run_hfta(cmd);
    if (is_classifier(model.kind)) {
      EXPECT_EQ(r.exit_code, 0) << r.output();
    } else {
      expect_one_error_line(r, "");
    }
  }
}

// 9. A model-specific flag the model does not read: one error line naming it.
TEST_P(CliMatrix, UnreadFlagIsAnError) {
  const ModelCase& model = m();
  TempDir dir("matrix_flags_" + model.name);
  for (const std::string& flag : unread_flags(model)) {
    const std::string cmd = train_command(model, dir, model.lr2, dir.str() + "/out") + " " + flag;
    SCOPED_TRACE(trace(model, "unread flag " + flag, cmd));
    const CommandResult r = run_hfta(cmd);
    expect_one_error_line(r, flag.substr(0, flag.find(' ')));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CliMatrix,
                         ::testing::Values("mlp", "lenet", "resnet18", "mobilenetv2",
                                           "mobilenetv3_small", "mobilenetv3_large", "pointnet_cls",
                                           "pointnet_cls_ft", "pointnet_seg", "pointnet_seg_ft",
                                           "transformer", "bert", "dcgan"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace hfta
