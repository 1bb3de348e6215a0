// `mpirun -np 2 hfta tune` (tune/tune_mpi.h): the messages between ranks, a trainer that
// throws, and (when mpirun exists and hfta was built with MPI) real runs of the `hfta` binary:
// random search and Hyperband on mlp with synthetic data and tiny budgets give the same history
// over two ranks as in one process, and a trial that throws on a rank is marked failed while the
// rest finish.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "core/error.h"
#include "io/csv.h"
#include "test_files.h"
#include "tune/tune_mpi.h"

namespace hfta {
namespace {

using test::TempDir;

TEST(TuneMpi, TaskAndResultSurviveTheirMessages) {
  const TuneArrayTask task{
      .start = 3, .to = 9, .jobs = {{.trial = 4, .from = 3, .to = 9, .bracket = 2, .rung = 1}}};
  const TuneArrayTask t = decode_task(encode_task(task));
  EXPECT_EQ(t.start, 3);
  EXPECT_EQ(t.to, 9);
  ASSERT_EQ(t.jobs.size(), 1u);
  EXPECT_EQ(t.jobs[0].trial, 4);
  EXPECT_EQ(t.jobs[0].from, 3);
  EXPECT_EQ(t.jobs[0].bracket, 2);
  EXPECT_EQ(t.jobs[0].rung, 1);

  TuneArrayResult r;
  r.outcomes = {{.metric = 0.25, .failed = false}, {.metric = NAN, .failed = true}};
  r.rows = {{"4", "0.01", "ok"}, {"5", "nan", "failed"}};
  r.wall_s = 1.5;
  r.rank = 1;
  const TuneArrayResult back = decode_result(encode_result(r));
  ASSERT_EQ(back.outcomes.size(), 2u);
  EXPECT_EQ(back.outcomes[0].metric, 0.25);  // exact: JSON keeps every digit of a double
  EXPECT_TRUE(std::isnan(back.outcomes[1].metric));
  EXPECT_TRUE(back.outcomes[1].failed);
  EXPECT_EQ(back.rows, r.rows);
  EXPECT_EQ(back.rank, 1);
  EXPECT_FALSE(back.lost);
}

TEST(TuneMpi, AThrowingArrayFailsItsTrialsNotTheRank) {
  const TuneArrayTask task{.start = 0, .to = 1, .jobs = {{.trial = 1}, {.trial = 2}}};
  const TuneArrayResult r = train_array_guarded(
      task, [](const TuneArrayTask&) -> TuneArrayResult { fail("out of memory"); }, 1);
  EXPECT_TRUE(r.lost);
  EXPECT_EQ(r.rank, 1);
  EXPECT_NE(r.error.find("out of memory"), std::string::npos);
  ASSERT_EQ(r.outcomes.size(), 2u);
  EXPECT_TRUE(r.outcomes[0].failed && r.outcomes[1].failed);
}

TEST(TuneMpi, OneProcessIsNotLaunchedUnderMpirun) {
  // ctest runs this binary alone: the single-process path must not initialise MPI.
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) {
    EXPECT_FALSE(tune_mpi_launched());
  }
}

constexpr const char* kSpace = R"({
  "lr": {"dist": "loguniform", "low": 1e-3, "high": 3e-2},
  "beta1": {"dist": "uniform", "low": 0.8, "high": 0.95},
  "batch_size": {"dist": "choice", "values": [16, 32], "fusible": false}
})";

bool have_mpirun() { return std::system("command -v mpirun > /dev/null 2>&1") == 0; }

// Runs `hfta tune` on mlp, in one process (ranks 0) or under mpirun; returns its exit status.
int run_hfta(const TempDir& dir, int ranks, const std::string& out, const std::string& extra,
             const std::string& env = "") {
  const std::string space = (dir.path / "space.json").string();
  if (!std::filesystem::exists(space)) std::ofstream(space) << kSpace;
  // --bind-to none: two ranks of one thread each share the machine as the scheduler likes.
  const std::string launcher =
      ranks == 0
          ? env
          : fmt::format("mpirun --allow-run-as-root --oversubscribe --bind-to none {} -np {} ", env,
                        ranks);
  // timeout: a rank that hangs fails the test instead of blocking ctest.
  const std::string cmd = fmt::format(
      "timeout 300 {}{} tune --model mlp --dataset synthetic --synthetic-size 128 --space {} "
      "--max-iters 9 "
      "--eta 3 --skip-last 0 --iters-per-epoch 2 --seed 5 --threads 1 --out {} {} > {}.log 2>&1",
      launcher, HFTA_CLI_PATH, space, (dir.path / out).string(), extra, (dir.path / out).string());
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string log_of(const TempDir& dir, const std::string& out) {
  std::ifstream in((dir.path / (out + ".log")).string());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct Row {
  double acc, loss;
  int64_t bracket, rung, from;
  std::string status;
};
std::map<std::pair<int64_t, int64_t>, Row> history(const std::string& path) {
  CsvTable t = read_csv(path);
  std::map<std::pair<int64_t, int64_t>, Row> out;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const std::string& status = t.rows[r][t.column("status")];
    const bool ok = status == "ok";
    out[{t.integer(r, t.column("trial")), t.integer(r, t.column("budget"))}] = {
        ok ? t.number(r, t.column("val_acc")) : NAN, ok ? t.number(r, t.column("val_loss")) : NAN,
        t.integer(r, t.column("bracket")),           t.integer(r, t.column("rung")),
        t.integer(r, t.column("from_budget")),       status};
  }
  return out;
}

// The same configurations and rungs; metrics within the fused == serial tolerance.
void expect_same_history(const std::string& a, const std::string& b) {
  auto ha = history(a), hb = history(b);
  ASSERT_EQ(ha.size(), hb.size());
  for (const auto& [key, row] : ha) {
    ASSERT_TRUE(hb.contains(key)) << "trial " << key.first << " budget " << key.second;
    const Row& other = hb[key];
    EXPECT_EQ(row.status, other.status) << "trial " << key.first;
    EXPECT_EQ(row.bracket, other.bracket) << "trial " << key.first;
    EXPECT_EQ(row.rung, other.rung) << "trial " << key.first;
    EXPECT_EQ(row.from, other.from) << "trial " << key.first;
    EXPECT_NEAR(row.acc, other.acc, 2e-3) << "trial " << key.first << " budget " << key.second;
    EXPECT_NEAR(row.loss, other.loss, 1e-4 * std::max(1.0, std::abs(row.loss)))
        << "trial " << key.first << " budget " << key.second;
  }
}

class TuneMpirun : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!tune_mpi_available()) GTEST_SKIP() << "hfta was built without MPI";
    if (!have_mpirun()) GTEST_SKIP() << "no mpirun (apt-get install openmpi-bin)";
  }
};

