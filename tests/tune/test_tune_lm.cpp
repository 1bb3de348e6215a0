// `hfta tune` of language models (tune/tune_search.cpp over their tasks' RunArrays) on tiny
// Transformers and BERTs over a small patterned text corpus: Hyperband finishes with finite
// validation losses, serial and fused arrays give the same history, a trial promoted through its
// checkpoint retrains alone with `hfta train` to the same validation loss, --iters-per-epoch epochs
// read on through the corpus, and what cannot be tuned fails with a clear error.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "core/error.h"
#include "io/csv.h"
#include "io/interrupt.h"
#include "run/train.h"
#include "tasks/language_model/lm_run.h"
#include "tasks/tasks.h"
#include "test_files.h"
#include "tune/tune.h"

namespace hfta {
namespace {

using test::expect_hfta_error;
using test::TempDir;

constexpr const char* kTransformerSpace = R"({
  "optimizer": {"dist": "choice", "values": ["adadelta"], "fusible": false},
  "lr": {"dist": "loguniform", "low": 0.3, "high": 3.0},
  "clip": {"dist": "loguniform", "low": 0.1, "high": 1.0},
  "lr_gamma": {"dist": "choice", "values": [0.5, 1.0]},
  "dropout": {"dist": "choice", "values": [0.1, 0.2], "fusible": false}
})";

std::string write_file(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = (dir.path / name).string();
  std::ofstream(path) << text;
  return path;
}

// 400 lines of a few repeating patterns (about 30 words): something a tiny model learns in a
// few steps, so trials differ in their losses and a wrong initialization or window shows.
std::string write_corpus(const TempDir& dir) {
  std::string text;
  for (int i = 0; i < 400; ++i)
    text += fmt::format("the {} cat sat on the {} mat number {}\n", i % 7, i % 5, i % 11);
  return write_file(dir, "corpus.txt", text);
}

// `model` of a few thousand parameters on the patterned corpus, trained by Adadelta.
TuneOptions tiny_lm_options(const TempDir& dir, const std::string& model) {
  TuneOptions o;
  o.model = model;
  o.dataset = "text";
  o.model_flags.text_files = write_corpus(dir);
  o.model_flags.emsize = 16;
  o.model_flags.nhid = 16;
  o.model_flags.nlayers = 1;
  o.model_flags.nhead = 2;
  o.model_flags.bptt = 8;
  o.optimizer = "adadelta";
  o.batch_size = 4;
  o.iters_per_epoch = 3;
  o.out = (dir.path / "out").string();
  o.quiet = true;
  o.threads = 1;
  return o;
}

TuneOptions transformer_options(const TempDir& dir, const std::string& mode) {
  TuneOptions o = tiny_lm_options(dir, "transformer");
  o.metric = "val_loss";
  o.space = write_file(dir, "transformer.json", kTransformerSpace);
  o.schedule = {.algorithm = "hyperband", .max_iters = 3, .eta = 3, .skip_last = 0};
  o.mode = mode;
  o.seed = 7;
  return o;
}

struct Row {
  double acc, loss;
  int64_t from;
};
std::map<std::pair<int64_t, int64_t>, Row> history(const std::string& dir) {
  CsvTable t = read_csv(dir + "/history.csv");
  std::map<std::pair<int64_t, int64_t>, Row> out;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    EXPECT_EQ(t.rows[r][t.column("status")], "ok") << "row " << r;
    out[{t.integer(r, t.column("trial")), t.integer(r, t.column("budget"))}] = {
        t.rows[r][t.column("val_acc")] == "nan" ? NAN : t.number(r, t.column("val_acc")),
        t.number(r, t.column("val_loss")), t.integer(r, t.column("from_budget"))};
  }
  return out;
}

