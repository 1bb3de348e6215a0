// Crash test of periodic checkpoints: `hfta train --checkpoint-every N` is killed with SIGKILL at
// moments drawn from a seed, resumed with --resume, killed again, and so on; the run it finally
// completes must equal an uninterrupted run (without periodic checkpoints): metrics.csv row for
// row, summary.csv but for wall times, and the final checkpoint's tensors bit for bit.
//
// After each kill it also checks what a crash may cost:
// - the newest checkpoint file loads (a kill while it was being written left the previous one:
//   the write goes to a temporary file renamed over it);
// - it is not older than the last checkpoint the log reported written, and not newer than the
//   last step in metrics.csv (K);
// - the resumed run starts exactly at its step;
// - when the log shows no snapshot delayed by a slow write, it lies at most 2N steps behind K:
//   N until the next snapshot falls due, and N more if that snapshot's write was cut off (N the
//   larger of --checkpoint-every and the plan's steps per visit: snapshots wait for a visit's end).
//
// Seeds: HFTA_TEST_SEED sets the base; each case prints its seeds, kill times and steps.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>

#include "core/clock.h"
#include "core/rng.h"
#include "io/checkpoint.h"
#include "io/csv.h"
#include "test_files.h"
#include "test_util.h"

namespace hfta {
namespace {

namespace fs = std::filesystem;
struct CrashCase {
  std::string name;
  std::string run;  // the `hfta train` flags, without --out, --seed and checkpoint flags
  int64_t every = 1;
  int64_t steps_per_visit = 1;  // the plan's /K: checkpoints fall at the ends of visits
  bool serial = false;
  int seeds = 1;
  int kills = 3;  // per seed
};

// The complete rows of metrics.csv (a row cut short by the kill is not one): model -> last step.
std::map<int64_t, int64_t> last_steps(const std::string& dir, int64_t* last_model) {
  std::map<int64_t, int64_t> last;
  std::string text = test::read_file(dir + "/metrics.csv");
  text.resize(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    const std::vector<std::string> f = csv_split(line);
    if (f.size() < 2) continue;
    const int64_t model = std::stoll(f[0]), step = std::stoll(f[1]);
    last[model] = std::max(last[model], step);
    *last_model = model;
  }
  return last;
}

// What one segment's log says about the array `who` ("3 models", "model 1").
struct SegmentLog {
  int64_t last_written = -1;
  bool delayed = false;
  int64_t resumed_at = -1;
  bool started = false;  // it got past pruning or truncating metrics.csv
};

SegmentLog read_log(const std::string& path, const std::string& who) {
  SegmentLog s;
  std::istringstream in(test::read_file(path));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("training ", 0) == 0) s.started = true;
    if (line.rfind(who + ": ", 0) != 0) continue;
    const std::string rest = line.substr(who.size() + 2);
    long long step = 0;
    if (std::sscanf(rest.c_str(), "checkpoint of step %lld written", &step) == 1)
      s.last_written = step;
    else if (rest.find(" delayed: ") != std::string::npos)
      s.delayed = true;
    else if (std::sscanf(rest.c_str(), "resuming after step %lld", &step) == 1)
      s.resumed_at = step;
  }
  return s;
}

std::string checkpoint_file(const std::string& dir, bool serial, int64_t model) {
  return serial ? fmt::format("{}/checkpoint-model{}.bin", dir, model) : dir + "/checkpoint.bin";
}

bool any_checkpoint(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("checkpoint", 0) == 0 && e.path().extension() == ".bin") return true;
  }
  return false;
}

std::vector<std::vector<std::string>> rows_without(const std::string& path,
                                                   const std::string& column) {
  CsvTable t = read_csv(path);
  const size_t skip = t.column(column);
  for (auto& row : t.rows) row.erase(row.begin() + static_cast<int64_t>(skip));
  return t.rows;
}

void expect_same_checkpoint(const std::string& got_path, const std::string& want_path) {
  Checkpoint got = load_checkpoint(got_path), want = load_checkpoint(want_path);
  EXPECT_EQ(got.step, want.step) << got_path;
  EXPECT_EQ(got.optimizer_steps, want.optimizer_steps) << got_path;
  EXPECT_EQ(got.last_train_loss, want.last_train_loss) << got_path;
  ASSERT_EQ(got.tensors.size(), want.tensors.size()) << got_path;
  for (size_t i = 0; i < got.tensors.size(); ++i) {
    const auto& a = got.tensors[i].values;
    const auto& b = want.tensors[i].values;
    ASSERT_EQ(a.size(), b.size()) << got.tensors[i].name;
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
        << got_path << ": tensor " << got.tensors[i].name
        << " differs from the uninterrupted run's";
  }
}

enum class Waited { kDone, kExited, kTimedOut };