TEST_F(TuneMpirun, TwoRanksGiveTheHistoryOfOne) {
  TempDir dir("tune_mpi_same");
  for (const std::string algorithm : {"random", "hyperband"}) {
    const std::string extra = fmt::format("--algorithm {} --num-samples 6", algorithm);
    ASSERT_EQ(run_hfta(dir, 0, "one_" + algorithm, extra), 0) << log_of(dir, "one_" + algorithm);
    ASSERT_EQ(run_hfta(dir, 2, "two_" + algorithm, extra), 0) << log_of(dir, "two_" + algorithm);
    EXPECT_NE(log_of(dir, "two_" + algorithm).find("sharded over 2 MPI ranks"), std::string::npos)
        << log_of(dir, "two_" + algorithm);
    const std::string one = (dir.path / ("one_" + algorithm) / "fused/history.csv").string();
    const std::string two = (dir.path / ("two_" + algorithm) / "fused/history.csv").string();
    expect_same_history(one, two);
    // Hyperband of R = 9, eta = 3: 9@1, 3@3, 1@9 | 5@3, 1@9 | 3@9; random: 6 trials to 9.
    EXPECT_EQ(history(two).size(), algorithm == "random" ? 6u : 22u);
    EXPECT_TRUE(std::filesystem::exists(dir.path / ("two_" + algorithm) / "fused/best.bin"));
  }
}

TEST_F(TuneMpirun, ATrialThatThrowsOnARankFailsAndTheRestFinish) {
  TempDir dir("tune_mpi_fail");
  // Serial mode: each array is one trial, so only trial 1 fails, on whichever rank trains it.
  const std::string extra = "--algorithm random --num-samples 4 --mode serial";
  ASSERT_EQ(run_hfta(dir, 2, "out", extra, "-x HFTA_TUNE_TEST_FAIL_TRIAL=1"), 0)
      << log_of(dir, "out");
  auto h = history((dir.path / "out/serial/history.csv").string());
  ASSERT_EQ(h.size(), 4u) << log_of(dir, "out");
  for (const auto& [key, row] : h) {
    EXPECT_EQ(row.status, key.first == 1 ? "failed" : "ok") << "trial " << key.first;
    if (key.first != 1) {
      EXPECT_TRUE(std::isfinite(row.acc)) << "trial " << key.first;
    }
  }
  EXPECT_NE(log_of(dir, "out").find("HFTA_TUNE_TEST_FAIL_TRIAL"), std::string::npos)
      << log_of(dir, "out");
}

// Rank 1 gets the first array (trial 0) and its process exits. With --enable-recovery mpirun
// lets the job go on: rank 0 waits --rank-timeout, fails trial 0 and trains the rest itself.
TEST_F(TuneMpirun, ARankThatDiesFailsItsTrialsWithRecovery) {
  TempDir dir("tune_mpi_dead");
  const std::string extra = "--algorithm random --num-samples 4 --mode serial --rank-timeout 5";
  ASSERT_EQ(run_hfta(dir, 2, "out", extra, "--enable-recovery -x HFTA_TUNE_TEST_EXIT_TRIAL=0"), 0)
      << log_of(dir, "out");
  auto h = history((dir.path / "out/serial/history.csv").string());
  ASSERT_EQ(h.size(), 4u) << log_of(dir, "out");
  for (const auto& [key, row] : h)
    EXPECT_EQ(row.status, key.first == 0 ? "failed" : "ok") << "trial " << key.first;
  EXPECT_NE(log_of(dir, "out").find("rank 1 sent nothing"), std::string::npos)
      << log_of(dir, "out");
}

// Without --enable-recovery OpenMPI ends the job when a rank's process exits: what finished is
// in history.csv, and --resume (here in one process) trains the rest.
TEST_F(TuneMpirun, ADeadRankWithoutRecoveryEndsTheJobAndResumeFinishes) {
  TempDir dir("tune_mpi_abort");
  const std::string extra = "--algorithm random --num-samples 4 --mode serial";
  EXPECT_NE(run_hfta(dir, 2, "out", extra, "-x HFTA_TUNE_TEST_EXIT_TRIAL=0"), 0)
      << log_of(dir, "out");
  ASSERT_EQ(run_hfta(dir, 0, "out", extra + " --resume"), 0) << log_of(dir, "out");
  auto h = history((dir.path / "out/serial/history.csv").string());
  ASSERT_EQ(h.size(), 4u);
  for (const auto& [key, row] : h) EXPECT_EQ(row.status, "ok") << "trial " << key.first;
}

}  // namespace
}  // namespace hfta
