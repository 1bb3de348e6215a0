// BERT's masked windows (datasets/bert_data.h): positions and segments as HFTA's examples/bert,
// BERT's 15% / 80-10-10 masking, draws fixed by (seed, step), and clear errors for short splits.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "core/error.h"
#include "datasets/bert_data.h"

namespace hfta {
namespace {

constexpr int32_t kEos = 0;

TEST(BertData, PositionsRestartAfterEosAndTheSecondSentenceIsSegmentOne) {
  const std::vector<int32_t> ids = {5, 6, kEos, 7, 8, 9, kEos, 4};
  std::vector<int32_t> pos(ids.size()), seg(ids.size());
  mlm_positions(ids.data(), static_cast<int64_t>(ids.size()), kEos, pos.data(), seg.data());
  EXPECT_EQ(pos, (std::vector<int32_t>{0, 1, 2, 0, 1, 2, 3, 0}));
  EXPECT_EQ(seg, (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 1, 1}));
  // A window starting right after <eos> or ending with one has a single segment.
  const std::vector<int32_t> one = {5, 6, 7, kEos};
  mlm_positions(one.data(), 4, kEos, pos.data(), seg.data());
  EXPECT_EQ(std::vector<int32_t>(seg.begin(), seg.begin() + 4), (std::vector<int32_t>(4, 0)));
}

Batchified stream_data(int64_t streams, int64_t tokens, int32_t words) {
  std::vector<int32_t> ids(static_cast<size_t>(tokens));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + 3) % words);
  return batchify(ids, streams, "test split");
}

TEST(BertData, MaskingFollowsBertsRatesAndIsFixedBySeedAndStep) {
  constexpr int32_t kWords = 50;
  const MlmReader reader(stream_data(16, 16 * 4000, kWords), 64, {.words = kWords, .eos = kEos});
  EXPECT_EQ(reader.windows(), 4000 / 64);
  MlmWindow w = reader.make_window(), again = reader.make_window(), other = reader.make_window();
  int64_t chosen = 0, masked = 0, kept = 0, total = 0;
  for (int64_t i = 0; i < reader.windows(); ++i) {
    reader.fill(i, 3, static_cast<uint64_t>(i), w);
    for (size_t k = 0; k < w.tokens.size(); ++k) {
      ++total;
      const int32_t original = static_cast<int32_t>(
          reader.windows() > 0 ? (((k / 64) * 4000 + i * 64 + k % 64) * 7 + 3) % kWords : 0);
      if (w.targets[k] == kIgnoreTarget) {
        EXPECT_EQ(w.tokens[k], original);
        continue;
      }
      EXPECT_EQ(w.targets[k], original);
      ++chosen;
      masked += w.tokens[k] == kWords;
      kept += w.tokens[k] == original;
      EXPECT_GE(w.tokens[k], 0);
      EXPECT_LE(w.tokens[k], kWords);
    }
  }
  const double rate = static_cast<double>(chosen) / static_cast<double>(total);
  EXPECT_NEAR(rate, 0.15, 0.005);
  EXPECT_NEAR(static_cast<double>(masked) / static_cast<double>(chosen), 0.8, 0.01);
  // Kept: 10%, plus the random words that drew the original (1/50 of 10%).
  EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(chosen), 0.1 + 0.1 / kWords, 0.01);
  reader.fill(5, 3, 17, w);
  reader.fill(5, 3, 17, again);
  reader.fill(5, 3, 18, other);
  EXPECT_EQ(w.tokens, again.tokens);
  EXPECT_EQ(w.targets, again.targets);
  EXPECT_NE(w.targets, other.targets);
  reader.fill(5, 4, 17, other);
  EXPECT_NE(w.targets, other.targets);
}

TEST(BertData, EveryWindowPredictsSomething) {
  const MlmReader reader(stream_data(1, 40, 9), 2, {.words = 9, .eos = kEos});
  MlmWindow w = reader.make_window();
  for (uint64_t step = 0; step < 200; ++step) {
    reader.fill(static_cast<int64_t>(step % 20), 1, step, w);
    EXPECT_TRUE(w.targets[0] != kIgnoreTarget || w.targets[1] != kIgnoreTarget);
  }
}

TEST(BertData, ShortSplitsAndBadWindowsThrow) {
  EXPECT_THROW(MlmReader(stream_data(4, 40, 9), 11, {.words = 9}), Error);  // 10 per stream
  EXPECT_NO_THROW(MlmReader(stream_data(4, 40, 9), 10, {.words = 9}));
  EXPECT_THROW(MlmReader(stream_data(1, 600, 9), kBertMaxPositions + 1, {.words = 9}), Error);
  EXPECT_THROW(MlmReader(stream_data(1, 40, 9), 0, {.words = 9}), Error);
  const MlmReader reader(stream_data(1, 40, 9), 10, {.words = 9});
  MlmWindow w = reader.make_window();
  EXPECT_THROW(reader.fill(4, 1, 0, w), Error);
}

}  // namespace
}  // namespace hfta
