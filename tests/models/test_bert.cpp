// BERT (HFTA's examples/bert) as a fused array: B models over one masked window compute exactly
// what each computes alone (losses, gradients, a few SGD steps), with dropout on and off; the
// state_dict names are the example's; bad ids and sizes throw hfta::Error; masked-only output
// equals logits at every position.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "models/masked_lm.h"
#include "models/plan.h"

namespace hfta {
namespace {

constexpr int64_t kVocab = 29, kStreams = 3, kBptt = 6;

LanguageModelSpec spec_for(int64_t B, std::vector<int64_t> ids, float dropout) {
  LanguageModelSpec s;
  s.B = B;
  s.streams = kStreams;
  s.seed = 5;
  s.model_ids = std::move(ids);
  s.config = {.vocab = kVocab,
              .emsize = 8,
              .nhid = 12,
              .nlayers = 2,
              .nhead = 2,
              .bptt = kBptt,
              .dropout = dropout};
  return s;
}

struct Window {
  std::vector<int32_t> tokens, positions, segments, targets;
  MlmBatch batch() {
    const Shape s{kStreams, kBptt};
    return {IndexView(tokens.data(), s), IndexView(positions.data(), s),
            IndexView(segments.data(), s), IndexView(targets.data(), s)};
  }
};

// Random ids; about a third of the positions predicted (at least one).
Window random_window(uint64_t seed) {
  RngStream rng = RngStream::for_model(seed, 0, kRngData);
  Window w;
  for (int64_t i = 0; i < kStreams * kBptt; ++i) {
    w.tokens.push_back(static_cast<int32_t>(rng.below(kVocab)));
    w.positions.push_back(static_cast<int32_t>(i % kBptt));
    w.segments.push_back(static_cast<int32_t>(rng.below(kBertSegments)));
    w.targets.push_back(i == 0 || rng.uniform() < 0.3f ? static_cast<int32_t>(rng.below(kVocab - 1))
                                                       : kIgnoreTarget);
  }
  return w;
}

void sgd(MaskedLm& m, float lr) {
  for (const Param& p : m.params())
    for (int64_t i = 0; i < p.value.numel(); ++i) p.value[i] -= lr * p.grad[i];
}

class BertArray : public ::testing::TestWithParam<float> {};

TEST_P(BertArray, FusedOfThreeEqualsThreeSingles) {
  const float dropout = GetParam();
  constexpr int64_t B = 3;
  auto fused = make_masked_lm("bert", spec_for(B, {}, dropout));
  std::vector<std::unique_ptr<MaskedLm>> singles;
  for (int64_t b = 0; b < B; ++b)
    singles.push_back(make_masked_lm("bert", spec_for(1, {b}, dropout)));
  for (size_t step = 0; step < 3; ++step) {
    Window w = random_window(100 + step);
    fused->train_step(w.batch());
    const std::vector<int64_t> fused_correct = fused->correct();
    for (int64_t b = 0; b < B; ++b) {
      MaskedLm& one = *singles[static_cast<size_t>(b)];
      one.train_step(w.batch());
      ASSERT_TRUE(std::isfinite(one.losses()[0]));
      EXPECT_NEAR(fused->losses()[static_cast<size_t>(b)], one.losses()[0],
                  2e-5f * std::max(1.0f, std::fabs(one.losses()[0])))
          << "loss of model " << b << " at step " << step;
      EXPECT_EQ(fused_correct[static_cast<size_t>(b)], one.correct()[0]);
      for (size_t i = 0; i < one.params().size(); ++i) {
        const TensorView g = fused->params()[i].grad.replica(b);
        const TensorView g1 = one.params()[i].grad.replica(0);
        float worst = 0.0f, scale = 1e-3f;
        for (int64_t k = 0; k < g1.numel(); ++k) {
          worst = std::max(worst, std::fabs(g[k] - g1[k]));
          scale = std::max(scale, std::fabs(g1[k]));
        }
        EXPECT_LE(worst, 1e-4f * scale)
            << one.params()[i].name << " gradient of model " << b << " at step " << step;
      }
      sgd(one, 0.5f);
    }
    sgd(*fused, 0.5f);
  }
}

INSTANTIATE_TEST_SUITE_P(Dropout, BertArray, ::testing::Values(0.0f, 0.1f));

// Every execution plan trains the fused plan's models (models/plan.h): per step the same losses
// and gradients (each group's kernels may sum in another order: within fp32 rounding), the
// same predictions in an evaluation forward, with dropout on, with B = 3 (odd) and B = 5 over
// two workers. Gradients are those of the state net, written group by group.
class BertPlans : public ::testing::TestWithParam<std::tuple<int64_t, const char*>> {};

TEST_P(BertPlans, TrainTheFusedPlansModels) {
  const auto [B, plan_name] = GetParam();
  LanguageModelSpec fused_spec = spec_for(B, {}, 0.1f), plan_spec = fused_spec;
  plan_spec.plan = ExecutionPlan::parse(plan_name);
  plan_spec.threads = 2;
  constexpr int64_t kPredicted = 3;  // masked-only output, as `hfta train`
  auto fused = make_masked_lm("bert", fused_spec, kPredicted);
  auto planned = make_masked_lm("bert", plan_spec, kPredicted);
  ASSERT_EQ(planned->plan().str(), plan_name);
  EXPECT_THROW(planned->backward(), Error);  // under a plan backward runs in train_step()
  for (size_t step = 0; step < 3; ++step) {
    Window w = random_window(200 + step);
    fused->train_step(w.batch());
    std::vector<int64_t> seen(static_cast<size_t>(B), 0);
    planned->train_step(w.batch(), [&](int64_t first, int64_t count) {
      for (int64_t b = first; b < first + count; ++b) ++seen[static_cast<size_t>(b)];
    });
    EXPECT_EQ(seen, std::vector<int64_t>(static_cast<size_t>(B), 1)) << "each model once";
    for (int64_t b = 0; b < B; ++b)
      EXPECT_NEAR(planned->losses()[static_cast<size_t>(b)],
                  fused->losses()[static_cast<size_t>(b)],
                  2e-5f * std::max(1.0f, std::fabs(fused->losses()[static_cast<size_t>(b)])))
          << plan_name << ": loss of model " << b << " at step " << step;
    for (size_t i = 0; i < fused->params().size(); ++i) {
      const TensorView g = planned->params()[i].grad, g1 = fused->params()[i].grad;
      float worst = 0.0f, scale = 1e-3f;
      for (int64_t k = 0; k < g1.numel(); ++k) {
        worst = std::max(worst, std::fabs(g[k] - g1[k]));
        scale = std::max(scale, std::fabs(g1[k]));
      }
      EXPECT_LE(worst, 1e-4f * scale)
          << plan_name << ": " << fused->params()[i].name << " gradient at step " << step;
    }
    sgd(*fused, 0.5f);
    sgd(*planned, 0.5f);
  }
  Window eval = random_window(300);
  fused->forward(eval.batch(), false);
  planned->forward(eval.batch(), false);
  EXPECT_EQ(planned->correct(), fused->correct());
  for (int64_t b = 0; b < B; ++b)
    EXPECT_NEAR(planned->losses()[static_cast<size_t>(b)], fused->losses()[static_cast<size_t>(b)],
                1e-4f * std::max(1.0f, std::fabs(fused->losses()[static_cast<size_t>(b)])));
  EXPECT_GT(planned->train_flops_per_sample(), 0.0);
  EXPECT_DOUBLE_EQ(planned->train_flops_per_sample(), fused->train_flops_per_sample());
  EXPECT_THROW(planned->forward(eval.batch(), true), Error);  // training runs in train_step()
}

INSTANTIATE_TEST_SUITE_P(PlansAndSizes, BertPlans,
                         ::testing::Values(std::make_tuple(int64_t{3}, "chunk:1"),
                                           std::make_tuple(int64_t{3}, "chunk:2"),
                                           std::make_tuple(int64_t{3}, "threads"),
                                           std::make_tuple(int64_t{5}, "threads:1"),
                                           std::make_tuple(int64_t{2}, "threads")));

TEST(Bert, StateDictNamesAreTheExamples) {
  auto m = make_masked_lm("bert", spec_for(1, {}, 0.1f));
  std::vector<std::string> names;
  for (const Param& p : m->params()) names.push_back(p.name);
  for (const char* expected :
       {"embedding.token.weight", "embedding.position.weight", "embedding.segment.weight",
        "transformer_blocks.0.attention.in_proj_weight",
        "transformer_blocks.0.attention.in_proj_bias",
        "transformer_blocks.0.attention.out_proj.weight",
        "transformer_blocks.0.attention.out_proj.bias",
        "transformer_blocks.1.feed_forward.w_1.weight",
        "transformer_blocks.1.feed_forward.w_2.bias",
        "transformer_blocks.1.input_sublayer.norm.weight",
        "transformer_blocks.1.output_sublayer.norm.bias", "output.weight", "output.bias"})
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  EXPECT_EQ(names.size(), 3u + 2u * 12u + 2u);
  EXPECT_EQ(m->params()[1].value.shape, (Shape{1, kBertMaxPositions, 8}));
}

TEST(Bert, LossIsTheMeanOverPredictedPositionsOnly) {
  auto m = make_masked_lm("bert", spec_for(2, {}, 0.0f));
  Window w = random_window(7);
  m->forward(w.batch(), true);
  const std::vector<float> train = m->losses();
  m->forward(w.batch(), false);
  EXPECT_EQ(train, m->losses());  // dropout 0: train and eval agree
  EXPECT_NEAR(train[0], std::log(static_cast<float>(kVocab)), 2.5f);
  int64_t predicted = 0;
  for (int32_t t : w.targets) predicted += t != kIgnoreTarget;
  EXPECT_EQ(m->predicted(), predicted);
  // The token at an ignored position does not change the loss's terms there... but it changes
  // the context; a target flipped to ignore changes the mean.
  const int32_t first = w.targets[0];
  w.targets[0] = kIgnoreTarget;
  m->forward(w.batch(), false);
  EXPECT_NE(train[0], m->losses()[0]);
  EXPECT_EQ(m->predicted(), predicted - 1);
  w.targets[0] = first;
}

TEST(Bert, BadIdsAndSizesThrow) {
  auto m = make_masked_lm("bert", spec_for(2, {}, 0.1f));
  Window w = random_window(8);
  w.tokens[5] = kVocab;
  EXPECT_THROW(m->forward(w.batch(), true), Error);
  w.tokens[5] = 0;
  w.positions[3] = kBertMaxPositions;
  EXPECT_THROW(m->forward(w.batch(), true), Error);
  w.positions[3] = 0;
  w.segments[2] = kBertSegments;
  EXPECT_THROW(m->forward(w.batch(), true), Error);
  w.segments[2] = 0;
  w.targets[4] = kVocab;
  EXPECT_THROW(m->forward(w.batch(), true), Error);
  w.targets[4] = kIgnoreTarget;
  EXPECT_NO_THROW(m->forward(w.batch(), true));
  LanguageModelSpec long_window = spec_for(1, {}, 0.1f);
  long_window.config.bptt = kBertMaxPositions + 1;
  EXPECT_THROW(make_masked_lm("bert", long_window), Error);
  LanguageModelSpec odd_heads = spec_for(1, {}, 0.1f);
  odd_heads.config.nhead = 3;
  EXPECT_THROW(make_masked_lm("bert", odd_heads), Error);
  EXPECT_THROW(make_masked_lm("bort", spec_for(1, {}, 0.1f)), Error);
}

// Masked-only output (gather_tokens before the output layer) is the same math as logits at every
// position: the same losses, accuracy counts and gradients, with dropout on and off, for a
// capacity of every position and for the fewest rows that fit the window.
TEST(Bert, MaskedOnlyOutputEqualsAllPositions) {
  for (float dropout : {0.0f, 0.1f}) {
    const Window w = random_window(11);
    int64_t predicted = 0;
    for (int32_t t : w.targets) predicted += t != kIgnoreTarget;
    const int64_t fewest = (predicted + kStreams - 1) / kStreams;
    ASSERT_LT(fewest, kBptt);
    auto all = make_masked_lm("bert", spec_for(2, {}, dropout));
    Window wa = w;
    all->forward(wa.batch(), true);
    all->backward();
    for (int64_t K : {kBptt, fewest}) {
      SCOPED_TRACE(::testing::Message() << "dropout " << dropout << " K " << K);
      auto some = make_masked_lm("bert", spec_for(2, {}, dropout), K);
      EXPECT_EQ(some->predicted_per_stream(), K);
      Window ws = w;
      some->forward(ws.batch(), true);
      some->backward();
      for (size_t b = 0; b < 2; ++b)
        EXPECT_NEAR(some->losses()[b], all->losses()[b], 1e-5f * std::fabs(all->losses()[b]));
      EXPECT_EQ(some->correct(), all->correct());
      EXPECT_EQ(some->predicted(), all->predicted());
      ASSERT_EQ(some->params().size(), all->params().size());
      for (size_t i = 0; i < all->params().size(); ++i) {
        const Param& p = all->params()[i];
        const Param& q = some->params()[i];
        ASSERT_EQ(p.value.numel(), q.value.numel());
        for (int64_t j = 0; j < p.grad.numel(); ++j)
          ASSERT_NEAR(q.grad[j], p.grad[j], 1e-5f + 1e-4f * std::fabs(p.grad[j]))
              << p.name << " [" << j << "]";
      }
    }
    // A window predicting more positions than the rows hold names the capacity.
    auto small = make_masked_lm("bert", spec_for(2, {}, dropout), 1);
    Window ws = w;
    try {
      small->forward(ws.batch(), true);
      ADD_FAILURE() << "no error for " << predicted << " positions in " << kStreams << " rows";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("capacity"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(make_masked_lm("bert", spec_for(1, {}, 0.0f), kBptt + 1), Error);
  // BERT's 15%: 6 standard deviations above the mean, at most T.
  EXPECT_EQ(mlm_predicted_per_stream(32, 32), 7);
  EXPECT_EQ(mlm_predicted_per_stream(4, 1), 4);
}

}  // namespace
}  // namespace hfta
