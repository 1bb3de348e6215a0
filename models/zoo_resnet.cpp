// ResNet-18 as torchvision builds it (and HFTA's examples/resnet trains it): a 7x7/2 stem, a
// 3x3/2 max pool, four stages of two BasicBlocks (64, 128, 256, 512 planes; the last three start
// with stride 2 and a 1x1 downsample on the skip path), global average pooling and a linear
// classifier. Input channels follow the data (conv1 takes C_in). Names are torchvision's
// state_dict names ("layer2.0.downsample.1.running_mean").
// Init as torchvision: convs kaiming_normal_(fan_out, relu), BatchNorm weight 1 bias 0, the
// classifier PyTorch's default Linear init.
#include <string>

#include "models/model.h"

namespace hfta {

namespace {

Net::Conv2dSpec conv(int64_t out, int64_t kernel, int64_t stride, int64_t pad) {
  return {.out_channels = out,
          .kernel = kernel,
          .stride = stride,
          .pad = pad,
          .bias = false,
          .weight_init = Init::kaiming_normal_fan_out()};
}

Value basic_block(Net& n, Value x, int64_t planes, int64_t stride) {
  const int64_t in_planes = n.features(x)[0];
  Value h = n.relu(n.batchnorm2d(n.conv2d(x, "conv1", conv(planes, 3, stride, 1)), "bn1"));
  h = n.batchnorm2d(n.conv2d(h, "conv2", conv(planes, 3, 1, 1)), "bn2");
  Value skip = x;
  if (stride != 1 || in_planes != planes) {
    auto downsample = n.scope("downsample");
    skip = n.batchnorm2d(n.conv2d(x, "0", conv(planes, 1, stride, 0)), "1");
  }
  return n.relu(n.add(h, skip));
}

}  // namespace

Value define_resnet18(Net& n, Value images, int64_t num_classes) {
  Value h = n.relu(n.batchnorm2d(n.conv2d(images, "conv1", conv(64, 7, 2, 3)), "bn1"));
  h = n.max_pool2d(h, 3, 2, 1);
  const int64_t planes[] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage) {
    auto layer = n.scope("layer" + std::to_string(stage + 1));
    for (int block = 0; block < 2; ++block) {
      auto index = n.scope(std::to_string(block));
      h = basic_block(n, h, planes[stage], stage > 0 && block == 0 ? 2 : 1);
    }
  }
  h = n.flatten(n.adaptive_avg_pool2d(h, 1, 1));
  return n.linear(h, "fc", {.out_features = num_classes});
}

}  // namespace hfta
