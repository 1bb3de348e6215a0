// PointNet classification as HFTA's examples/pointnet trains it (fxia22's pointnet.pytorch
// PointNetCls): an input T-Net (STN3d) predicts a 3x3 transform of each cloud; shared per-point
// MLPs (Conv1d kernel 1) 3 -> 64 -> 128 -> 1024 with BatchNorm; a max over the points; a
// classifier 1024 -> 512 -> 256 -> k with BatchNorm, ReLU and dropout 0.3 before bn2. The
// feature-transform variant adds a T-Net on the 64-d point features (STNkd(64)) and its
// regularizer mean_s ||I - A A^T||_F * 0.001 to the loss (fxia22's train_classification.py).
// log_softmax + nll_loss is the cross-entropy the classifier Model adds.
// Names are that module's state_dict names ("feat.stn.conv1.weight", "fc1.weight",
// "bn1.running_mean"); init is PyTorch's default (Conv1d and Linear U(+-1/sqrt(fan_in)),
// BatchNorm weight 1, bias 0).
// define_pointnet_seg is fxia22's PointNetDenseCls (part segmentation): per-point features
// [1088] -> 512 -> 256 -> 128 -> parts, per-point logits [L, parts] for point_cross_entropy
// (the Model's ModelTask::kSegment; its regularizer is added as for classification, as in fxia22's
// and HFTA's train_segmentation.py).
// Samples are [L, 3] clouds (points x xyz), i.e. the transpose of PyTorch's [3, L] input.
#include <string>

#include "models/model.h"

namespace hfta {

namespace {

Value conv_bn_relu(Net& n, Value x, int i, int64_t out, bool relu = true) {
  const std::string s = std::to_string(i);
  Value h = n.batchnorm1d(n.conv1d(x, "conv" + s, {.out_features = out}), "bn" + s);
  return relu ? n.relu(h) : h;
}

// STN3d / STNkd: per-cloud k x k transform, fc3's output plus the identity.
Value tnet(Net& n, Value x, int64_t k) {
  Value h = conv_bn_relu(n, x, 1, 64);
  h = conv_bn_relu(n, h, 2, 128);
  h = conv_bn_relu(n, h, 3, 1024);
  h = n.max_over_points(h);
  h = n.relu(n.batchnorm1d(n.linear(h, "fc1", {.out_features = 512}), "bn4"));
  h = n.relu(n.batchnorm1d(n.linear(h, "fc2", {.out_features = 256}), "bn5"));
  return n.add_identity(n.linear(h, "fc3", {.out_features = k * k}), k);
}

// PointNetfeat: the global feature [1024] or, for segmentation (global_feat = false), each
// point's [1088]: the repeated global feature, then the point's 64-d feature (torch.cat order).
Value pointnet_feat(Net& n, Value points, bool feature_transform, bool global_feat) {
  auto feat = n.scope("feat");
  Value trans;
  {
    auto stn = n.scope("stn");
    trans = tnet(n, points, 3);
  }
  Value x = conv_bn_relu(n, n.bmm(points, trans), 1, 64);
  if (feature_transform) {
    Value trans_feat;
    {
      auto fstn = n.scope("fstn");
      trans_feat = tnet(n, x, 64);
    }
    x = n.bmm(x, trans_feat);
    n.transform_regularizer(trans_feat, 0.001f);
  }
  const Value pointfeat = x;
  x = conv_bn_relu(n, x, 2, 128);
  x = conv_bn_relu(n, x, 3, 1024, /*relu=*/false);
  const Value global = n.max_over_points(x);
  if (global_feat) return global;
  return n.concat({n.repeat_points(global, n.features(points)[0]), pointfeat});
}

Value pointnet_cls(Net& n, Value points, int64_t num_classes, bool feature_transform) {
  const Value global = pointnet_feat(n, points, feature_transform, true);
  Value h = n.relu(n.batchnorm1d(n.linear(global, "fc1", {.out_features = 512}), "bn1"));
  h = n.linear(h, "fc2", {.out_features = 256});
  h = n.relu(n.batchnorm1d(n.dropout(h, 0.3f), "bn2"));
  return n.linear(h, "fc3", {.out_features = num_classes});
}

}  // namespace

Value define_pointnet_cls(Net& n, Value points, int64_t num_classes) {
  return pointnet_cls(n, points, num_classes, false);
}

Value define_pointnet_cls_ft(Net& n, Value points, int64_t num_classes) {
  return pointnet_cls(n, points, num_classes, true);
}

Value define_pointnet_seg(Net& n, Value points, int64_t num_parts, bool feature_transform) {
  Value x = pointnet_feat(n, points, feature_transform, false);
  x = conv_bn_relu(n, x, 1, 512);
  x = conv_bn_relu(n, x, 2, 256);
  x = conv_bn_relu(n, x, 3, 128);
  return n.conv1d(x, "conv4", {.out_features = num_parts});
}

Value define_pointnet_seg(Net& n, Value points, int64_t num_parts) {
  return define_pointnet_seg(n, points, num_parts, false);
}

Value define_pointnet_seg_ft(Net& n, Value points, int64_t num_parts) {
  return define_pointnet_seg(n, points, num_parts, true);
}

}  // namespace hfta