// Polls every millisecond until `done`, the exit of `pid` (its status in `status`) or
// `timeout_s`.
Waited wait_for(pid_t pid, const std::function<bool()>& done, int* status, double timeout_s) {
  const auto start = Clock::now();
  while (seconds_since(start) < timeout_s) {
    if (done()) return Waited::kDone;
    if (waitpid(pid, status, WNOHANG) == pid) return Waited::kExited;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Waited::kTimedOut;
}

// The run's log shows it has started training ("training ..." comes after the data, the model
// and metrics.csv are ready).
bool started_training(const std::string& log) {
  const std::string text = test::read_file(log);
  return text.rfind("training ", 0) == 0 || text.find("\ntraining ") != std::string::npos;
}

class CrashTest : public ::testing::TestWithParam<CrashCase> {};

TEST_P(CrashTest, KilledAndResumedRunsEqualTheUninterruptedOne) {
  const CrashCase& c = GetParam();
  const std::string mode = c.serial ? " --serial" : "";
  test::TempDir ref_dir("crash_ref_" + c.name);
  const std::string ref = ref_dir.str();
  // The uninterrupted run, timed from its start of training: kills are drawn inside that span.
  const std::string ref_log = ref + "/log.txt";
  const pid_t ref_pid =
      test::spawn_hfta(c.run + mode + " --seed 4 --checkpoint-interval off --out " + ref, ref_log);
  ASSERT_GT(ref_pid, 0);
  int ref_status = 0;
  ASSERT_EQ(wait_for(
                ref_pid, [&] { return started_training(ref_log); }, &ref_status, 120),
            Waited::kDone)
      << test::read_file(ref_log);
  const auto ref_start = Clock::now();
  ASSERT_EQ(wait_for(
                ref_pid, [] { return false; }, &ref_status, 120),
            Waited::kExited);
  const double ref_seconds = seconds_since(ref_start);
  ASSERT_TRUE(WIFEXITED(ref_status) && WEXITSTATUS(ref_status) == 0) << test::read_file(ref_log);
  const int64_t B = static_cast<int64_t>(read_csv(ref + "/summary.csv").rows.size());
  const std::string periodic = fmt::format(
      "{}{} --seed 4 --checkpoint-interval off --checkpoint-every {}", c.run, mode, c.every);

  for (int si = 0; si < c.seeds; ++si) {
    const uint64_t seed = test::case_seed(fmt::format("{}/{}", c.name, si));
    HFTA_SEEDED_TRACE(test::seed_for_test());
    SCOPED_TRACE(fmt::format("case {} seed {}", c.name, seed));
    RngStream rng(seed, 0);
    test::TempDir run_dir(fmt::format("crash_{}_{}", c.name, si));
    const std::string dir = run_dir.str();
    std::string who;               // the array the last kill interrupted
    int64_t expected_resume = -1;  // its newest checkpoint's step
    int torn_writes = 0;
    std::string summary;
    for (int k = 0; k < c.kills; ++k) {
      const bool resume = any_checkpoint(dir);
      const std::string log = fmt::format("{}/log{}.txt", dir, k);
      // A stale temporary file of an earlier kill must not look like a write in progress.
      for (int64_t b = 0; b < (c.serial ? B : 1); ++b)
        fs::remove(checkpoint_file(dir, c.serial, b) + ".tmp");
      const pid_t pid =
          test::spawn_hfta(periodic + " --out " + dir + (resume ? " --resume" : ""), log);
      ASSERT_GT(pid, 0);
      // The kill: a delay drawn from the seed after training starts; every other kill then waits
      // for a checkpoint write to be under way (its temporary file exists), to cut it off.
      const double delay = ref_seconds * rng.uniform(0.0f, 1.0f);
      const bool mid_write = k % 2 == 1;
      int status = 0;
      Waited w = wait_for(
          pid, [&] { return started_training(log); }, &status, 120);
      ASSERT_NE(w, Waited::kTimedOut) << test::read_file(log);
      if (w == Waited::kDone)
        w = wait_for(
            pid, [] { return false; }, &status, delay);
      if (w != Waited::kExited && mid_write)
        w = wait_for(
            pid,
            [&] {
              for (int64_t b = 0; b < (c.serial ? B : 1); ++b)
                if (fs::exists(checkpoint_file(dir, c.serial, b) + ".tmp")) return true;
              return false;
            },
            &status, 5.0);
      const bool exited = w == Waited::kExited;
      if (!exited) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
      }
      if (!who.empty() && expected_resume >= 0) {
        const SegmentLog seg = read_log(log, who);
        if (seg.resumed_at >= 0) {
          EXPECT_EQ(seg.resumed_at, expected_resume)
              << who << " must resume from its newest checkpoint";
        }
      }
      if (WIFEXITED(status)) {  // it finished before the kill
        ASSERT_EQ(WEXITSTATUS(status), 0) << test::read_file(log);
        summary += fmt::format(" [{:.2f}s: finished]", delay);
        who.clear();
        break;
      }
      int64_t model = 0;
      const auto steps = last_steps(dir, &model);
      if (steps.empty()) {  // killed before its first step
        summary += fmt::format(" [{:.2f}s: no step]", delay);
        who.clear();
        continue;
      }
      const int64_t K = steps.at(model);
      who = c.serial ? fmt::format("model {}", model) : fmt::format("{} models", B);
      const std::string file = checkpoint_file(dir, c.serial, model);
      const bool tmp_left = fs::exists(file + ".tmp");
      torn_writes += tmp_left;
      const SegmentLog seg = read_log(log, who);
      int64_t S = 0;
      expected_resume = -1;
      if (fs::exists(file)) {
        Checkpoint saved;
        ASSERT_NO_THROW(saved = load_checkpoint(file)) << "the kill damaged " << file;
        S = expected_resume = saved.step;
      } else {
        EXPECT_LT(seg.last_written, 0) << "the log reported a checkpoint that is not there";
      }
      EXPECT_GE(S, seg.last_written) << "a checkpoint reported written was lost";
      EXPECT_LE(S, K) << "the checkpoint is ahead of metrics.csv";
      // The bound needs this segment's rows: a run killed before it rewrote metrics.csv (the
      // "training" line comes after) leaves the last segment's.
      const bool started = seg.started;
      if (started && !seg.delayed) {
        const int64_t due = std::max(c.every, c.steps_per_visit);
        EXPECT_LE(K - S, 2 * due) << "killed at step " << K << " with checkpoint " << S;
      }
      summary += fmt::format(" [{:.2f}s: {} killed at step {}, checkpoint {}{}]", delay, who, K, S,
                             tmp_left ? ", write cut off" : "");
    }
    // Finish the run.
    const bool resume = any_checkpoint(dir);
    const test::CommandResult done =
        test::run_hfta(periodic + " --out " + dir + (resume ? " --resume" : ""));
    ASSERT_EQ(done.exit_code, 0) << done.output();
    if (!who.empty() && expected_resume >= 0) {
      EXPECT_NE(done.out.find(fmt::format("{}: resuming after step {}", who, expected_resume)),
                std::string::npos)
          << done.out;
    }
    std::printf("%s seed %llu:%s; %d kills cut a checkpoint write off\n", c.name.c_str(),
                static_cast<unsigned long long>(seed), summary.c_str(), torn_writes);

    EXPECT_EQ(read_csv(dir + "/metrics.csv").rows, read_csv(ref + "/metrics.csv").rows);
    EXPECT_EQ(rows_without(dir + "/summary.csv", "wall_seconds"),
              rows_without(ref + "/summary.csv", "wall_seconds"));
    for (int64_t b = 0; b < (c.serial ? B : 1); ++b)
      expect_same_checkpoint(checkpoint_file(dir, c.serial, b), checkpoint_file(ref, c.serial, b));
  }
}

