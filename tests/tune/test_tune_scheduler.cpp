// The search algorithms of `hfta tune` over a fake deterministic objective (bracket sizes,
// promotions and budgets against hand-computed values), and the search space's parsing, seeded
// sampling and errors.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "core/error.h"
#include "tune/tune_scheduler.h"
#include "tune/tune_space.h"

namespace hfta {
namespace {

// Trial t's metric at budget r: better for higher t mod 7 and for more budget.
double objective(int64_t trial, int64_t budget) {
  return static_cast<double>(trial % 7) + 0.01 * static_cast<double>(budget);
}

struct Fake {
  std::vector<std::vector<TuneJob>> batches;
  std::map<int64_t, int64_t> reached;  // trial -> budget
  TuneExecutor executor() {
    return [this](const std::vector<TuneJob>& jobs) {
      batches.push_back(jobs);
      std::vector<TuneOutcome> out;
      for (const TuneJob& j : jobs) {
        // A job continues from where its trial stopped.
        EXPECT_EQ(reached[j.trial], j.from) << "trial " << j.trial;
        reached[j.trial] = j.to;
        out.push_back({.metric = objective(j.trial, j.to)});
      }
      return out;
    };
  }
};

TEST(TuneScheduler, HyperbandBracketsAreHfhtsForItsDefaults) {
  // R = 81, eta = 3, skip_last = 2: s_max 4, B 405; n = ceil(405/81/(s+1)*3^s).
  auto b = hyperband_brackets(81, 3, 2);
  ASSERT_EQ(b.size(), 5u);
  EXPECT_EQ(b[0].n, 81);
  ASSERT_EQ(b[0].rounds.size(), 3u);  // 5 rounds minus the last 2
  EXPECT_EQ(b[0].rounds[0].budget, 1);
  EXPECT_EQ(b[0].rounds[1].trials, 27);
  EXPECT_EQ(b[0].rounds[1].budget, 3);
  EXPECT_EQ(b[0].rounds[2].trials, 9);
  EXPECT_EQ(b[0].rounds[2].budget, 9);
  EXPECT_EQ(b[1].n, 34);  // ceil(33.75)
  ASSERT_EQ(b[1].rounds.size(), 2u);
  EXPECT_EQ(b[1].rounds[1].trials, 11);
  EXPECT_EQ(b[1].rounds[1].budget, 9);
  EXPECT_EQ(b[2].n, 15);
  ASSERT_EQ(b[2].rounds.size(), 1u);
  EXPECT_EQ(b[2].rounds[0].budget, 9);
  EXPECT_TRUE(b[3].rounds.empty());
  EXPECT_TRUE(b[4].rounds.empty());
}

TEST(TuneScheduler, HyperbandPromotesTheBestAndContinuesThem) {
  Fake fake;
  TuneSchedule s{.algorithm = "hyperband", .max_iters = 9, .eta = 3, .skip_last = 0};
  auto records = run_schedule(s, fake.executor());
  // Brackets: s=2: 9@1, 3@3, 1@9; s=1: 5@3, 1@9; s=0: 3@9.
  ASSERT_EQ(fake.batches.size(), 6u);
  std::vector<size_t> sizes;
  for (auto& b : fake.batches) sizes.push_back(b.size());
  EXPECT_EQ(sizes, (std::vector<size_t>{9, 3, 1, 5, 1, 3}));
  // Bracket 2, trials 0..8: metric by t mod 7 -> best 6, 5, 4.
  std::set<int64_t> second;
  for (auto& j : fake.batches[1]) second.insert(j.trial);
  EXPECT_EQ(second, (std::set<int64_t>{4, 5, 6}));
  EXPECT_EQ(fake.batches[2][0].trial, 6);
  EXPECT_EQ(fake.batches[2][0].from, 3);
  EXPECT_EQ(fake.batches[2][0].to, 9);
  // Bracket 1 starts trials 9..13 at budget 3; the best (13 mod 7 = 6) goes on to 9.
  EXPECT_EQ(fake.batches[3].front().trial, 9);
  EXPECT_EQ(fake.batches[3].front().to, 3);
  EXPECT_EQ(fake.batches[4][0].trial, 13);
  EXPECT_EQ(fake.batches[5].front().trial, 14);
  EXPECT_EQ(records.size(), 22u);
}

TEST(TuneScheduler, HyperbandSkipsFailedTrials) {
  TuneSchedule s{.algorithm = "hyperband", .max_iters = 9, .eta = 3, .skip_last = 1};
  std::vector<std::vector<TuneJob>> batches;
  auto records = run_schedule(s, [&](const std::vector<TuneJob>& jobs) {
    batches.push_back(jobs);
    std::vector<TuneOutcome> out;
    for (const TuneJob& j : jobs)  // trials 6 and 5 fail: 4, 3 (then 2) go on
      out.push_back({.metric = objective(j.trial, j.to), .failed = j.trial == 6 || j.trial == 5});
    return out;
  });
  std::set<int64_t> second;
  for (auto& j : batches[1]) second.insert(j.trial);
  EXPECT_EQ(second, (std::set<int64_t>{2, 3, 4}));
}

TEST(TuneScheduler, RandomSearchTrainsEverySampleToMaxIters) {
  Fake fake;
  TuneSchedule s{.algorithm = "random", .num_samples = 5, .max_iters = 4};
  auto records = run_schedule(s, fake.executor());
  ASSERT_EQ(records.size(), 5u);
  for (int64_t t = 0; t < 5; ++t) {
    EXPECT_EQ(records[t].job.trial, t);
    EXPECT_EQ(records[t].job.to, 4);
  }
}

TEST(TuneScheduler, AshaPromotesTheTopThirdOfEachRung) {
  EXPECT_EQ(asha_rungs(1, 9, 3), (std::vector<int64_t>{1, 3, 9}));
  EXPECT_EQ(asha_rungs(1, 10, 3), (std::vector<int64_t>{1, 3, 9, 10}));
  Fake fake;
  TuneSchedule s{.algorithm = "asha",
                 .num_samples = 9,
                 .max_iters = 9,
                 .eta = 3,
                 .min_iters = 1,
                 .workers = 3};
  auto records = run_schedule(s, fake.executor());
  // Batch 1: trials 0, 1, 2 to rung 0. Batch 2: rung 0 has 3 results, top 1 = trial 2 -> rung 1;
  // then new trials 3, 4. Hand-checked order below.
  ASSERT_GE(fake.batches.size(), 3u);
  EXPECT_EQ(fake.batches[0].size(), 3u);
  EXPECT_EQ(fake.batches[1][0].trial, 2);
  EXPECT_EQ(fake.batches[1][0].to, 3);
  EXPECT_EQ(fake.batches[1][1].trial, 3);
  EXPECT_EQ(fake.batches[1][2].trial, 4);
  // Batch 3: rung 0 has 0..4 (5 results: top 1 = 4, not yet promoted), rung 1 has 1 result.
  EXPECT_EQ(fake.batches[2][0].trial, 4);
  EXPECT_EQ(fake.batches[2][0].from, 1);
  // Every trial started once; the best trial (6) reaches max_iters.
  std::set<int64_t> started;
  bool six_at_top = false;
  for (auto& r : records) {
    if (r.job.rung == 0) started.insert(r.job.trial);
    if (r.job.trial == 6 && r.job.to == 9) six_at_top = true;
  }
  EXPECT_EQ(started.size(), 9u);
  EXPECT_TRUE(six_at_top);
  // Deterministic: the same again.
  Fake again;
  auto records2 = run_schedule(s, again.executor());
  ASSERT_EQ(records2.size(), records.size());
  for (size_t i = 0; i < records.size(); ++i)
    EXPECT_EQ(records2[i].job.trial, records[i].job.trial);
}

TEST(TuneScheduler, BadSchedulesFail) {
  EXPECT_THROW(check_schedule({.algorithm = "grid"}), Error);
  EXPECT_THROW(check_schedule({.algorithm = "hyperband", .max_iters = 2, .eta = 3, .skip_last = 2}),
               Error);
  EXPECT_THROW(check_schedule({.eta = 1}), Error);
}

constexpr const char* kSpace = R"({
  "lr": {"dist": "loguniform", "low": 1e-4, "high": 1e-1},
  "beta1": {"dist": "uniform", "low": 0.8, "high": 0.95, "fusible": true},
  "batch_size": {"dist": "choice", "values": [32, 64], "fusible": false},
  "weight_decay": {"dist": "choice", "values": [0, 0.0001]}
})";