// Retrains `trial` alone to `budget` with the options its command.txt gives; its validation loss.
double retrain_alone(const TuneOptions& o, int64_t trial, int64_t budget, const TempDir& dir) {
  const TuneSpace space = TuneSpace::load(o.space, o.optimizer);
  TrainOptions t = trial_train_options(o, space.sample(o.seed, trial), trial, budget,
                                       (dir.path / fmt::format("alone{}", trial)).string());
  t.threads = 1;
  const TrainResult r = run_train(t);
  EXPECT_EQ(r.models.size(), 1u);
  return r.models.at(0).valid_loss;
}

TEST(TuneLm, TransformerHyperbandSameInEveryModeAndAPromotedTrialRetrainsAlone) {
  TempDir dir("tune_lm_transformer");
  const TuneOptions fused_options = transformer_options(dir, "fused");
  const TuneRunResult fused = run_tune(fused_options);
  // Brackets of R = 3, eta = 3: 3@1 then 1@3 | 2@3 (trials 0..4).
  EXPECT_EQ(fused.records.size(), 6u);
  const auto rows = history(fused.dir);
  ASSERT_EQ(rows.size(), 6u);
  std::pair<int64_t, int64_t> promoted{-1, -1};
  double lowest = INFINITY, highest = 0;
  for (const auto& [key, row] : rows) {
    EXPECT_TRUE(std::isfinite(row.loss)) << "trial " << key.first;
    EXPECT_GT(row.loss, 0.0);
    EXPECT_TRUE(std::isnan(row.acc)) << "a Transformer LM has no accuracy";
    if (row.from > 0) promoted = key;
    lowest = std::min(lowest, row.loss);
    highest = std::max(highest, row.loss);
  }
  ASSERT_GE(promoted.first, 0) << "Hyperband promoted no trial";
  EXPECT_GT(highest - lowest, 0.01) << "the trials should differ: else the comparisons below "
                                       "cannot tell one trial from another";
  for (const char* f : {"best.bin", "best.safetensors", "trajectory.csv"})
    EXPECT_TRUE(std::filesystem::exists(fused.dir + "/" + f)) << f;

  // Every row (each slot of each array, the promoted trial's continuation from its stacked
  // checkpoint) equals training that trial alone from scratch, within the fused == serial
  // tolerance.
  for (const auto& [key, row] : rows) {
    const double alone = retrain_alone(fused_options, key.first, key.second, dir);
    EXPECT_NEAR(row.loss, alone, 1e-4 * std::max(1.0, std::abs(alone)))
        << "trial " << key.first << " budget " << key.second;
  }

  const TuneRunResult serial = run_tune(transformer_options(dir, "serial"));
  const auto serial_rows = history(serial.dir);
  ASSERT_EQ(serial_rows.size(), rows.size());
  for (const auto& [key, row] : rows)
    EXPECT_NEAR(row.loss, serial_rows.at(key).loss, 1e-4 * std::max(1.0, std::abs(row.loss)))
        << "trial " << key.first << " budget " << key.second;
  EXPECT_GT(serial.arrays_trained, fused.arrays_trained);
  EXPECT_EQ(serial.best_trial, fused.best_trial);
}

TEST(TuneLm, BertRandomSearchRanksByMaskedAccuracyAndATrialRetrainsAlone) {
  TempDir dir("tune_lm_bert");
  TuneOptions o = tiny_lm_options(dir, "bert");
  o.model_flags.clip.clear();  // BERT's default: no clipping
  o.metric = "val_acc";
  o.space = write_file(dir, "bert.json", R"({
    "lr": {"dist": "loguniform", "low": 0.3, "high": 3.0},
    "lr_step_size": {"dist": "choice", "values": [1, 2]},
    "lr_gamma": {"dist": "choice", "values": [0.25, 1.0]}
  })");
  o.schedule = {.algorithm = "random", .num_samples = 3, .max_iters = 2};
  o.seed = 3;
  const TuneRunResult r = run_tune(o);
  const auto rows = history(r.dir);
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& [key, row] : rows) {
    EXPECT_GE(row.acc, 0.0);
    EXPECT_LE(row.acc, 1.0);
    EXPECT_TRUE(std::isfinite(row.loss));
  }
  ASSERT_GE(r.best_trial, 0);
  EXPECT_EQ(r.best_metric, rows.at({r.best_trial, 2}).acc);
  EXPECT_TRUE(std::filesystem::exists(r.dir + "/best.safetensors"));
  for (int64_t trial : {1, 2}) {
    const double alone = retrain_alone(o, trial, 2, dir);
    EXPECT_NEAR(rows.at({trial, 2}).loss, alone, 1e-4 * std::max(1.0, std::abs(alone)))
        << "trial " << trial;
  }
}

