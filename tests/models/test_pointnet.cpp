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

// The segmentation ops through a small net (per-point features joined with the repeated global
// feature, per-point cross-entropy): replica b of a fused net gives model b's loss and gradients.
struct SegNet {
  std::unique_ptr<Net> net;
  Value points, labels, loss;
};

SegNet seg_net(const std::vector<int64_t>& ids, int64_t classes) {
  SegNet s;
  s.net = std::make_unique<Net>(NetSpec{
      .B = static_cast<int64_t>(ids.size()), .capacity = kBatch, .seed = 9, .model_ids = ids});
  Net& n = *s.net;
  s.points = n.input(Shape{kPoints, 3});
  s.labels = n.index_input(Shape{kPoints});
  Value x = n.relu(n.batchnorm1d(n.conv1d(s.points, "conv1", {.out_features = 16}), "bn1"));
  Value t = n.add_identity(n.linear(n.max_over_points(x), "fc", {.out_features = 16 * 16}), 16);
  x = n.bmm(x, t);
  Value g = n.max_over_points(n.batchnorm1d(n.conv1d(x, "conv2", {.out_features = 32}), "bn2"));
  Value h = n.concat({x, n.repeat_points(g, kPoints)});
  h = n.relu(n.batchnorm1d(n.conv1d(h, "conv3", {.out_features = 16}), "bn3"));
  s.loss = n.point_cross_entropy(n.conv1d(h, "conv4", {.out_features = classes}), s.labels);
  n.transform_regularizer(t, 0.01f);
  n.finalize();
  return s;
}

TEST(PointNet, SegmentationOpsGiveEachReplicaItsOwnGradients) {
  constexpr int64_t kClasses = 5;
  PointCloudSet data = make_shapes(Split::kTrain, kBatch, kPoints, 3);
  std::vector<int32_t> labels(static_cast<size_t>(kBatch * kPoints));
  for (size_t i = 0; i < labels.size(); ++i)
    labels[i] = data.part_labels[i] % static_cast<int32_t>(kClasses);
  const TensorView points(data.images.data(), Shape{kBatch, kPoints, 3});
  auto run = [&](SegNet& s) {
    s.net->set_input(s.points, points);
    s.net->set_input(s.labels, IndexView(labels.data(), Shape{kBatch, kPoints}));
    s.net->forward(true);
    s.net->zero_grad();
    s.net->backward();
  };
  SegNet fused = seg_net({0, 1, 2}, kClasses);
  run(fused);
  for (int64_t b = 0; b < 3; ++b) {
    SegNet alone = seg_net({b}, kClasses);
    run(alone);
    const float f = fused.net->value(fused.loss)[b], a = alone.net->value(alone.loss)[0];
    EXPECT_NEAR(f, a, 2e-5f * std::fabs(a)) << "model " << b;
    ASSERT_EQ(fused.net->params().size(), alone.net->params().size());
    for (size_t i = 0; i < alone.net->params().size(); ++i) {
      const TensorView fg = fused.net->params()[i].grad.replica(b);
      const TensorView ag = alone.net->params()[i].grad.replica(0);
      expect_close(std::vector<float>(fg.data, fg.data + fg.numel()),
                   std::vector<float>(ag.data, ag.data + ag.numel()), 1e-4,
                   alone.net->params()[i].name + " of model " + std::to_string(b));
    }
  }
  EXPECT_NE(fused.net->value(fused.loss)[0], fused.net->value(fused.loss)[1]);
}