TEST(TuneSpace, SamplesAreAFunctionOfSeedAndIndex) {
  TuneSpace space = TuneSpace::parse(kSpace, "space.json", "adam");
  ASSERT_EQ(space.params().size(), 4u);
  EXPECT_EQ(space.sample(3, 7), space.sample(3, 7));
  EXPECT_NE(space.sample(3, 7), space.sample(3, 8));
  EXPECT_NE(space.sample(3, 7), space.sample(4, 7));
  std::set<double> batch;
  for (int i = 0; i < 50; ++i) {
    TuneConfig c = space.sample(1, i);
    EXPECT_GE(c["lr"].number, 1e-4);
    EXPECT_LT(c["lr"].number, 1e-1 * 1.0001);
    EXPECT_GE(c["beta1"].number, 0.8);
    batch.insert(c["batch_size"].number);
    EXPECT_EQ(array_key(c, {.optimizer = "adam"}).batch_size,
              static_cast<int64_t>(c["batch_size"].number));
    EXPECT_EQ(config_hyper(c, "adam").size(), 3u);  // lr, beta1, weight_decay
  }
  EXPECT_EQ(batch, (std::set<double>{32, 64}));
  // int: every integer of [low, high], both ends included.
  TuneSpace ints = TuneSpace::parse(R"({"batch_size": {"dist": "int", "low": 16, "high": 18}})",
                                    "i.json", "sgd");
  std::set<double> drawn;
  for (int i = 0; i < 60; ++i) drawn.insert(ints.sample(2, i)["batch_size"].number);
  EXPECT_EQ(drawn, (std::set<double>{16, 17, 18}));
}

