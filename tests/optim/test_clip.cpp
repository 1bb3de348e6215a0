// Per-model gradient clipping: each model clipped by its own global norm, as
// torch.nn.utils.clip_grad_norm_ on that model alone.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "optim/clip.h"

namespace hfta {
namespace {

TEST(ClipGradNorm, EachModelByItsOwnNorm) {
  // Two tensors [B=3, 2] and [3, 1]: model norms 5 (3,4,0), 0.5 and 13 (5,0,12).
  std::vector<float> a = {3, 4, 0.3f, 0.4f, 5, 0}, c = {0, 0, 12};
  std::vector<TensorView> grads = {TensorView(a.data(), Shape{3, 2}),
                                   TensorView(c.data(), Shape{3, 1})};
  std::vector<float> norms(3);
  const std::vector<float> max_norm = {1.0f};
  clip_grad_norm_per_model(grads, 3, max_norm, norms);
  EXPECT_FLOAT_EQ(norms[0], 5.0f);
  EXPECT_FLOAT_EQ(norms[1], 0.5f);
  EXPECT_FLOAT_EQ(norms[2], 13.0f);
  EXPECT_NEAR(a[0], 3.0f / 5.0f, 1e-6f);
  EXPECT_NEAR(a[1], 4.0f / 5.0f, 1e-6f);
  EXPECT_FLOAT_EQ(a[2], 0.3f);  // under the limit: untouched
  EXPECT_FLOAT_EQ(a[3], 0.4f);
  EXPECT_NEAR(a[4], 5.0f / 13.0f, 1e-6f);
  EXPECT_NEAR(c[2], 12.0f / 13.0f, 1e-6f);
}

TEST(ClipGradNorm, PerModelLimitsAndNonFiniteModels) {
  std::vector<float> a = {3, 4, std::numeric_limits<float>::quiet_NaN(), 1};
  std::vector<TensorView> grads = {TensorView(a.data(), Shape{2, 2})};
  const std::vector<float> max_norm = {2.5f, 0.1f};
  clip_grad_norm_per_model(grads, 2, max_norm);
  EXPECT_NEAR(a[0], 1.5f, 1e-6f);
  EXPECT_NEAR(a[1], 2.0f, 1e-6f);
  EXPECT_TRUE(std::isnan(a[2]));
  EXPECT_FLOAT_EQ(a[3], 1.0f);  // a NaN model is left for the optimizer to skip
}

// An execution plan's workers clip their own groups (clip_grad_norm_models): blocks covering the
// array give every model bit for bit what the whole-array call gives, and leave the models
// outside the block untouched.
TEST(ClipGradNorm, BlocksOfModelsEqualTheWholeArray) {
  const int64_t B = 5;
  std::vector<float> a(B * 7), c(B * 3);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  for (size_t i = 0; i < c.size(); ++i) c[i] = std::cos(0.91f * static_cast<float>(i)) * 2.0f;
  std::vector<float> a2 = a, c2 = c;
  const std::vector<TensorView> whole = {TensorView(a.data(), Shape{B, 7}),
                                         TensorView(c.data(), Shape{B, 3})};
  const std::vector<TensorView> blocks = {TensorView(a2.data(), Shape{B, 7}),
                                          TensorView(c2.data(), Shape{B, 3})};
  const std::vector<float> max_norm = {0.5f, 1.0f, 100.0f, 2.0f, 0.1f};
  std::vector<float> norms(B), block_norms(B, -1.0f);
  clip_grad_norm_per_model(whole, B, max_norm, norms);
  const std::vector<float> before = a2;
  clip_grad_norm_models(blocks, B, max_norm, 1, 2, block_norms);  // models 1 and 2
  for (int64_t i = 0; i < 7; ++i) {
    EXPECT_EQ(a2[i], before[i]) << "model 0 is outside the block";
    EXPECT_EQ(a2[3 * 7 + i], before[3 * 7 + i]) << "model 3 is outside the block";
  }
  EXPECT_EQ(block_norms[0], -1.0f);
  clip_grad_norm_models(blocks, B, max_norm, 0, 1, block_norms);
  clip_grad_norm_models(blocks, B, max_norm, 3, 2, block_norms);
  EXPECT_EQ(a2, a);
  EXPECT_EQ(c2, c);
  EXPECT_EQ(block_norms, norms);
  EXPECT_THROW(clip_grad_norm_models(blocks, B, max_norm, 4, 2), Error);
  EXPECT_THROW(clip_grad_norm_models(blocks, B, max_norm, 0, 0), Error);
}

TEST(ClipGradNorm, BadArgumentsThrow) {
  std::vector<float> a(4, 1.0f);
  std::vector<TensorView> grads = {TensorView(a.data(), Shape{2, 2})};
  const std::vector<float> three = {1, 1, 1}, zero = {0.0f}, one = {1.0f};
  EXPECT_THROW(clip_grad_norm_per_model(grads, 2, three), Error);
  EXPECT_THROW(clip_grad_norm_per_model(grads, 2, zero), Error);
  EXPECT_THROW(clip_grad_norm_per_model(grads, 4, one), Error);
}

}  // namespace
}  // namespace hfta
