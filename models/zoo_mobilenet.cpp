// MobileNetV2 (width 1.0) as torchvision builds it (and HFTA's examples/mobilenet/v2.py trains
// it): a 3x3/2 stem, seventeen inverted residual blocks (1x1 expansion, 3x3 depthwise, 1x1
// linear projection, a residual add where stride is 1 and the widths agree), a 1x1 conv to 1280
// channels, global average pooling, dropout 0.2 and a linear classifier. Input channels follow
// the data. Names are torchvision's state_dict names ("features.3.conv.1.0.weight").
// Init as torchvision: convs kaiming_normal_(fan_out), BatchNorm weight 1 bias 0, the classifier
// N(0, 0.01) with zero bias.
//
// MobileNetV3 small and large (width 1.0, dilation 1) as torchvision 0.14 builds them
// (torchvision/models/mobilenetv3.py; HFTA's examples/mobilenet trains them too): a 3x3/2 stem
// with Hardswish, inverted residual blocks from a config table (1x1 expansion where the width
// grows, kxk depthwise, optional squeeze-and-excitation, 1x1 linear projection, residual where
// stride is 1 and widths agree; ReLU or Hardswish), a 1x1 conv to 6x the last width, global
// average pooling, then Linear(1024 small / 1280 large), Hardswish, Dropout(0.2) and Linear.
// BatchNorm eps 0.001, momentum 0.01. Same inits as V2, conv biases (SE) zero. Input channels
// follow the data, as for V2.
#include <algorithm>
#include <string>
#include <vector>

#include "models/model.h"

