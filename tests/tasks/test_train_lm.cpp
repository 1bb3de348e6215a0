// `hfta train` for language models: fused == serial per model (same windows, same weights),
// the files it writes, and clear errors for bad options; checkpoints (a run stopped after an
// epoch, by Ctrl-C or by SIGKILL after a periodic checkpoint resumes to the uninterrupted run's
// metrics and tensors; another corpus or a damaged checkpoint is refused naming the file);
// `hfta eval` and `hfta extract`; `hfta trial` and a short `hfta sweep` in tokens/s.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "core/device_memory.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/csv.h"
#include "run/plan_choice.h"
#include "tasks/classifier/resume.h"
#include "tasks/language_model/train_lm.h"
#include "tasks/tasks.h"
#include "test_files.h"

namespace hfta {
namespace {

namespace fs = std::filesystem;

// A small corpus: `lines` lines over a `words`-word vocabulary.
std::string write_corpus(const fs::path& dir, int lines = 60, int words = 30) {
  fs::create_directories(dir);
  const fs::path path = dir / "corpus.txt";
  std::ofstream out(path);
  for (int line = 0; line < lines; ++line) {
    for (int w = 0; w < 6 + line % 5; ++w) out << "w" << (line * 7 + w * 3) % words << " ";
    out << "\n";
  }
  return path.string();
}

TrainOptions small_options(const fs::path& dir) {
  TrainOptions o;
  o.model = "transformer";
  o.dataset = "text";
  o.text_files = write_corpus(dir);
  o.optimizer = "adadelta";
  o.hyper["lr"] = {0.5f, 1.0f};
  o.emsize = 8;
  o.nhid = 16;
  o.nlayers = 1;
  o.nhead = 2;
  o.bptt = 5;
  o.batch_size = 4;
  o.epochs = 2;
  o.lr_gamma = {0.5f};
  o.progress = false;
  o.checkpoint = false;
  return o;
}

TEST(TrainLm, FusedEqualsSerialAndWritesResults) {
  const fs::path dir = fs::temp_directory_path() / "hfta_test_train_lm";
  fs::remove_all(dir);
  TrainOptions o = small_options(dir);
  o.out = (dir / "fused").string();
  const TrainResult fused = run_train_lm(o);
  o.serial = true;
  o.out = (dir / "serial").string();
  const TrainResult serial = run_train_lm(o);
  ASSERT_EQ(fused.models.size(), 2u);
  for (size_t b = 0; b < 2; ++b) {
    EXPECT_TRUE(std::isfinite(fused.models[b].test_loss));
    EXPECT_NEAR(fused.models[b].final_train_loss, serial.models[b].final_train_loss,
                1e-4 * serial.models[b].final_train_loss);
    EXPECT_NEAR(fused.models[b].test_loss, serial.models[b].test_loss,
                1e-4 * serial.models[b].test_loss);
  }
  EXPECT_TRUE(fs::exists(dir / "fused" / "metrics.csv"));
  EXPECT_TRUE(fs::exists(dir / "fused" / "summary.csv"));
  fs::remove_all(dir);
}

TEST(TrainLm, BadOptionsNameTheProblem) {
  const fs::path dir = fs::temp_directory_path() / "hfta_test_train_lm_bad";
  fs::remove_all(dir);
  TrainOptions o = small_options(dir);
  o.out = (dir / "out").string();
  {
    TrainOptions bad = o;
    bad.bptt = 100000;  // longer than any split
    EXPECT_THROW(run_train_lm(bad), Error);
  }
  {
    TrainOptions bad = o;
    bad.text_files.clear();
    EXPECT_THROW(run_train_lm(bad), Error);
  }
  {
    TrainOptions bad = o;
    bad.clip = {0.25f, 0.5f, 1.0f};  // 3 values for 2 models
    EXPECT_THROW(run_train_lm(bad), Error);
  }
  {
    TrainOptions bad = o;
    bad.nhead = 3;  // does not divide emsize 8
    EXPECT_THROW(run_train_lm(bad), Error);
  }
  {
    TrainOptions bad = o;
    bad.text_files = (dir / "missing.txt").string();
    EXPECT_THROW(run_train_lm(bad), Error);
  }
  // --device: plan fused only, and (without a GPU) the device says why; both before any text is
  // read (the corpus here is missing).
  for (const auto& [plan, message] :
       {std::pair<std::string, std::string>{"chunk:1", "--device cuda runs plan fused"},
        {"auto", device_available(Device::kCuda) ? "missing.txt" : "--device cuda: CUDA: "}}) {
    TrainOptions bad = o;
    bad.device = "cuda";
    bad.plan = plan;
    bad.text_files = (dir / "missing.txt").string();
    try {
      run_train_lm(bad);
      ADD_FAILURE() << "expected an error mentioning " << message;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
  fs::remove_all(dir);
}

// --- checkpoints ------------------------------------------------------------------------------

using test::expect_hfta_error;
using test::read_file;
using test::run_hfta;
using test::TempDir;

// metrics.csv without the timing column.
std::vector<std::vector<std::string>> metric_rows(const std::string& dir) {
  CsvTable t = read_csv(dir + "/metrics.csv");
  const size_t timing = t.column("tokens_per_s");
  for (auto& row : t.rows) row.erase(row.begin() + static_cast<int64_t>(timing));
  return t.rows;
}

void expect_same_tensors(const std::string& a, const std::string& b) {
  const Checkpoint x = load_checkpoint(a), y = load_checkpoint(b);
  EXPECT_EQ(x.step, y.step);
  ASSERT_EQ(x.tensors.size(), y.tensors.size());
  for (size_t i = 0; i < x.tensors.size(); ++i) {
    EXPECT_EQ(x.tensors[i].name, y.tensors[i].name);
    EXPECT_EQ(x.tensors[i].values, y.tensors[i].values) << x.tensors[i].name;
  }
}

TEST(TrainLmCheckpoint, ResumingAfterAnEpochGivesTheUninterruptedRun) {
  TempDir tmp("lm_epoch");
  TrainOptions o = small_options(tmp.path);
  o.checkpoint = true;
  o.checkpoint_interval_seconds = 0;
  o.out = tmp.str() + "/full";
  const TrainResult full = run_train_lm(o);
  o.out = tmp.str() + "/split";
  o.epochs = 1;
  run_train_lm(o);
  o.epochs = 2;
  o.resume = true;
  const TrainResult split = run_train_lm(o);
  EXPECT_EQ(metric_rows(tmp.str() + "/split"), metric_rows(tmp.str() + "/full"));
  expect_same_tensors(tmp.str() + "/split/checkpoint.bin", tmp.str() + "/full/checkpoint.bin");
  for (size_t b = 0; b < 2; ++b) EXPECT_EQ(split.models[b].test_loss, full.models[b].test_loss);
  // Resuming a finished run reports it again.
  const TrainResult again = run_train_lm(o);
  EXPECT_EQ(again.models[1].test_loss, full.models[1].test_loss);
}

TEST(TrainLmCheckpoint, SerialRunsResumePerModel) {
  TempDir tmp("lm_serial");
  TrainOptions o = small_options(tmp.path);
  o.checkpoint = true;
  o.checkpoint_interval_seconds = 0;
  o.serial = true;
  o.out = tmp.str() + "/full";
  run_train_lm(o);
  o.out = tmp.str() + "/split";
  o.epochs = 1;
  run_train_lm(o);
  o.epochs = 2;
  o.resume = true;
  run_train_lm(o);
  // The split run wrote model 1's first epoch before model 0's second: the same rows, reordered.
  auto split = metric_rows(tmp.str() + "/split"), full = metric_rows(tmp.str() + "/full");
  std::sort(split.begin(), split.end());
  std::sort(full.begin(), full.end());
  EXPECT_EQ(split, full);
  expect_same_tensors(tmp.str() + "/split/checkpoint-model1.bin",
                      tmp.str() + "/full/checkpoint-model1.bin");
}

TEST(TrainLmCheckpoint, AnotherCorpusOrADamagedCheckpointIsRefusedNamingTheFile) {
  TempDir tmp("lm_refuse");
  TrainOptions o = small_options(tmp.path);
  o.checkpoint = true;
  o.checkpoint_interval_seconds = 0;
  o.epochs = 1;
  o.out = tmp.str() + "/run";
  run_train_lm(o);
  const std::string path = o.out + "/checkpoint.bin";
  o.epochs = 2;
  o.resume = true;
  auto expect_error = [&](const TrainOptions& options, const std::string& message) {
    try {
      run_train_lm(options);
      ADD_FAILURE() << "expected an error mentioning " << message;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(message), std::string::npos) << what;
      EXPECT_NE(what.find(path), std::string::npos) << what;
    }
  };
  {  // a corpus with more words
    TrainOptions other = o;
    other.text_files = write_corpus(tmp.path / "other", 60, 40);
    expect_error(other, "vocabulary of");
  }
  {  // another StepLR gamma
    TrainOptions other = o;
    other.lr_gamma = {0.25f};
    expect_error(other, "--lr-gamma");
  }
  {  // the embedding no longer covers the vocabulary its header gives
    Checkpoint c = load_checkpoint(path);
    for (CheckpointTensor& t : c.tensors)
      if (t.name.ends_with(".encoder.weight") && t.name.find('#') == std::string::npos) {
        t.shape[1] -= 1;
        t.values.resize(static_cast<size_t>(t.shape.numel()));
      }
    save_checkpoint(path, c);
    expect_error(o, "token ids out of range in checkpoint");
    EXPECT_THROW(evaluate_lm_checkpoint(c, path, {}), Error);
  }
}

TEST(TrainLmCheckpoint, EvalAndExtractGiveTheRunsTestLoss) {
  TempDir tmp("lm_eval");
  TrainOptions o = small_options(tmp.path);
  o.checkpoint = true;
  o.checkpoint_interval_seconds = 0;
  o.out = tmp.str() + "/run";
  const TrainResult r = run_train_lm(o);
  const std::string path = o.out + "/checkpoint.bin";
  const LmEvaluation all = evaluate_lm_checkpoint(load_checkpoint(path), path, {});
  ASSERT_EQ(all.loss.size(), 2u);
  for (size_t b = 0; b < 2; ++b) {
    EXPECT_NEAR(all.loss[b], r.models[b].test_loss, 1e-5 * r.models[b].test_loss);
    EXPECT_NEAR(all.perplexity[b], std::exp(all.loss[b]), 1e-9 * all.perplexity[b]);
  }
  const Checkpoint one = model_from_run(o.out, 1);
  EXPECT_EQ(one.B, 1);
  const LmEvaluation e = evaluate_lm_checkpoint(one, "model 1", {});
  EXPECT_NEAR(e.loss[0], r.models[1].test_loss, 1e-5 * r.models[1].test_loss);
  // Another corpus: refused, naming the one it was trained on.
  try {
    evaluate_lm_checkpoint(one, "model 1",
                           {.text_files = write_corpus(tmp.path / "other", 60, 40)});
    ADD_FAILURE() << "evaluated on another vocabulary";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("--text-files"), std::string::npos) << err.what();
  }
  const int64_t best =
      best_model_of_run(o.out, o.model, task_for_model(o.model).primary_metric(o.model));
  EXPECT_TRUE(best == 0 || best == 1);
}

// The command line: Ctrl-C mid-epoch, and SIGKILL after a periodic checkpoint, both resume to the
// uninterrupted run.
std::string cli_run(const std::string& corpus) {
  return "train --model transformer --dataset text --text-files " + corpus +
         " --optimizer adadelta --lr 0.5,1 --emsize 8 --nhid 16 --nlayers 1 --nhead 2 --bptt 5 "
         "--batch-size 4 --epochs 2 --seed 3 --no-progress --checkpoint-interval 0";
}

std::string succeed(const std::string& args) {
  test::CommandResult r = run_hfta(args);
  EXPECT_EQ(r.exit_code, 0) << args << " printed: " << r.output();
  return r.output();
}

// Starts `args`, waits until its log mentions `marker`, then sends `signal`; false when the run
// ended first.
bool stop_when(const std::string& args, const std::string& log, const std::string& marker,
               int signal) {
  const pid_t pid = test::spawn_hfta(args, log);
  EXPECT_GT(pid, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline &&
         read_file(log).find(marker) == std::string::npos) {
    if (waitpid(pid, &status, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kill(pid, signal);
  waitpid(pid, &status, 0);
  return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(TrainLmCheckpointCli, StoppedMidEpochAndResumedEqualsTheUninterruptedRun) {
  TempDir tmp("lm_cli");
  const std::string corpus = write_corpus(tmp.path / "text", 2000, 200);
  const std::string full = tmp.str() + "/full";
  succeed(cli_run(corpus) + " --out " + full);

  // Ctrl-C once the first epoch has begun: a checkpoint of the step it stopped after.
  const std::string cut = tmp.str() + "/cut";
  fs::create_directories(cut);
  if (!stop_when(cli_run(corpus) + " --out " + cut, cut + "/log.txt", "steps per epoch", SIGINT))
    GTEST_SKIP() << "the run finished before Ctrl-C reached it";
  EXPECT_NE(read_file(cut + "/log.txt").find("--resume to continue"), std::string::npos)
      << read_file(cut + "/log.txt");
  succeed(cli_run(corpus) + " --out " + cut + " --resume");
  EXPECT_EQ(metric_rows(cut), metric_rows(full));
  expect_same_tensors(cut + "/checkpoint.bin", full + "/checkpoint.bin");

  // SIGKILL once a periodic checkpoint is written: no checkpoint of its own, the periodic one
  // lies inside an epoch.
  const std::string killed = tmp.str() + "/killed";
  fs::create_directories(killed);
  const std::string periodic = cli_run(corpus) + " --checkpoint-every 7";
  if (!stop_when(periodic + " --out " + killed, killed + "/log.txt", " written to ", SIGKILL))
    GTEST_SKIP() << "the run finished before the kill reached it";
  const Checkpoint c = load_checkpoint(killed + "/checkpoint.bin");
  EXPECT_GE(c.step, 7);
  const std::string out = succeed(periodic + " --out " + killed + " --resume");
  EXPECT_NE(out.find(fmt::format("resuming after step {}", c.step)), std::string::npos) << out;
  EXPECT_EQ(metric_rows(killed), metric_rows(full));
  expect_same_tensors(killed + "/checkpoint.bin", full + "/checkpoint.bin");

  // eval and extract through the command line.
  const std::string eval = succeed("eval --checkpoint " + full + "/checkpoint.bin");
  EXPECT_NE(eval.find("test ppl"), std::string::npos) << eval;
  succeed("extract --run " + full + " --best --out " + tmp.str() + "/best.bin");
  const std::string one = succeed("eval --checkpoint " + tmp.str() + "/best.bin");
  EXPECT_NE(one.find("1 transformer model after"), std::string::npos) << one;
  expect_hfta_error("eval --checkpoint " + tmp.str() + "/best.bin --device cuda",
                    "hfta eval scores a language model's checkpoint on the CPU");
}

// --- trial and sweep in tokens/s ----------------------------------------------------------------

// A trial of B tiny Transformers (vocabulary 50, 2 streams) for `steps` timed steps.
TrialOptions tiny_trial_options(int64_t B, int64_t steps) {
  TrialOptions o;
  o.model = "transformer";
  o.dataset = "synthetic-text";
  o.vocab = 50;
  o.B = B;
  o.batch_size = 2;
  o.steps = steps;
  return o;
}

TEST(TrialLm, SyntheticTextMeasuresTokensPerSecond) {
  TrialOptions o = tiny_trial_options(2, 2);
  o.warmup_steps = 1;
  for (bool serial : {false, true}) {
    o.serial = serial;
    const TrialResult r = run_trial_lm(o);
    EXPECT_GT(r.samples_per_second, 0.0);
    EXPECT_TRUE(std::isfinite(r.samples_per_second));
    // Tokens: B models x steps x streams x bptt 32 in r.seconds.
    EXPECT_NEAR(r.samples_per_second * r.seconds, 2.0 * 2 * 2 * 32, 1e-6);
    EXPECT_GT(r.flops_per_step, 0.0);
    if (serial) {
      EXPECT_EQ(r.plan, "fused");  // one model: nothing to choose
    }
  }
  o.serial = false;
  o.plan = "chunk:1";
  EXPECT_EQ(run_trial_lm(o).plan, "chunk:1");
  o.plan = "bogus";
  EXPECT_THROW(run_trial_lm(o), Error);
}

// The FLOPs of a step are the models', whatever plan ran them: under a plan the main net holds
// only the models' state and no gradients, so counted there a step lost its input gradients
// (the sweep's fused rows read 2/3 of serial's GFLOP/s at the same tokens/s).
TEST(TrialLm, FlopsDoNotDependOnThePlan) {
  TrialOptions o = tiny_trial_options(2, 1);
  o.plan = "fused";
  const double fused = run_trial_lm(o).flops_per_step;
  for (const char* plan : {"chunk:1", "threads"}) {
    o.plan = plan;
    const TrialResult r = run_trial_lm(o);
    EXPECT_EQ(r.plan, plan);
    EXPECT_DOUBLE_EQ(r.flops_per_step, fused) << plan;
  }
}

// --plan auto times the plans for a language-model array (run/plan_choice.h): it picks
// one of the candidates, records the timings under the LM's configuration in the plan cache, and
// a second run reads the choice back.
TEST(TrialLm, PlanAutoTimesTheCandidatesAndCachesTheChoice) {
  TempDir tmp("lm_plan_auto");
  const std::string cache = (tmp.path / "plans.json").string();
  const char* before = std::getenv("HFTA_PLAN_CACHE");
  const std::string saved = before ? before : "";
  setenv("HFTA_PLAN_CACHE", cache.c_str(), 1);
  TrialOptions o = tiny_trial_options(3, 1);
  o.threads = 2;
  const std::string first = run_trial_lm(o).plan;
  std::vector<std::string> names;
  for (const ExecutionPlan& p : plan_candidates(3, 2)) names.push_back(p.str());
  EXPECT_NE(std::find(names.begin(), names.end(), first), names.end()) << first;
  const std::string text = test::read_file(cache);
  EXPECT_NE(text.find("transformer vocab 50"), std::string::npos) << text;
  EXPECT_NE(text.find("| B 3 | streams 2 | adadelta"), std::string::npos) << text;
  for (const std::string& name : names)
    EXPECT_NE(text.find("\"" + name + "\""), std::string::npos) << name << " untimed: " << text;
  EXPECT_EQ(run_trial_lm(o).plan, first);  // read back from the cache
  setenv("HFTA_PLAN_CACHE", saved.c_str(), 1);
}

// Execution plans train the same models: metrics within fp32 rounding of the fused plan's.
TEST(TrainLm, EveryPlanTrainsTheFusedPlansModels) {
  TempDir tmp("lm_plans");
  TrainOptions o = small_options(tmp.path);
  o.hyper["lr"] = {0.5f, 1.0f, 2.0f};
  o.threads = 2;
  auto rows = [&](const std::string& plan) {
    o.plan = plan;
    o.out = tmp.str() + "/" + plan.substr(0, plan.find(':'));
    run_train_lm(o);
    CsvTable t = read_csv(o.out + "/metrics.csv");
    EXPECT_EQ(t.rows.size(), 6u);
    return t;
  };
  const CsvTable fused = rows("fused");
  for (const std::string plan : {"chunk:2", "threads", "auto"}) {
    const CsvTable other = rows(plan);
    ASSERT_EQ(other.rows.size(), fused.rows.size()) << plan;
    for (const char* column : {"train_loss", "valid_loss"}) {
      const size_t c = fused.column(column);
      for (size_t r = 0; r < fused.rows.size(); ++r)
        EXPECT_NEAR(other.number(r, c), fused.number(r, c), 1e-4 * fused.number(r, c))
            << plan << " " << column << " row " << r;
    }
  }
}

TEST(SweepLm, ShortSweepWritesTokensPerSecondRows) {
  TempDir tmp("lm_sweep");
  const std::string out = succeed(
      "sweep --model transformer --dataset synthetic-text --vocab 50 --B 1,2 --repeats 1 "
      "--warmup 1 --steps 2 --batch-size 2 --threads 1 --no-plot --peak-gflops 10 --retries 0 "
      "--quiet-wait 0 --out " +
      tmp.str());
  EXPECT_NE(out.find("count tokens"), std::string::npos) << out;
  CsvTable t = read_csv(tmp.str() + "/transformer/throughput.csv");
  const size_t mode = t.column("mode"), status = t.column("status"),
               rate = t.column("samples_per_s");
  int ok = 0;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    EXPECT_EQ(t.rows[r][status], "ok") << t.rows[r][mode];
    if (t.rows[r][status] == "ok" && t.number(r, rate) > 0) ++ok;
  }
  EXPECT_GE(ok, 5);  // serial B=1,2, concurrent B=1,2, fused B=1,2 (B=1 rows may coincide)
}

}  // namespace
}  // namespace hfta
