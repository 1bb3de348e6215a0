// `hfta tune` on live arrays: checkpoints of trials the search stopped for good are pruned (the
// best's stays, --keep-checkpoints keeps all, a resumed search still finishes), and --plan auto
// is resolved per array.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "datasets/loader.h"
#include "io/csv.h"
#include "run/data.h"
#include "tasks/classifier/train_loop.h"
#include "tasks/tasks.h"
#include "test_files.h"
#include "tune/tune.h"

namespace hfta {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

TuneOptions small(const TempDir& dir, const std::string& algorithm, const std::string& out) {
  const std::string space = (dir.path / "space.json").string();
  std::ofstream(space) << R"({
  "lr": {"dist": "loguniform", "low": 1e-3, "high": 3e-2},
  "batch_size": {"dist": "choice", "values": [16, 32], "fusible": false}
})";
  TuneOptions o;
  o.model = "mlp";
  o.dataset = "synthetic";
  o.synthetic_train_size = 128;
  o.synthetic_test_size = 128;
  o.space = space;
  o.schedule = {.algorithm = algorithm,
                .num_samples = 6,
                .max_iters = 3,
                .eta = 3,
                .skip_last = 0,
                .min_iters = 1,
                .workers = 3};
  o.iters_per_epoch = 2;
  o.out = (dir.path / out).string();
  o.seed = 5;
  o.quiet = getenv("HFTA_TEST_LOUD") == nullptr;
  o.threads = 1;
  return o;
}

std::vector<int64_t> trials_with_checkpoints(const std::string& dir) {
  std::vector<int64_t> out;
  for (const auto& e : fs::directory_iterator(dir + "/trials"))
    if (fs::exists(e.path() / "checkpoint.bin")) out.push_back(std::stoll(e.path().filename()));
  std::sort(out.begin(), out.end());
  return out;
}

TEST(TuneLive, StoppedTrialsLoseTheirCheckpointsButTheBestKeepsIt) {
  TempDir dir("tune_prune");
  for (const char* algorithm : {"hyperband", "asha", "random"}) {
    SCOPED_TRACE(algorithm);
    TuneRunResult r = run_tune(small(dir, algorithm, std::string("pruned_") + algorithm));
    ASSERT_GE(r.best_trial, 0);
    // Every trial is done when the search ends: only the best's checkpoint is left.
    EXPECT_EQ(trials_with_checkpoints(r.dir), (std::vector<int64_t>{r.best_trial}));
    EXPECT_TRUE(fs::exists(r.dir + "/pruned.log"));
    EXPECT_TRUE(fs::exists(r.dir + "/best.bin"));
    // The retrain commands stay.
    EXPECT_TRUE(fs::exists(r.dir + "/trials/0/command.txt"));
  }
  TuneOptions keep = small(dir, "hyperband", "kept");
  keep.keep_checkpoints = true;
  TuneRunResult kept = run_tune(keep);
  EXPECT_EQ(trials_with_checkpoints(kept.dir).size(), 5u);  // brackets 3@1 -> 1@3 and 2@3
  EXPECT_FALSE(fs::exists(kept.dir + "/pruned.log"));
}

TEST(TuneLive, AnInterruptedSearchWithPruningResumesToTheSameHistory) {
  TempDir dir("tune_prune_resume");
  TuneOptions whole = small(dir, "hyperband", "whole");
  TuneRunResult reference = run_tune(whole);
  TuneOptions o = small(dir, "hyperband", "cut");
  o.interrupt_after_arrays = 3;
  EXPECT_THROW(run_tune(o), Error);
  o.interrupt_after_arrays = 0;
  o.resume = true;
  TuneRunResult resumed = run_tune(o);
  ASSERT_EQ(resumed.records.size(), reference.records.size());
  for (size_t i = 0; i < reference.records.size(); ++i) {
    EXPECT_EQ(resumed.records[i].job.trial, reference.records[i].job.trial);
    EXPECT_EQ(resumed.records[i].outcome.metric, reference.records[i].outcome.metric);
  }
  EXPECT_EQ(resumed.best_trial, reference.best_trial);
  EXPECT_EQ(trials_with_checkpoints(resumed.dir), (std::vector<int64_t>{resumed.best_trial}));
}

