// MobileNetV2 (width 1.0) as torchvision builds it (and HFTA's examples/mobilenet/v2.py trains
// it): a 3x3/2 stem, seventeen inverted residual blocks (1x1 expansion, 3x3 depthwise, 1x1
// linear projection, a residual add where stride is 1 and the widths agree), a 1x1 conv to 1280
// channels, global average pooling, dropout 0.2 and a linear classifier. Input channels follow
// the data. Names are torchvision's state_dict names ("features.3.conv.1.0.weight").
// Init as torchvision: convs kaiming_normal_(fan_out), BatchNorm weight 1 bias 0, the classifier
// N(0, 0.01) with zero bias.
#include <string>

#include "models/model.h"

namespace hfta {

namespace {

// Conv2dNormActivation: conv (no bias) "0", BatchNorm "1", ReLU6 (no parameters) "2".
Value conv_bn_relu6(Net& n, Value x, int64_t out, int64_t kernel, int64_t stride, int64_t groups) {
  Value h = n.conv2d(x, "0",
                     {.out_channels = out,
                      .kernel = kernel,
                      .stride = stride,
                      .pad = (kernel - 1) / 2,
                      .groups = groups,
                      .bias = false,
                      .weight_init = Init::kaiming_normal_fan_out()});
  return n.relu6(n.batchnorm2d(h, "1"));
}

Value inverted_residual(Net& n, Value x, int64_t out, int64_t stride, int64_t expand_ratio) {
  const int64_t in = n.features(x)[0], hidden = in * expand_ratio;
  auto conv = n.scope("conv");
  int index = 0;
  Value h = x;
  if (expand_ratio != 1) {
    auto s = n.scope(std::to_string(index++));
    h = conv_bn_relu6(n, h, hidden, 1, 1, 1);
  }
  {
    auto s = n.scope(std::to_string(index++));
    h = conv_bn_relu6(n, h, hidden, 3, stride, hidden);
  }
  h = n.conv2d(h, std::to_string(index++),
               {.out_channels = out,
                .kernel = 1,
                .bias = false,
                .weight_init = Init::kaiming_normal_fan_out()});
  h = n.batchnorm2d(h, std::to_string(index++));
  return stride == 1 && in == out ? n.add(x, h) : h;
}

}  // namespace

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
      h = conv_bn_relu6(n, images, 32, 3, 2, 1);
    }
    for (const Stage& st : stages)
      for (int64_t r = 0; r < st.repeats; ++r) {
        auto s = n.scope(std::to_string(index++));
        h = inverted_residual(n, h, st.channels, r == 0 ? st.stride : 1, st.expand);
      }
    auto s = n.scope(std::to_string(index));
    h = conv_bn_relu6(n, h, 1280, 1, 1, 1);
  }
  h = n.dropout(n.flatten(n.adaptive_avg_pool2d(h, 1, 1)), 0.2f);
  auto classifier = n.scope("classifier");
  return n.linear(h, "1",
                  {.out_features = num_classes,
                   .weight_init = Init::normal(0.01f),
                   .bias_init = Init::constant(0.0f)});
}

}  // namespace hfta