namespace hfta {

namespace {

enum class Act { kNone, kRelu, kRelu6, kHardswish };

Value activate(Net& n, Value x, Act act) {
  switch (act) {
    case Act::kRelu:
      return n.relu(x);
    case Act::kRelu6:
      return n.relu6(x);
    case Act::kHardswish:
      return n.hardswish(x);
    case Act::kNone:
      break;
  }
  return x;
}

// torchvision's Conv2dNormActivation: conv (no bias) "0", BatchNorm "1" (V2: eps 1e-5, momentum
// 0.1; V3: 0.001, 0.01), the activation (no parameters) "2".
Value conv_bn_act(Net& n, Value x, int64_t out, int64_t kernel, int64_t stride, int64_t groups,
                  Act act, double eps = 1e-5, double momentum = 0.1) {
  Value h = n.conv2d(x, "0",
                     {.out_channels = out,
                      .kernel = kernel,
                      .stride = stride,
                      .pad = (kernel - 1) / 2,
                      .groups = groups,
                      .bias = false,
                      .weight_init = Init::kaiming_normal_fan_out()});
  return activate(n, n.batchnorm2d(h, "1", eps, momentum), act);
}

Value inverted_residual(Net& n, Value x, int64_t out, int64_t stride, int64_t expand_ratio) {
  const int64_t in = n.features(x)[0], hidden = in * expand_ratio;
  auto conv = n.scope("conv");
  int index = 0;
  Value h = x;
  if (expand_ratio != 1) {
    auto s = n.scope(std::to_string(index++));
    h = conv_bn_act(n, h, hidden, 1, 1, 1, Act::kRelu6);
  }
  {
    auto s = n.scope(std::to_string(index++));
    h = conv_bn_act(n, h, hidden, 3, stride, hidden, Act::kRelu6);
  }
  h = n.conv2d(h, std::to_string(index++),
               {.out_channels = out,
                .kernel = 1,
                .bias = false,
                .weight_init = Init::kaiming_normal_fan_out()});
  h = n.batchnorm2d(h, std::to_string(index++));
  return stride == 1 && in == out ? n.add(x, h) : h;
}

// ---- MobileNetV3 ----------------------------------------------------------------------------

// MobileNetV3's BatchNorm: torchvision builds it with eps 0.001 and momentum 0.01.
constexpr double kV3Eps = 1e-3, kV3Momentum = 0.01;

// torchvision's _make_divisible(v, 8): v rounded to the nearest multiple of 8, at least 8, and
// never more than 10% below v.
int64_t make_divisible(int64_t v) {
  int64_t rounded = std::max<int64_t>(8, (v + 4) / 8 * 8);
  if (rounded * 10 < v * 9) rounded += 8;
  return rounded;
}

// SqueezeExcitation(channels, squeeze) with ReLU and Hardsigmoid: x * hardsigmoid(fc2(relu(fc1(
// avgpool(x))))); fc1, fc2 are 1x1 convs with bias.
Value squeeze_excitation(Net& n, Value x, int64_t squeeze) {
  const int64_t channels = n.features(x)[0];
  auto conv1x1 = [&n](Value v, const char* name, int64_t out) {
    return n.conv2d(v, name,
                    {.out_channels = out,
                     .kernel = 1,
                     .weight_init = Init::kaiming_normal_fan_out(),
                     .bias_init = Init::constant(0.0f)});
  };
  Value s = n.relu(conv1x1(n.adaptive_avg_pool2d(x, 1, 1), "fc1", squeeze));
  return n.scale_channels(x, n.hardsigmoid(conv1x1(s, "fc2", channels)));
}

// One row of torchvision's inverted_residual_setting (width 1.0, dilation 1).
struct BlockConfig {
  int64_t kernel, expanded, out;
  bool se, hardswish;
  int64_t stride;
};

Value inverted_residual_v3(Net& n, Value x, const BlockConfig& c) {
  const int64_t in = n.features(x)[0];
  const Act act = c.hardswish ? Act::kHardswish : Act::kRelu;
  auto block = n.scope("block");
  int index = 0;
  Value h = x;
  if (c.expanded != in) {
    auto s = n.scope(std::to_string(index++));
    h = conv_bn_act(n, h, c.expanded, 1, 1, 1, act, kV3Eps, kV3Momentum);
  }
  {
    auto s = n.scope(std::to_string(index++));
    h = conv_bn_act(n, h, c.expanded, c.kernel, c.stride, c.expanded, act, kV3Eps, kV3Momentum);
  }
  if (c.se) {
    auto s = n.scope(std::to_string(index++));
    h = squeeze_excitation(n, h, make_divisible(c.expanded / 4));
  }
  {
    auto s = n.scope(std::to_string(index++));
    h = conv_bn_act(n, h, c.out, 1, 1, 1, Act::kNone, kV3Eps, kV3Momentum);
  }
  return c.stride == 1 && in == c.out ? n.add(h, x) : h;
}

Value mobilenetv3(Net& n, Value images, int64_t num_classes, const std::vector<BlockConfig>& blocks,
                  int64_t last_channel) {
  Value h;
  {
    auto features = n.scope("features");
    int index = 0;
    {
      auto s = n.scope(std::to_string(index++));
      h = conv_bn_act(n, images, 16, 3, 2, 1, Act::kHardswish, kV3Eps, kV3Momentum);
    }
    for (const BlockConfig& c : blocks) {
      auto s = n.scope(std::to_string(index++));
      h = inverted_residual_v3(n, h, c);
    }
    auto s = n.scope(std::to_string(index));
    h = conv_bn_act(n, h, 6 * blocks.back().out, 1, 1, 1, Act::kHardswish, kV3Eps, kV3Momentum);
  }
  h = n.flatten(n.adaptive_avg_pool2d(h, 1, 1));
  auto classifier = n.scope("classifier");
  const Net::LinearSpec torchvision_linear{.weight_init = Init::normal(0.01f),
                                           .bias_init = Init::constant(0.0f)};
  Net::LinearSpec hidden = torchvision_linear, logits = torchvision_linear;
  hidden.out_features = last_channel;
  logits.out_features = num_classes;
  h = n.dropout(n.hardswish(n.linear(h, "0", hidden)), 0.2f);
  return n.linear(h, "3", logits);
}

}  // namespace

Value define_mobilenetv3_small(Net& n, Value images, int64_t num_classes) {
  // kernel, expanded, out, SE, Hardswish (else ReLU), stride
  const std::vector<BlockConfig> blocks = {
      {3, 16, 16, true, false, 2}, {3, 72, 24, false, false, 2}, {3, 88, 24, false, false, 1},
      {5, 96, 40, true, true, 2},  {5, 240, 40, true, true, 1},  {5, 240, 40, true, true, 1},
      {5, 120, 48, true, true, 1}, {5, 144, 48, true, true, 1},  {5, 288, 96, true, true, 2},
      {5, 576, 96, true, true, 1}, {5, 576, 96, true, true, 1}};
  return mobilenetv3(n, images, num_classes, blocks, 1024);
}

Value define_mobilenetv3_large(Net& n, Value images, int64_t num_classes) {
  const std::vector<BlockConfig> blocks = {
      {3, 16, 16, false, false, 1}, {3, 64, 24, false, false, 2}, {3, 72, 24, false, false, 1},
      {5, 72, 40, true, false, 2},  {5, 120, 40, true, false, 1}, {5, 120, 40, true, false, 1},
      {3, 240, 80, false, true, 2}, {3, 200, 80, false, true, 1}, {3, 184, 80, false, true, 1},
      {3, 184, 80, false, true, 1}, {3, 480, 112, true, true, 1}, {3, 672, 112, true, true, 1},
      {5, 672, 160, true, true, 2}, {5, 960, 160, true, true, 1}, {5, 960, 160, true, true, 1}};
  return mobilenetv3(n, images, num_classes, blocks, 1280);
}

Value define_mobilenetv2(Net& n, Value images, int64_t num_classes) {
  struct Stage {
    int64_t expand, channels, repeats, stride;
  };
  const Stage stages[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                          {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  Value h;
  {
    auto features = n.scope("features");
    int index = 0;
    {
      auto s = n.scope(std::to_string(index++));
      h = conv_bn_act(n, images, 32, 3, 2, 1, Act::kRelu6);
    }
    for (const Stage& st : stages)
      for (int64_t r = 0; r < st.repeats; ++r) {
        auto s = n.scope(std::to_string(index++));
        h = inverted_residual(n, h, st.channels, r == 0 ? st.stride : 1, st.expand);
      }
    auto s = n.scope(std::to_string(index));
    h = conv_bn_act(n, h, 1280, 1, 1, 1, Act::kRelu6);
  }
  h = n.dropout(n.flatten(n.adaptive_avg_pool2d(h, 1, 1)), 0.2f);
  auto classifier = n.scope("classifier");
  return n.linear(h, "1",
                  {.out_features = num_classes,
                   .weight_init = Init::normal(0.01f),
                   .bias_init = Init::constant(0.0f)});
}

}  // namespace hfta