// Live arrays (tune.cpp, take_live), one array key, at most 3 models per array. Bracket 2 trains
// its 9 fresh trials as 3 arrays, the second and third in the slots of the one before (refilled),
// and its last round continues the promoted trial in the live array compacted to it; bracket 1
// trains 5 fresh trials as 3 + 2 (refilled into a compacted array). Every number equals what
// arrays built anew from the trials' checkpoints give, bit for bit (the models that go on are
// untouched by the slot changes), and what each trial trained alone gives (serial).
TEST(TuneLive, RefilledAndCompactedSlotsTrainAsNewArraysAndAsEachTrialAlone) {
  TempDir dir("tune_live_slots");
  auto options = [&](const std::string& out, const std::string& mode, bool live) {
    TuneOptions o = small(dir, "hyperband", out);
    std::ofstream(o.space) << R"({
  "lr": {"dist": "loguniform", "low": 1e-3, "high": 3e-2},
  "weight_decay": {"dist": "uniform", "low": 0.0, "high": 0.01}
})";
    o.batch_size = 16;
    o.schedule.max_iters = 9;
    o.max_fused = 3;
    o.mode = mode;
    o.live_arrays = live;
    return o;
  };
  const TuneRunResult live = run_tune(options("live", "fused", true));
  EXPECT_GE(live.live.slots_refilled, 6);
  EXPECT_GE(live.live.arrays_continued, 1);
  EXPECT_GE(live.live.compactions, 2);
  const TuneRunResult rebuilt = run_tune(options("rebuilt", "fused", false));
  EXPECT_EQ(rebuilt.live.slots_refilled + rebuilt.live.arrays_continued, 0);
  EXPECT_EQ(rebuilt.arrays_trained, live.arrays_trained);
  const TuneRunResult alone = run_tune(options("alone", "serial", true));
  ASSERT_EQ(live.records.size(), 22u);  // 9@1, 3@3, 1@9 | 5@3, 1@9 | 3@9
  ASSERT_EQ(rebuilt.records.size(), live.records.size());
  ASSERT_EQ(alone.records.size(), live.records.size());
  for (size_t i = 0; i < live.records.size(); ++i) {
    const TuneRecord &a = live.records[i], &b = rebuilt.records[i], &c = alone.records[i];
    SCOPED_TRACE(fmt::format("trial {} to budget {}", a.job.trial, a.job.to));
    EXPECT_EQ(b.job.trial, a.job.trial);
    EXPECT_EQ(c.job.trial, a.job.trial);
    EXPECT_FALSE(a.outcome.failed);
    EXPECT_EQ(a.outcome.metric, b.outcome.metric);
    EXPECT_NEAR(a.outcome.metric, c.outcome.metric, 2e-3);  // accuracy: fused == serial
  }
  EXPECT_EQ(live.best_trial, rebuilt.best_trial);
}

TEST(TuneLive, PlanAutoIsResolvedPerArray) {
  TempDir dir("tune_plan_auto");
  TuneOptions o = small(dir, "random", "auto");
  o.schedule.num_samples = 3;
  o.schedule.max_iters = 1;
  o.plan = "auto";
  TuneRunResult r = run_tune(o);
  EXPECT_EQ(r.records.size(), 3u);
  for (const TuneRecord& rec : r.records) EXPECT_FALSE(rec.outcome.failed);
}

// --first-epoch K: the run's first step trains on the first batch of the loader's epoch K (the
// data a trial sees when it joins a live array after K budget units), from a fresh model.
TEST(TuneLive, FirstEpochStartsAtThatEpochsShuffle) {
  TempDir dir("train_first_epoch");
  TrainOptions t;
  t.model = "mlp";
  t.dataset = "synthetic";
  t.synthetic_train_size = 128;
  t.synthetic_test_size = 64;
  t.batch_size = 16;
  t.iters_per_epoch = 2;
  t.seed = 5;
  t.first_model_id = 3;
  t.plan = "fused";
  t.progress = false;
  t.checkpoint = false;
  t.threads = 1;
  auto first_loss = [&](int64_t first_epoch) {
    t.first_epoch = first_epoch;
    t.out = (dir.path / fmt::format("e{}", first_epoch)).string();
    run_train(t);
    CsvTable m = read_csv(t.out + "/metrics.csv");
    return m.number(0, m.column("loss"));
  };
  // The same step by hand: model 3 fresh, the first batch of loader epoch 2.
  const ModelInfo& info = model_info(t.model);
  Data data = load_data(t.dataset, "", info.default_sample_shape, info.default_num_classes,
                        t.synthetic_train_size, t.synthetic_test_size, t.seed);
  auto model = make_model("mlp", model_config("mlp", data).spec({3}, t.batch_size, t.seed));
  Loader loader(data.train, {.batch_size = t.batch_size,
                             .shuffle = true,
                             .seed = t.seed,
                             .drop_last = true,
                             .iters_per_epoch = t.iters_per_epoch});
  Batch batch = loader.make_batch();
  loader.start_epoch(2);
  ASSERT_TRUE(loader.next(batch));
  model->train_step(batch.images(), batch.labels());
  const double by_hand = model->losses()[0];
  const double shifted = first_loss(2), unshifted = first_loss(0);
  EXPECT_NEAR(shifted, by_hand, 1e-5 * std::max(1.0, by_hand));
  EXPECT_GT(std::fabs(unshifted - by_hand), 1e-5);  // epoch 0 is another batch: the test can tell
}

}  // namespace
}  // namespace hfta