// Adam (state buffers and per-model step counts) on synthetic data with small learning rates so
// the losses stay far from 0; MLP and LeNet have no dropout, so MobileNetV2 (dropout before its
// classifier, raised to 0.5) checks that the dropout RNG resumes where it was.
const std::string kMlp =
    "train --model mlp --dataset synthetic --synthetic-size 1024 --epochs 2 --iters-per-epoch 25 "
    "--batch-size 32 --no-progress";

INSTANTIATE_TEST_SUITE_P(
    Runs, CrashTest,
    ::testing::Values(
        // The fused plan named: plan auto may pick threads:1/8, whose visits put checkpoints 8
        // steps apart (mlp_threads_visits_every1 covers visits).
        CrashCase{.name = "mlp_fused_every1",
                  .run = kMlp + " --lr 0.0001,0.0002,0.0005 --plan fused",
                  .every = 1,
                  .seeds = 4},
        CrashCase{.name = "mlp_fused_every3",
                  .run = kMlp + " --lr 0.0002,0.0005 --plan fused",
                  .every = 3,
                  .seeds = 2},
        // Each thread visits its models for 4 steps at a time: a snapshot waits for the visit's
        // end, when the arrays hold the step its metrics rows end at.
        CrashCase{.name = "mlp_threads_visits_every1",
                  .run = kMlp + " --lr 0.0001,0.0002,0.0005 --threads 2 --plan threads:1/4",
                  .every = 1,
                  .steps_per_visit = 4,
                  .seeds = 2},
        CrashCase{.name = "mlp_serial_every2",
                  .run = kMlp + " --lr 0.0002,0.0005",
                  .every = 2,
                  .serial = true,
                  .seeds = 2},
        CrashCase{.name = "mobilenetv2_dropout_every1",
                  .run = "train --model mobilenetv2 --dataset synthetic --synthetic-size 64 "
                         "--epochs 1 --iters-per-epoch 6 --batch-size 8 --dropout 0.5 "
                         "--lr 0.0001,0.0002 --no-progress --plan fused",
                  .every = 1,
                  .seeds = 1,
                  .kills = 2}),
    [](const ::testing::TestParamInfo<CrashCase>& info) { return info.param.name; });

}  // namespace
}  // namespace hfta
