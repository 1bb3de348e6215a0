// PointNet through the model graph: replica b of a fused array computes exactly what model b does
// alone (losses, the feature-transform regularizer, every gradient, Adam steps), and inputs of
// the wrong shape are refused by name.
//
// Tolerance (fp32): fused kernels may group sums differently from single-model ones; losses and
// gradients agree to rounding (relative to each tensor's largest gradient).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "datasets/loader.h"
#include "datasets/shapes.h"
#include "models/model.h"
#include "optim/adam.h"

namespace hfta {
namespace {

constexpr int64_t kPoints = 32;
constexpr int64_t kBatch = 8;

ParamTable table_of(const Model& model) {
  std::vector<TensorView> values;
  for (const Param& p : model.params()) values.push_back(p.value);
  return ParamTable::from_arena(model.param_arena(), values);
}

struct Trained {
  std::vector<std::vector<float>> losses;  // [step][model]: cross-entropy
  std::vector<std::vector<float>> reg;     // [step][model]: regularizer (feature transform)
  std::vector<std::vector<float>> grads;   // [model][all gradients], first step
  std::vector<std::vector<float>> params;  // [model][params], after the steps
  std::vector<std::string> names;
};

Trained train(const std::string& name, const std::vector<int64_t>& ids, int steps) {
  const int64_t B = static_cast<int64_t>(ids.size());
  const std::vector<float> all_lr = {1e-3f, 3e-4f, 2e-3f};
  auto model = make_model(name, {.B = B,
                                 .batch_size = kBatch,
                                 .seed = 5,
                                 .model_ids = ids,
                                 .sample_shape = Shape{kPoints, 3},
                                 .num_classes = kShapesClasses});
  std::vector<float> lr;
  for (int64_t id : ids) lr.push_back(all_lr[static_cast<size_t>(id)]);
  FusedAdam optimizer(table_of(*model), AdamHyper{.lr = lr});
  PointCloudSet data = make_shapes(Split::kTrain, 4 * kBatch, kPoints, 5);
  Loader loader(data, {.batch_size = kBatch, .seed = 5});
  Batch batch = loader.make_batch();
  Trained run;
  for (const Param& p : model->params()) run.names.push_back(p.name);
  for (int s = 0; s < steps; ++s) {
    if (!loader.next(batch)) loader.next(batch);
    model->forward(batch.images(), batch.labels(), true);
    run.losses.push_back(model->losses());
    const Net& net = model->net();
    std::vector<float> reg(static_cast<size_t>(B), 0.0f);
    // The feature transform's regularizer is the loss recorded before the cross-entropy.
    if (net.losses().size() == 2) {
      const TensorView v = net.value(net.losses()[0]);
      std::copy(v.data, v.data + B, reg.begin());
    }
    run.reg.push_back(reg);
    model->backward();
    if (s == 0)
      for (int64_t b = 0; b < B; ++b) {
        std::vector<float> g;
        for (const Param& p : model->params()) {
          const TensorView r = p.grad.replica(b);
          g.insert(g.end(), r.data, r.data + r.numel());
        }
        run.grads.push_back(g);
      }
    optimizer.step(model->param_arena(), model->grad_arena());
  }
  for (int64_t b = 0; b < B; ++b) run.params.push_back(model->extract(b));
  return run;
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, double rtol,
                  const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double scale = 0.0, worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) scale = std::max(scale, std::fabs(double(b[i])));
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
  EXPECT_LE(worst, rtol * scale + 1e-7)
      << what << ": largest difference " << worst << " against largest magnitude " << scale;
}

class PointNetArray : public ::testing::TestWithParam<std::string> {};

TEST_P(PointNetArray, FusedReplicasComputeWhatEachModelComputesAlone) {
  const std::string name = GetParam();
  constexpr int kSteps = 3;
  const Trained fused = train(name, {0, 1, 2}, kSteps);
  for (int64_t b = 0; b < 3; ++b) {
    const Trained alone = train(name, {b}, kSteps);
    for (int s = 0; s < kSteps; ++s) {
      const float f = fused.losses[static_cast<size_t>(s)][static_cast<size_t>(b)];
      const float a = alone.losses[static_cast<size_t>(s)][0];
      EXPECT_NEAR(f, a, 2e-5f * std::fabs(a)) << "model " << b << " step " << s;
      const float fr = fused.reg[static_cast<size_t>(s)][static_cast<size_t>(b)];
      const float ar = alone.reg[static_cast<size_t>(s)][0];
      EXPECT_NEAR(fr, ar, 2e-5f * std::fabs(ar) + 1e-9f) << "regularizer, model " << b;
    }
    expect_close(fused.grads[static_cast<size_t>(b)], alone.grads[0], 1e-4,
                 "gradients of model " + std::to_string(b));
    // Adam normalizes each gradient: a parameter may move by rounding-level gradients, so
    // compare to a small fraction of the largest lr.
    const std::vector<float>& fp = fused.params[static_cast<size_t>(b)];
    const std::vector<float>& ap = alone.params[0];
    ASSERT_EQ(fp.size(), ap.size());
    double worst = 0.0;
    for (size_t i = 0; i < fp.size(); ++i)
      worst = std::max(worst, std::fabs(double(fp[i]) - ap[i]));
    EXPECT_LE(worst, 0.05 * 2e-3) << "parameters of model " << b;
  }
  // Different learning rates train differently: the comparison is not vacuous.
  EXPECT_NE(fused.losses.back()[0], fused.losses.back()[2]);
  if (name == "pointnet_cls_ft") {
    EXPECT_GT(fused.reg[0][0], 0.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PointNetArray,
                         ::testing::Values("pointnet_cls", "pointnet_cls_ft"));

TEST(PointNet, StateDictNamesAreFxia22s) {
  auto model =
      make_model("pointnet_cls_ft",
                 {.B = 2, .batch_size = 4, .sample_shape = Shape{kPoints, 3}, .num_classes = 5});
  std::vector<std::string> names;
  for (const Param& p : model->params()) names.push_back(p.name);
  for (const ModelBuffer& b : model->buffers()) names.push_back(b.name);
  for (const char* expected :
       {"feat.stn.conv1.weight", "feat.stn.fc3.bias", "feat.stn.bn5.running_var",
        "feat.conv1.weight", "feat.fstn.conv3.weight", "feat.bn3.num_batches_tracked", "fc1.weight",
        "bn2.running_mean", "fc3.weight"})
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  for (const Param& p : model->params()) {
    if (p.name == "feat.conv2.weight") {
      EXPECT_EQ(p.value.shape, (Shape{2, 64, 128}));  // [B, in, out]; PyTorch's [128, 64, 1]
      EXPECT_TRUE(p.torch_transposed && p.torch_kernel1);
      EXPECT_EQ(p.fan_in, 64);
    }
  }
  // As PyTorch counts fxia22's PointNetCls(k=5, feature_transform=True).
  EXPECT_EQ(model->params_per_model(), 3462478);
}

TEST(PointNet, PointsOfTheWrongShapeAreRefused) {
  auto model = make_model(
      "pointnet_cls",
      {.B = 2, .batch_size = 4, .sample_shape = Shape{kPoints, 3}, .num_classes = kShapesClasses});
  std::vector<float> wrong(4 * 16 * 3, 0.0f);
  std::vector<int32_t> labels(4, 0);
  EXPECT_THROW(model->forward(TensorView(wrong.data(), Shape{4, 16, 3}),
                              IndexView(labels.data(), Shape{4}), true),
               Error);
  std::vector<float> flat(4 * kPoints * 3, 0.0f);
  EXPECT_THROW(model->forward(TensorView(flat.data(), Shape{4, 3, kPoints}),
                              IndexView(labels.data(), Shape{4}), true),
               Error);
  // Clouds of xyz only: samples [L, 4] do not fit the T-Net's 3x3 transform.
  EXPECT_THROW(
      make_model("pointnet_cls",
                 {.B = 1, .batch_size = 4, .sample_shape = Shape{kPoints, 4}, .num_classes = 10}),
      Error);
}

}  // namespace
}  // namespace hfta
