// `hfta train --model bert`: through the real command, a fused array of 4 equals the 4 models
// trained one after another (--serial) and model 0 alone (B = 1), per epoch (training loss,
// validation MLM loss and accuracy); the example's defaults (Adadelta) apply to flags left out;
// bad input (a window longer than a split, an empty corpus) names the problem; `hfta trial` and
// a short `hfta sweep` in tokens/s.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/csv.h"
#include "tasks/masked_lm/train_bert.h"
#include "tasks/tasks.h"
#include "test_files.h"

namespace hfta {
namespace {

namespace fs = std::filesystem;

// A small corpus: 80 lines over a 30-word vocabulary.
std::string write_corpus(const fs::path& dir) {
  fs::create_directories(dir);
  const fs::path path = dir / "corpus.txt";
  std::ofstream out(path);
  for (int line = 0; line < 80; ++line) {
    for (int w = 0; w < 6 + line % 5; ++w) out << "w" << (line * 7 + w * 3) % 30 << " ";
    out << "\n";
  }
  return path.string();
}

// metrics.csv rows: (model, epoch) -> {train_loss, valid_loss, valid_accuracy}.
using Metrics = std::map<std::pair<int, int>, std::vector<double>>;

Metrics read_metrics(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  Metrics out;
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "model,epoch,steps,lr,train_loss,valid_loss,valid_accuracy,tokens_per_s");
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) f.push_back(cell);
    if (f.size() != 8) {
      ADD_FAILURE() << "malformed row: " << line;
      continue;
    }
    out[{std::stoi(f[0]), std::stoi(f[1])}] = {std::stod(f[4]), std::stod(f[5]), std::stod(f[6])};
  }
  return out;
}

Metrics run_cli(const fs::path& dir, const std::string& corpus, const std::string& lrs,
                const std::string& extra) {
  const std::string cmd =
      std::string(HFTA_CLI_PATH) + " train --model bert --dataset text --text-files " + corpus +
      " --emsize 8 --nhid 16 --nlayers 2 --nhead 2 --bptt 5 --batch-size 4"
      " --epochs 2 --threads 1 --seed 3 --lr " +
      lrs + " --out " + dir.string() + " " + extra + " > " + (dir.string() + ".log") + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return read_metrics(dir / "metrics.csv");
}

void expect_same(const Metrics& a, const Metrics& b, int model_a, int model_b, const char* what) {
  for (int epoch = 1; epoch <= 2; ++epoch) {
    ASSERT_TRUE(a.count({model_a, epoch}) && b.count({model_b, epoch})) << what;
    const std::vector<double>& x = a.at({model_a, epoch});
    const std::vector<double>& y = b.at({model_b, epoch});
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_TRUE(std::isfinite(x[i]));
      EXPECT_NEAR(x[i], y[i], 1e-4 * std::max(1.0, std::fabs(y[i])))
          << what << ": model " << model_a << " epoch " << epoch << " column " << i;
    }
  }
}

TEST(TrainBert, FusedEqualsSerialThroughTheCli) {
  const fs::path dir = fs::temp_directory_path() / "hfta_test_train_bert";
  fs::remove_all(dir);
  const std::string corpus = write_corpus(dir);
  const Metrics fused = run_cli(dir / "fused", corpus, "0.5,1,2,4", "");
  const Metrics serial = run_cli(dir / "serial", corpus, "0.5,1,2,4", "--serial");
  const Metrics alone = run_cli(dir / "alone", corpus, "0.5", "");
  for (int b = 0; b < 4; ++b) expect_same(fused, serial, b, b, "fused B=4 vs serial");
  expect_same(alone, fused, 0, 0, "B=1 vs model 0 of B=4");
  // Different learning rates, different trajectories.
  EXPECT_NE(fused.at({0, 2})[0], fused.at({3, 2})[0]);
  // The example's optimizer by default: Adadelta's rho in the summary.
  std::ifstream summary(dir / "fused" / "summary.csv");
  std::string header;
  std::getline(summary, header);
  EXPECT_NE(header.find("rho"), std::string::npos) << header;
  // Trained weights and the vocabulary beside them.
  for (int b = 0; b < 4; ++b)
    EXPECT_TRUE(fs::exists(dir / "fused" / fmt::format("model{}.safetensors", b)));
  std::ifstream vocab(dir / "fused" / "vocab.txt");
  std::string word, last;
  int64_t words = 0;
  while (std::getline(vocab, word)) last = word, ++words;
  EXPECT_EQ(last, "[MASK]");
  EXPECT_EQ(words, 31 + 1);
  fs::remove_all(dir);
}