// --iters-per-epoch N: epoch e reads the N windows after epoch e-1's, so 2 epochs of 3 train
// on what 1 epoch of 6 does (the same windows, dropout draws and updates).
TEST(TuneLm, PartialEpochsReadOnThroughTheCorpus) {
  TempDir dir("tune_lm_epochs");
  TrainOptions t;
  t.model = "transformer";
  t.dataset = "synthetic-text";
  t.synthetic_train_size = 64;
  t.vocab = 40;
  t.emsize = 16;
  t.nhid = 16;
  t.nlayers = 1;
  t.nhead = 2;
  t.bptt = 8;
  t.batch_size = 2;  // 31 windows per pass: the second run's epochs wrap around it
  t.optimizer = "adadelta";
  t.hyper = {{"lr", {1.0f, 0.5f}}};
  t.threads = 1;
  t.progress = false;
  t.checkpoint = false;
  auto run = [&](int64_t epochs, int64_t iters, const char* name) {
    TrainOptions u = t;
    u.epochs = epochs;
    u.iters_per_epoch = iters;
    u.out = (dir.path / name).string();
    return run_train(u);
  };
  const TrainResult two = run(2, 3, "two"), one = run(1, 6, "one");
  for (size_t b = 0; b < 2; ++b)
    EXPECT_NEAR(two.models[b].valid_loss, one.models[b].valid_loss, 1e-5) << "model " << b;
}

// Live arrays of Transformers and BERTs (tune_search.h, take_live), one array key, at most 3
// models per array: fresh trials refill the slots of the array before, and promoted ones go on
// in it compacted to them. Every validation loss equals, bit for bit, what arrays built anew
// from the trials' checkpoints give, and (within rounding) what each trial gives trained alone.
class TuneLmLive : public testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Models, TuneLmLive, testing::Values("transformer", "bert"));

TEST_P(TuneLmLive, ArraysTrainAsRebuiltOnesAndAsEachTrialAlone) {
  TempDir dir("tune_lm_live_" + GetParam());
  const std::string space = write_file(dir, "live.json", R"({
  "optimizer": {"dist": "choice", "values": ["adadelta"], "fusible": false},
  "lr": {"dist": "loguniform", "low": 0.3, "high": 3.0},
  "clip": {"dist": "loguniform", "low": 0.1, "high": 1.0},
  "lr_gamma": {"dist": "choice", "values": [0.5, 1.0]}
})");
  auto options = [&](const std::string& out, const std::string& mode, bool live) {
    TuneOptions o = tiny_lm_options(dir, GetParam());
    o.metric = "val_loss";
    o.space = space;
    o.schedule = {.algorithm = "hyperband", .max_iters = 9, .eta = 3, .skip_last = 0};
    o.max_fused = 3;
    o.mode = mode;
    o.live_arrays = live;
    o.seed = 3;
    o.out = (dir.path / out).string();
    return o;
  };
  const TuneRunResult live = run_tune(options("live", "fused", true));
  EXPECT_GE(live.live.slots_refilled, 3);
  EXPECT_GE(live.live.arrays_continued, 1);
  EXPECT_GE(live.live.compactions, 1);
  const TuneRunResult rebuilt = run_tune(options("rebuilt", "fused", false));
  EXPECT_EQ(rebuilt.live.slots_refilled + rebuilt.live.arrays_continued, 0);
  const TuneRunResult alone = run_tune(options("alone", "serial", true));
  ASSERT_EQ(rebuilt.records.size(), live.records.size());
  ASSERT_EQ(alone.records.size(), live.records.size());
  for (size_t i = 0; i < live.records.size(); ++i) {
    const TuneRecord &a = live.records[i], &b = rebuilt.records[i], &c = alone.records[i];
    SCOPED_TRACE(fmt::format("trial {} to budget {}", a.job.trial, a.job.to));
    EXPECT_EQ(b.job.trial, a.job.trial);
    EXPECT_EQ(c.job.trial, a.job.trial);
    EXPECT_FALSE(a.outcome.failed);
    EXPECT_EQ(a.outcome.metric, b.outcome.metric);
    EXPECT_NEAR(a.outcome.metric, c.outcome.metric, 1e-4 * std::max(1.0, c.outcome.metric));
  }
}

