// The Transformer language model as a fused array: B models over one token window compute
// exactly what each computes alone (losses, gradients, a few SGD steps), with dropout on and off,
// including a window shorter than bptt; bad token ids throw hfta::Error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "models/language_model.h"

namespace hfta {
namespace {

constexpr int64_t kVocab = 37, kStreams = 3, kBptt = 6;

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
  std::vector<int32_t> in, out;
  IndexView inputs(int64_t T) { return IndexView(in.data(), Shape{kStreams, T}); }
  IndexView targets(int64_t T) { return IndexView(out.data(), Shape{kStreams, T}); }
};

Window random_window(uint64_t seed, int64_t T) {
  RngStream rng = RngStream::for_model(seed, 0, kRngData);
  Window w;
  for (int64_t i = 0; i < kStreams * T; ++i) {
    w.in.push_back(static_cast<int32_t>(rng.uniform() * kVocab) % kVocab);
    w.out.push_back(static_cast<int32_t>(rng.uniform() * kVocab) % kVocab);
  }
  return w;
}

// Plain SGD on every parameter: enough to follow trajectories.
void sgd(LanguageModel& m, float lr) {
  for (const Param& p : m.params())
    for (int64_t i = 0; i < p.value.numel(); ++i) p.value[i] -= lr * p.grad[i];
}

void expect_close(float a, float b, const char* what, int64_t model, size_t step) {
  EXPECT_NEAR(a, b, 2e-5f * std::max(1.0f, std::fabs(b)))
      << what << " of model " << model << " at step " << step;
}

class TransformerArray : public ::testing::TestWithParam<float> {};

TEST_P(TransformerArray, FusedOfThreeEqualsThreeSingles) {
  const float dropout = GetParam();
  constexpr int64_t B = 3;
  auto fused = make_language_model("transformer", spec_for(B, {}, dropout));
  std::vector<std::unique_ptr<LanguageModel>> singles;
  for (int64_t b = 0; b < B; ++b)
    singles.push_back(make_language_model("transformer", spec_for(1, {b}, dropout)));
  // Windows: full ones and a short tail (T' = 4), as a pass ends.
  const std::vector<int64_t> lengths = {kBptt, kBptt, 4, kBptt};
  for (size_t step = 0; step < lengths.size(); ++step) {
    const int64_t T = lengths[step];
    Window w = random_window(100 + step, T);
    fused->train_step(w.inputs(T), w.targets(T));
    for (int64_t b = 0; b < B; ++b) {
      LanguageModel& one = *singles[static_cast<size_t>(b)];
      one.train_step(w.inputs(T), w.targets(T));
      ASSERT_TRUE(std::isfinite(one.losses()[0]));
      expect_close(fused->losses()[static_cast<size_t>(b)], one.losses()[0], "loss", b, step);
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

INSTANTIATE_TEST_SUITE_P(Dropout, TransformerArray, ::testing::Values(0.0f, 0.2f));

TEST(Transformer, StateDictNamesArePyTorchs) {
  auto m = make_language_model("transformer", spec_for(1, {}, 0.2f));
  std::vector<std::string> names;
  for (const Param& p : m->params()) names.push_back(p.name);
  for (const char* expected :
       {"encoder.weight", "transformer_encoder.layers.0.self_attn.in_proj_weight",
        "transformer_encoder.layers.0.self_attn.in_proj_bias",
        "transformer_encoder.layers.0.self_attn.out_proj.weight",
        "transformer_encoder.layers.1.linear1.weight", "transformer_encoder.layers.1.linear2.bias",
        "transformer_encoder.layers.1.norm1.weight", "transformer_encoder.layers.1.norm2.bias",
        "decoder.weight", "decoder.bias"})
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  EXPECT_EQ(names.size(), 2u + 2u * 12u + 1u);
}

TEST(Transformer, DropoutZeroGivesTheSameLossInTrainingAndEvaluation) {
  auto m = make_language_model("transformer", spec_for(2, {}, 0.0f));
  Window w = random_window(7, kBptt);
  m->forward(w.inputs(kBptt), w.targets(kBptt), true);
  const std::vector<float> train = m->losses();
  m->forward(w.inputs(kBptt), w.targets(kBptt), false);
  EXPECT_EQ(train, m->losses());
  // An untrained model is close to uniform over the vocabulary.
  EXPECT_NEAR(train[0], std::log(static_cast<float>(kVocab)), 1.0f);
}

// HFTA_PROFILE=1: the attention nodes' time is a positive part of the net's, and the report
// names it (hfta trial prints the share of a step from these).
TEST(Transformer, ProfileGivesTheAttentionNodesShare) {
  ASSERT_EQ(setenv("HFTA_PROFILE", "1", 1), 0);
  auto m = make_language_model("transformer", spec_for(2, {}, 0.0f));
  ASSERT_EQ(unsetenv("HFTA_PROFILE"), 0);
  ASSERT_TRUE(m->profiling());
  Window w = random_window(3, kBptt);
  for (int step = 0; step < 2; ++step) m->train_step(w.inputs(kBptt), w.targets(kBptt));
  const AttentionShare s = m->attention_profile();
  EXPECT_GT(s.attention_ms, 0.0);
  EXPECT_GT(s.total_ms, s.attention_ms);
  const std::string report = m->profile_report();
  EXPECT_NE(report.find("Attention(2 heads, causal"), std::string::npos) << report;
  EXPECT_NE(report.find("attention: "), std::string::npos) << report;
  m->reset_profile();
  EXPECT_EQ(m->attention_profile().total_ms, 0.0);
}

TEST(Transformer, DropoutChangesTrainingLossesOnly) {
  auto m = make_language_model("transformer", spec_for(2, {}, 0.2f));
  Window w = random_window(9, kBptt);
  m->forward(w.inputs(kBptt), w.targets(kBptt), false);
  const std::vector<float> eval = m->losses();
  m->forward(w.inputs(kBptt), w.targets(kBptt), true);
  EXPECT_NE(eval[0], m->losses()[0]);
  EXPECT_NE(eval[1], m->losses()[1]);
  m->forward(w.inputs(kBptt), w.targets(kBptt), false);
  EXPECT_EQ(eval, m->losses());
}

TEST(Transformer, BadTokenIdsThrow) {
  auto m = make_language_model("transformer", spec_for(2, {}, 0.2f));
  Window w = random_window(8, kBptt);
  w.in[5] = kVocab;
  EXPECT_THROW(m->forward(w.inputs(kBptt), w.targets(kBptt), true), Error);
  w.in[5] = -1;
  EXPECT_THROW(m->forward(w.inputs(kBptt), w.targets(kBptt), true), Error);
  w.in[5] = 0;
  w.out[2] = kVocab + 3;
  EXPECT_THROW(m->forward(w.inputs(kBptt), w.targets(kBptt), true), Error);
  w.out[2] = 0;
  std::vector<int32_t> long_ids(kStreams * (kBptt + 1), 0);
  const IndexView longer(long_ids.data(), Shape{kStreams, kBptt + 1});
  EXPECT_THROW(m->forward(longer, longer, true), Error);  // a window longer than bptt
  EXPECT_THROW(make_language_model("transformer",
                                   [] {
                                     LanguageModelSpec s = spec_for(1, {}, 0.2f);
                                     s.config.nhead = 3;
                                     return s;
                                   }()),
               Error);
}

}  // namespace
}  // namespace hfta