void expect_space_error(const std::string& text, const std::string& message) {
  try {
    TuneSpace::parse(text, "bad.json", "adam");
    ADD_FAILURE() << "no error for " << text;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("bad.json"), std::string::npos) << what;
    EXPECT_NE(what.find(message), std::string::npos) << what << " should mention " << message;
  }
}

TEST(TuneSpace, BadSpacesNameTheFileTheParameterAndTheFix) {
  expect_space_error("{", "not valid JSON");
  expect_space_error(R"({"lr": {"dist": "normal", "low": 0, "high": 1}})", "unknown dist");
  expect_space_error(R"({"lr": {"dist": "uniform", "low": 1, "high": 0}})", "low 1 > high 0");
  expect_space_error(R"({"lr": {"dist": "loguniform", "low": 0, "high": 1}})", "loguniform");
  expect_space_error(R"({"lr": {"dist": "choice", "values": []}})", "empty choice");
  expect_space_error(R"({"learning_rate": {"dist": "choice", "values": [1]}})",
                     "unknown parameter");
  expect_space_error(R"({"batch_size": {"dist": "choice", "values": [32], "fusible": true}})",
                     "\"fusible\": false");
  expect_space_error(R"({"momentum": {"dist": "uniform", "low": 0, "high": 0.9}})",
                     "conflicts with the optimizer");
  expect_space_error(R"({"optimizer": {"dist": "choice", "values": ["lbfgs"]}})",
                     "unknown optimizer");
  expect_space_error(R"({"batch_size": {"dist": "choice", "values": [0.5]}})",
                     "not a positive integer");
  // momentum is fine when an optimizer of the space reads it.
  EXPECT_NO_THROW(TuneSpace::parse(R"({"optimizer": {"dist": "choice", "values": ["adam", "sgd"]},
                                       "momentum": {"dist": "uniform", "low": 0, "high": 0.9}})",
                                   "ok.json", "adam"));
}

}  // namespace
}  // namespace hfta