TEST(TuneLm, AnEpochOfNWindowsStartsWhereTheLastStoppedWrappingAroundThePass) {
  EXPECT_EQ(lm_epoch_first_window(0, 20, 31), 0);
  EXPECT_EQ(lm_epoch_first_window(1, 20, 31), 20);
  EXPECT_EQ(lm_epoch_first_window(2, 20, 31), 9);  // 40 - 31
  EXPECT_EQ(lm_epoch_first_window(4, 31, 31), 0);  // whole passes start at 0
  EXPECT_EQ(lm_epoch_first_window(3, 40, 31), 0);  // capped to the pass: whole passes
  // 2^40 = 1 (mod 31): epoch 2^40 starts where epoch 1 did, without overflowing 2^40 * 20.
  EXPECT_EQ(lm_epoch_first_window(int64_t{1} << 40, 20, 31), 20);
}

TEST(TuneLm, WhatCannotBeTunedFailsClearly) {
  TempDir dir("tune_lm_errors");
  const std::string lm_space = write_file(dir, "lm.json", kTransformerSpace);
  const std::string out = (dir.path / "out").string();
  expect_hfta_error(
      fmt::format("tune --model dcgan --dataset fashion-mnist --space {} --out {}", lm_space, out),
      "a GAN has no validation metric");
  expect_hfta_error(fmt::format("tune --model transformer --dataset synthetic-text --space {} "
                                "--metric val_acc --out {}",
                                lm_space, out),
                    "has no accuracy; use --metric val_loss");
  expect_hfta_error(fmt::format("tune --model mlp --dataset synthetic --space {} --metric val_loss "
                                "--out {}",
                                lm_space, out),
                    "--model mlp does not read --clip");
  expect_hfta_error(fmt::format("tune --model transformer --dataset synthetic-text --space {} "
                                "--metric val_loss --clip 0.1,0.2 --out {}",
                                lm_space, out),
                    "--clip takes one value in hfta tune");
  expect_hfta_error(fmt::format("tune --model transformer --dataset synthetic-text --space {} "
                                "--metric val_loss --out {}",
                                write_file(dir, "bad.json",
                                           R"({"clip": {"dist": "uniform", "low": )"
                                           R"(-1, "high": 1}})"),
                                out),
                    "clip -1 is not positive");
}

// hfta tune runs hfta train's loop, and both guard Ctrl-C: the inner guard must neither clear
// the outer's interrupt nor leave its handler installed.
TEST(TuneLm, InterruptGuardsNest) {
  struct sigaction before {};
  sigaction(SIGINT, nullptr, &before);
  {
    InterruptGuard outer;
    {
      InterruptGuard inner;
      raise(SIGINT);
      EXPECT_TRUE(InterruptGuard::interrupted());
    }
    EXPECT_TRUE(InterruptGuard::interrupted()) << "the inner guard hid the interrupt";
  }
  EXPECT_FALSE(InterruptGuard::interrupted());
  struct sigaction after {};
  sigaction(SIGINT, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler) << "the handler was not restored";
}

}  // namespace
}  // namespace hfta
