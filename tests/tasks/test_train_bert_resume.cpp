// BERT checkpoints (tasks/masked_lm/train_bert.h): a run stopped after an epoch, by Ctrl-C
// mid-epoch, or by SIGKILL after a periodic checkpoint resumes to the uninterrupted run's metrics
// and tensors (fused and serial); another vocabulary or a checkpoint whose token table does not
// match its header is refused naming the file.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/csv.h"
#include "tasks/masked_lm/train_bert.h"
#include "test_files.h"

namespace hfta {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::run_hfta;
using test::TempDir;

// A small corpus: `lines` lines over a `words`-word vocabulary.
std::string write_corpus(const fs::path& dir, int lines = 80, int words = 30) {
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
  o.model = "bert";
  o.dataset = "text";
  o.text_files = write_corpus(dir);
  apply_bert_defaults(o, [](const char*) { return false; });
  o.hyper["lr"] = {0.5f, 1.0f};
  o.emsize = 8;
  o.nhid = 16;
  o.nlayers = 1;
  o.nhead = 2;
  o.bptt = 5;
  o.batch_size = 4;
  o.epochs = 2;
  o.lr_step_size = {1};
  o.lr_gamma = {0.5f};
  o.threads = 1;
  o.progress = false;
  o.checkpoint = true;
  o.checkpoint_interval_seconds = 0;
  return o;
}

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

TEST(TrainBertCheckpoint, ResumingAfterAnEpochGivesTheUninterruptedRun) {
  TempDir tmp("bert_epoch");
  TrainOptions o = small_options(tmp.path);
  o.out = tmp.str() + "/full";
  const TrainResult full = run_train_bert(o);
  o.out = tmp.str() + "/split";
  o.epochs = 1;
  run_train_bert(o);
  o.epochs = 2;
  o.resume = true;
  const TrainResult split = run_train_bert(o);
  EXPECT_EQ(metric_rows(tmp.str() + "/split"), metric_rows(tmp.str() + "/full"));
  expect_same_tensors(tmp.str() + "/split/checkpoint.bin", tmp.str() + "/full/checkpoint.bin");
  for (size_t b = 0; b < 2; ++b) {
    EXPECT_EQ(split.models[b].test_loss, full.models[b].test_loss);
    EXPECT_EQ(split.models[b].final_train_loss, full.models[b].final_train_loss);
  }
  // Resuming a finished run reports it again.
  const TrainResult again = run_train_bert(o);
  EXPECT_EQ(again.models[1].test_loss, full.models[1].test_loss);
}

TEST(TrainBertCheckpoint, SerialRunsResumePerModel) {
  TempDir tmp("bert_serial");
  TrainOptions o = small_options(tmp.path);
  o.serial = true;
  o.out = tmp.str() + "/full";
  run_train_bert(o);
  o.out = tmp.str() + "/split";
  o.epochs = 1;
  run_train_bert(o);
  o.epochs = 2;
  o.resume = true;
  run_train_bert(o);
  auto split = metric_rows(tmp.str() + "/split"), full = metric_rows(tmp.str() + "/full");
  std::sort(split.begin(), split.end());
  std::sort(full.begin(), full.end());
  EXPECT_EQ(split, full);
  expect_same_tensors(tmp.str() + "/split/checkpoint-model1.bin",
                      tmp.str() + "/full/checkpoint-model1.bin");
}

TEST(TrainBertCheckpoint, AnotherVocabularyOrADamagedCheckpointIsRefusedNamingTheFile) {
  TempDir tmp("bert_refuse");
  TrainOptions o = small_options(tmp.path);
  o.epochs = 1;
  o.out = tmp.str() + "/run";
  run_train_bert(o);
  const std::string path = o.out + "/checkpoint.bin";
  o.epochs = 2;
  o.resume = true;
  auto expect_error = [&](const TrainOptions& options, const std::string& message) {
    try {
      run_train_bert(options);
      ADD_FAILURE() << "expected an error mentioning " << message;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(message), std::string::npos) << what;
      EXPECT_NE(what.find(path), std::string::npos) << what;
    }
  };
  {  // a corpus with more words
    TrainOptions other = o;
    other.text_files = write_corpus(tmp.path / "other", 80, 40);
    expect_error(other, "vocabulary of");
  }
  {  // other sizes
    TrainOptions other = o;
    other.nhid = 12;
    expect_error(other, "--nhid");
  }
  {  // a Transformer LM's checkpoint is not BERT's
    TrainOptions other = o;
    other.model = "transformer";
    EXPECT_THROW(run_train_bert(other), Error);
  }
  {  // the token table no longer covers the vocabulary its header gives
    Checkpoint c = load_checkpoint(path);
    for (CheckpointTensor& t : c.tensors)
      if (t.name.ends_with(".embedding.token.weight") && t.name.find('#') == std::string::npos) {
        t.shape[1] -= 1;
        t.values.resize(static_cast<size_t>(t.shape.numel()));
      }
    save_checkpoint(path, c);
    expect_error(o, "token ids out of range in checkpoint");
  }
}

// The command line: Ctrl-C mid-epoch, and SIGKILL after a periodic checkpoint inside an epoch,
// both resume to the uninterrupted run.
std::string cli_run(const std::string& corpus) {
  return "train --model bert --dataset text --text-files " + corpus +
         " --lr 0.5,1 --emsize 8 --nhid 16 --nlayers 1 --nhead 2 --bptt 5 --batch-size 4 "
         "--epochs 2 --seed 3 --threads 1 --no-progress --checkpoint-interval 0";
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

TEST(TrainBertCheckpointCli, StoppedMidEpochAndResumedEqualsTheUninterruptedRun) {
  TempDir tmp("bert_cli");
  const std::string corpus = write_corpus(tmp.path / "text", 3000, 200);
  const std::string full = tmp.str() + "/full";
  succeed(cli_run(corpus) + " --out " + full);

  const std::string cut = tmp.str() + "/cut";
  fs::create_directories(cut);
  if (!stop_when(cli_run(corpus) + " --out " + cut, cut + "/log.txt", "steps per epoch", SIGINT))
    GTEST_SKIP() << "the run finished before Ctrl-C reached it";
  EXPECT_NE(read_file(cut + "/log.txt").find("--resume to continue"), std::string::npos)
      << read_file(cut + "/log.txt");
  succeed(cli_run(corpus) + " --out " + cut + " --resume");
  EXPECT_EQ(metric_rows(cut), metric_rows(full));
  expect_same_tensors(cut + "/checkpoint.bin", full + "/checkpoint.bin");

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
}

}  // namespace
}  // namespace hfta
