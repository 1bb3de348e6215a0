// Initial weights against PyTorch's documented rules, with the bounds written out here as numbers
// (not computed by the code under test):
//   nn.Linear / nn.Conv2d default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias, with
//     fan_in = in_features, or in_channels / groups * kernel area for a conv;
//   torchvision ResNet / MobileNetV2 convs: kaiming_normal_(mode="fan_out"): N(0, 2 / fan_out),
//     fan_out = out_channels * kernel area; BatchNorm weight 1, bias 0, running mean 0, var 1;
//   MobileNetV2's classifier: N(0, 0.01^2), bias 0.
// A uniform sample of n values must stay inside the bound and reach close to it; a normal sample's
// standard deviation must be within a few standard errors of the rule's.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "models/model.h"

namespace hfta {
namespace {

struct Stats {
  double max_abs = 0, mean = 0, stddev = 0;
  int64_t n = 0;
};

Stats stats_of(const Model& m, const std::string& name) {
  for (const Param& p : m.params()) {
    if (p.name != name) continue;
    Stats s;
    TensorView v = p.value.replica(0);
    s.n = v.numel();
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < s.n; ++i) {
      s.max_abs = std::max(s.max_abs, std::fabs(static_cast<double>(v[i])));
      sum += v[i];
    }
    s.mean = sum / static_cast<double>(s.n);
    for (int64_t i = 0; i < s.n; ++i) sq += (v[i] - s.mean) * (v[i] - s.mean);
    s.stddev = std::sqrt(sq / static_cast<double>(s.n));
    return s;
  }
  ADD_FAILURE() << "no parameter " << name;
  return {};
}

// Uniform in [-bound, bound]: inside it, its maximum within 5% of it (n >= 60 makes a miss
// unlikely: P(all below 0.95 bound) = 0.95^n < 5e-2, and n is mostly far larger), and the
// standard deviation bound / sqrt(3) within 5 standard errors (a uniform sample's standard
// deviation has relative standard error sqrt(0.8 / (4n)), from its kurtosis 1.8).
void expect_uniform(const Model& m, const std::string& name, double bound) {
  SCOPED_TRACE(name);
  Stats s = stats_of(m, name);
  ASSERT_GE(s.n, 64);
  EXPECT_LE(s.max_abs, bound * (1 + 1e-6));
  EXPECT_GE(s.max_abs, 0.95 * bound);
  const double stddev = bound / std::sqrt(3.0);
  EXPECT_NEAR(s.stddev, stddev, 5 * stddev * std::sqrt(0.8 / (4.0 * static_cast<double>(s.n))));
}

// N(0, stddev^2): the sample's standard deviation within 5 standard errors (stddev / sqrt(2n)).
void expect_normal(const Model& m, const std::string& name, double stddev) {
  SCOPED_TRACE(name);
  Stats s = stats_of(m, name);
  ASSERT_GE(s.n, 100);
  EXPECT_NEAR(s.stddev, stddev, 5 * stddev / std::sqrt(2.0 * static_cast<double>(s.n)));
  EXPECT_NEAR(s.mean, 0.0, 5 * stddev / std::sqrt(static_cast<double>(s.n)));
}

void expect_constant(const Model& m, const std::string& name, float value) {
  SCOPED_TRACE(name);
  for (const Param& p : m.params())
    if (p.name == name) {
      for (int64_t i = 0; i < p.value.numel(); ++i) ASSERT_EQ(p.value[i], value);
      return;
    }
  ADD_FAILURE() << "no parameter " << name;
}

TEST(Init, LinearLayersUsePyTorchsDefaultBound) {
  auto mlp = make_model("mlp", {.B = 1, .batch_size = 1, .seed = 11});
  expect_uniform(*mlp, "fc1.weight", 0.0357142857);  // 1 / sqrt(784)
  expect_uniform(*mlp, "fc1.bias", 0.0357142857);
  expect_uniform(*mlp, "fc2.weight", 0.0625);  // 1 / sqrt(256)
  expect_uniform(*mlp, "fc2.bias", 0.0625);
}

TEST(Init, ConvFanInIncludesTheKernelArea) {
  auto lenet = make_model("lenet", {.B = 1, .batch_size = 1, .seed = 11});
  expect_uniform(*lenet, "conv1.weight", 0.2);           // 1 / sqrt(1 * 5 * 5)
  expect_uniform(*lenet, "conv2.weight", 0.0353553391);  // 1 / sqrt(32 * 5 * 5)
  expect_uniform(*lenet, "conv2.bias", 0.0353553391);
  expect_uniform(*lenet, "fc1.weight", 0.0178571429);  // 1 / sqrt(3136)
}

TEST(Init, ResNetFollowsTorchvision) {
  auto net = make_model("resnet18", {.B = 1, .batch_size = 2, .seed = 11});
  expect_normal(*net, "conv1.weight", 0.0252538136);           // sqrt(2 / (64 * 7 * 7))
  expect_normal(*net, "layer1.0.conv1.weight", 0.0589255651);  // sqrt(2 / (64 * 3 * 3))
  expect_normal(*net, "layer3.0.conv2.weight", 0.0294627825);  // sqrt(2 / (256 * 3 * 3))
  expect_normal(*net, "layer2.0.downsample.0.weight", 0.125);  // sqrt(2 / (128 * 1 * 1))
  expect_constant(*net, "layer4.1.bn2.weight", 1.0f);
  expect_constant(*net, "bn1.bias", 0.0f);
  expect_uniform(*net, "fc.weight", 0.0441941738);  // 1 / sqrt(512)
  for (const ModelBuffer& b : net->buffers()) {
    const float expected = b.name.ends_with("running_var") ? 1.0f : 0.0f;
    for (int64_t i = 0; i < b.value.numel(); ++i) ASSERT_EQ(b.value[i], expected) << b.name;
  }
}

TEST(Init, MobileNetV2FollowsTorchvision) {
  auto net = make_model("mobilenetv2", {.B = 1, .batch_size = 2, .seed = 11});
  expect_normal(*net, "features.0.0.weight", 0.0833333333);         // sqrt(2 / (32 * 3 * 3))
  expect_normal(*net, "features.2.conv.1.0.weight", 0.0481125224);  // depthwise: sqrt(2 / (96 * 9))
  expect_normal(*net, "features.18.0.weight", 0.0395284708);        // sqrt(2 / 1280)
  expect_normal(*net, "classifier.1.weight", 0.01);
  expect_constant(*net, "classifier.1.bias", 0.0f);
}

TEST(Init, MobileNetV3FollowsTorchvision) {
  for (const char* name : {"mobilenetv3_small", "mobilenetv3_large"}) {
    SCOPED_TRACE(name);
    auto net = make_model(name, {.B = 1, .batch_size = 2, .seed = 11});
    expect_normal(*net, "features.0.0.weight", 0.117851130);  // sqrt(2 / (16 * 3 * 3))
    expect_constant(*net, "features.0.1.weight", 1.0f);
    expect_constant(*net, "features.0.1.bias", 0.0f);
    expect_normal(*net, "classifier.0.weight", 0.01);
    expect_constant(*net, "classifier.0.bias", 0.0f);
    expect_normal(*net, "classifier.3.weight", 0.01);
    expect_constant(*net, "classifier.3.bias", 0.0f);
  }
  auto small = make_model("mobilenetv3_small", {.B = 1, .batch_size = 2, .seed = 11});
  // Squeeze-and-excitation's 1x1 convs: kaiming_normal_(fan_out) weights, zero biases.
  expect_normal(*small, "features.1.block.1.fc1.weight", 0.5);          // sqrt(2 / 8)
  expect_normal(*small, "features.1.block.1.fc2.weight", 0.353553391);  // sqrt(2 / 16)
  expect_constant(*small, "features.1.block.1.fc1.bias", 0.0f);
  expect_constant(*small, "features.1.block.1.fc2.bias", 0.0f);
  // Depthwise 5x5 over 96 channels: PyTorch's fan_out of a [96, 1, 5, 5] weight is 96 * 25.
  expect_normal(*small, "features.4.block.1.0.weight", 0.0288675135);  // sqrt(2 / (96 * 25))
}

TEST(Init, NamesAreTorchvisionStateDictNames) {
  auto resnet = make_model("resnet18", {.B = 1, .batch_size = 2, .seed = 1});
  std::map<std::string, int64_t> sizes;
  for (const Param& p : resnet->params()) sizes[p.name] = p.value.numel();
  for (const ModelBuffer& b : resnet->buffers()) sizes[b.name] = b.value.numel();
  // torchvision.models.resnet18(): 62 parameters and 60 buffers (3 per BatchNorm2d).
  EXPECT_EQ(resnet->params().size(), 62u);
  EXPECT_EQ(resnet->buffers().size(), 60u);
  EXPECT_EQ(sizes.at("layer2.0.downsample.1.running_mean"), 128);
  EXPECT_EQ(sizes.at("layer4.1.bn2.num_batches_tracked"), 1);
  EXPECT_EQ(sizes.at("conv1.weight"), 64 * 3 * 7 * 7);
  EXPECT_EQ(resnet->params_per_model(), 11181642);  // torchvision's count for 10 classes
  auto mobilenet = make_model("mobilenetv2", {.B = 1, .batch_size = 2, .seed = 1});
  EXPECT_EQ(mobilenet->params().size(), 158u);
  EXPECT_EQ(mobilenet->params_per_model(), 2236682);  // torchvision's count for 10 classes
  // torchvision.models.mobilenet_v3_small / _large(num_classes=10): parameter tensors, their
  // size, buffers (3 per BatchNorm2d), and a few names and shapes of their state_dicts.
  struct V3 {
    const char* name;
    size_t params, buffers;
    int64_t size;
  };
  for (const V3& v :
       {V3{"mobilenetv3_small", 142, 102, 1528106}, V3{"mobilenetv3_large", 174, 138, 4214842}}) {
    SCOPED_TRACE(v.name);
    auto net = make_model(v.name, {.B = 1, .batch_size = 2, .seed = 1});
    EXPECT_EQ(net->params().size(), v.params);
    EXPECT_EQ(net->buffers().size(), v.buffers);
    EXPECT_EQ(net->params_per_model(), v.size);
    std::map<std::string, int64_t> numel;
    for (const Param& p : net->params()) numel[p.name] = p.value.numel();
    for (const ModelBuffer& b : net->buffers()) numel[b.name] = b.value.numel();
    EXPECT_EQ(numel.at("features.0.0.weight"), 16 * 3 * 3 * 3);
    EXPECT_EQ(numel.at("features.0.1.num_batches_tracked"), 1);
    EXPECT_EQ(numel.at("classifier.3.weight"), 10 * (v.params == 142 ? 1024 : 1280));
  }
  auto small = make_model("mobilenetv3_small", {.B = 1, .batch_size = 2, .seed = 1});
  std::map<std::string, int64_t> numel;
  for (const Param& p : small->params()) numel[p.name] = p.value.numel();
  for (const ModelBuffer& b : small->buffers()) numel[b.name] = b.value.numel();
  EXPECT_EQ(numel.at("features.1.block.1.fc1.weight"), 8 * 16);  // (8, 16, 1, 1)
  EXPECT_EQ(numel.at("features.1.block.1.fc1.bias"), 8);
  EXPECT_EQ(numel.at("features.1.block.2.0.weight"), 16 * 16);
  EXPECT_EQ(numel.at("features.1.block.2.1.running_var"), 16);
  EXPECT_EQ(numel.at("features.12.0.weight"), 576 * 96);
  EXPECT_EQ(numel.at("classifier.0.weight"), 1024 * 576);
}

}  // namespace
}  // namespace hfta