// fxia22's PointNetDenseCls (with the feature transform) on a Net: fused replicas == singles.
TEST(PointNet, SegmentationModelGivesEachReplicaItsOwnGradients) {
  constexpr int64_t kParts = kShapesParts;
  PointCloudSet data = make_shapes(Split::kTrain, kBatch, kPoints, 4);
  const TensorView points(data.images.data(), Shape{kBatch, kPoints, 3});
  const IndexView labels(data.part_labels.data(), Shape{kBatch, kPoints});
  struct Built {
    std::unique_ptr<Net> net;
    Value loss;
  };
  auto build_and_run = [&](const std::vector<int64_t>& ids) {
    Built r;
    r.net = std::make_unique<Net>(NetSpec{
        .B = static_cast<int64_t>(ids.size()), .capacity = kBatch, .seed = 2, .model_ids = ids});
    Net& n = *r.net;
    Value x = n.input(Shape{kPoints, 3});
    Value y = n.index_input(Shape{kPoints});
    r.loss = n.point_cross_entropy(define_pointnet_seg(n, x, kParts, true), y);
    n.finalize();
    n.set_input(x, points);
    n.set_input(y, labels);
    n.forward(true);
    n.zero_grad();
    n.backward();
    return r;
  };
  Built fused = build_and_run({0, 1});
  for (int64_t b = 0; b < 2; ++b) {
    Built alone = build_and_run({b});
    const float f = fused.net->value(fused.loss)[b], a = alone.net->value(alone.loss)[0];
    EXPECT_NEAR(f, a, 2e-5f * std::fabs(a)) << "model " << b;
    std::vector<float> fg, ag;
    for (size_t i = 0; i < alone.net->params().size(); ++i) {
      const TensorView fv = fused.net->params()[i].grad.replica(b);
      const TensorView av = alone.net->params()[i].grad.replica(0);
      fg.insert(fg.end(), fv.data, fv.data + fv.numel());
      ag.insert(ag.end(), av.data, av.data + av.numel());
    }
    expect_close(fg, ag, 1e-4, "gradients of model " + std::to_string(b));
  }
  EXPECT_EQ(fused.net->params()[fused.net->params().size() - 2].name, "conv4.weight");
}

// pointnet_seg as a Model (ModelTask::kSegment): labels [n, L] from a Loader over the shapes'
// part labels; a training step under chunk:1 gives each model the fused array's loss, and an
// evaluation forward gives the same per-point logits (point_logits(), which IoU reads) and
// correct points, counted as the arg max of those logits.
TEST(PointNet, SegmentationModelRunsUnderEveryPlan) {
  const Dataset data = with_part_labels(make_shapes(Split::kTrain, 2 * kBatch, kPoints, 6));
  Loader loader(data, {.batch_size = kBatch, .shuffle = false});
  Batch batch = loader.make_batch();
  ASSERT_TRUE(loader.next(batch));
  ASSERT_EQ(batch.labels().shape, (Shape{kBatch, kPoints}));
  auto build = [](const ExecutionPlan& plan) {
    return make_model("pointnet_seg", {.B = 3,
                                       .batch_size = kBatch,
                                       .seed = 4,
                                       .sample_shape = Shape{kPoints, 3},
                                       .num_classes = kShapesParts,
                                       .plan = plan});
  };
  auto fused = build(ExecutionPlan::fused()), chunked = build(ExecutionPlan::chunks(1));
  EXPECT_EQ(fused->task(), ModelTask::kSegment);
  EXPECT_EQ(fused->labels_per_sample(), kPoints);
  fused->train_step(batch.images(), batch.labels());
  chunked->train_step(batch.images(), batch.labels());
  for (int64_t b = 0; b < 3; ++b)
    EXPECT_NEAR(fused->losses()[b], chunked->losses()[b], 1e-5 * std::fabs(fused->losses()[b]));
  fused->forward(batch.images(), batch.labels(), false);
  chunked->forward(batch.images(), batch.labels(), false);
  const TensorView f = fused->point_logits(), c = chunked->point_logits();
  ASSERT_EQ(f.shape, (Shape{3, kBatch, kPoints, kShapesParts}));
  ASSERT_EQ(c.shape, f.shape);
  expect_close(std::vector<float>(f.data, f.data + f.numel()),
               std::vector<float>(c.data, c.data + c.numel()), 1e-4, "point logits");
  for (int64_t b = 0; b < 3; ++b) {
    int64_t right = 0;
    for (int64_t i = 0; i < kBatch * kPoints; ++i) {
      const float* row = f.data + (b * kBatch * kPoints + i) * kShapesParts;
      right += std::max_element(row, row + kShapesParts) - row == batch.label_data[i];
    }
    EXPECT_EQ(fused->correct()[b], right) << "model " << b;
    EXPECT_EQ(chunked->correct()[b], right) << "model " << b;
  }
  // Per-sample labels do not fit a segmentation model.
  std::vector<int32_t> one(kBatch, 0);
  EXPECT_THROW(fused->forward(batch.images(), IndexView(one.data(), Shape{kBatch}), false), Error);
}

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