TEST(TrainBert, BadInputNamesTheProblem) {
  const fs::path dir = fs::temp_directory_path() / "hfta_test_train_bert_bad";
  fs::remove_all(dir);
  TrainOptions o;
  o.model = "bert";
  o.dataset = "text";
  o.text_files = write_corpus(dir);
  apply_bert_defaults(o, [](const char*) { return false; });
  o.hyper["lr"] = {1.0f};
  o.emsize = 8;
  o.nhid = 16;
  o.nlayers = 1;
  o.nhead = 2;
  o.batch_size = 4;
  o.bptt = 5;
  o.out = (dir / "out").string();
  auto message = [](const TrainOptions& bad) -> std::string {
    try {
      run_train_bert(bad);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  {
    TrainOptions bad = o;
    bad.bptt = 300;  // longer than the validation split
    EXPECT_NE(message(bad).find("--bptt"), std::string::npos) << message(bad);
  }
  {
    TrainOptions bad = o;
    bad.bptt = 513;  // beyond the position table
    EXPECT_NE(message(bad).find("512"), std::string::npos) << message(bad);
  }
  {
    TrainOptions bad = o;
    const fs::path empty = dir / "empty.txt";
    std::ofstream(empty).close();
    bad.text_files = empty.string();
    EXPECT_NE(message(bad).find("empty.txt"), std::string::npos) << message(bad);
  }
  {
    TrainOptions bad = o;
    bad.nhead = 3;
    EXPECT_NE(message(bad).find("--nhead"), std::string::npos) << message(bad);
  }
  {
    TrainOptions bad = o;
    bad.dataset = "cifar10";
    EXPECT_NE(message(bad).find("--dataset"), std::string::npos) << message(bad);
  }
  fs::remove_all(dir);
}

// --- trial and sweep in tokens/s ----------------------------------------------------------------

TEST(TrialBert, SyntheticAndRealTextMeasureTokensPerSecond) {
  TrialOptions o;
  o.model = "bert";
  o.dataset = "synthetic-text";
  o.vocab = 50;
  o.B = 2;
  o.batch_size = 2;
  o.warmup_steps = 1;
  o.steps = 2;
  o.threads = 1;
  const TrialResult fused = run_trial(o);
  EXPECT_GT(fused.samples_per_second, 0.0);
  // Tokens: B x steps x streams x 32 over the timed seconds.
  EXPECT_NEAR(fused.samples_per_second * fused.seconds, 2.0 * 2 * 2 * 32, 1e-6);
  EXPECT_GT(fused.params_per_model, 8 * 512 * 512);  // the example's sizes
  o.serial = true;
  EXPECT_GT(run_trial(o).samples_per_second, 0.0);
  const fs::path dir = fs::temp_directory_path() / "hfta_test_trial_bert";
  fs::remove_all(dir);
  TrialOptions text = o;
  text.serial = false;
  text.B = 1;
  text.dataset = "text";
  text.text_files = write_corpus(dir);
  // 80 short lines give 2 streams of more than one 32-token window.
  EXPECT_GT(run_trial(text).samples_per_second, 0.0);
  fs::remove_all(dir);
  // Plans run as the Transformer's; the FLOPs of a step do not depend on the plan (under a plan
  // the main net holds only state: counted there a step would lose its input gradients).
  o.serial = false;
  o.plan = "chunk:1";
  const TrialResult chunks = run_trial(o);
  EXPECT_EQ(chunks.plan, "chunk:1");
  EXPECT_DOUBLE_EQ(chunks.flops_per_step, fused.flops_per_step);
  o.plan = "bogus";
  EXPECT_THROW(run_trial(o), Error);
}

// `hfta train --model bert --plan ...`: every plan trains the fused plan's models (metrics
// within fp32 rounding), and the run says which plan ran.
TEST(TrainBert, EveryPlanTrainsTheFusedPlansModels) {
  const fs::path dir = fs::temp_directory_path() / "hfta_test_train_bert_plans";
  fs::remove_all(dir);
  const std::string corpus = write_corpus(dir);
  const Metrics fused = run_cli(dir / "fused", corpus, "0.5,1,2", "");
  for (const char* plan : {"chunk:1", "threads:1"}) {
    const std::string name = std::string(plan).substr(0, std::string(plan).find(':'));
    const Metrics other = run_cli(dir / name, corpus, "0.5,1,2", std::string("--plan ") + plan);
    for (int b = 0; b < 3; ++b) expect_same(other, fused, b, b, plan);
    std::ifstream log(dir.string() + "/" + name + ".log");
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find(std::string("plan ") + plan), std::string::npos) << text;
  }
  fs::remove_all(dir);
}

TEST(SweepBert, ShortSweepWritesTokensPerSecondRows) {
  test::TempDir tmp("bert_sweep");
  test::CommandResult r = test::run_hfta(
      "sweep --model bert --dataset synthetic-text --vocab 50 --B 1,2 --repeats 1 --warmup 1 "
      "--steps 1 --batch-size 1 --threads 1 --no-plot --peak-gflops 10 --retries 0 "
      "--quiet-wait 0 --out " +
      tmp.str());
  ASSERT_EQ(r.exit_code, 0) << r.output();
  EXPECT_NE(r.output().find("count tokens"), std::string::npos) << r.output();
  CsvTable t = read_csv(tmp.str() + "/bert/throughput.csv");
  const size_t mode = t.column("mode"), status = t.column("status"),
               rate = t.column("samples_per_s");
  int ok = 0;
  for (size_t row = 0; row < t.rows.size(); ++row) {
    EXPECT_EQ(t.rows[row][status], "ok") << t.rows[row][mode];
    if (t.rows[row][status] == "ok" && t.number(row, rate) > 0) ++ok;
  }
  EXPECT_GE(ok, 5);  // serial B=1,2, concurrent B=1,2, fused B=1,2 (B=1 rows may coincide)
}

}  // namespace
}  // namespace hfta
