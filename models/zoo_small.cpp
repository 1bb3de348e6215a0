// The small models: an MLP and a LeNet-style CNN (the first two benchmarks of the project).
#include "models/model.h"

namespace hfta {

// MLP: flat features -> 256 -> 256 -> classes, ReLU between.
Value define_mlp(Net& n, Value images, int64_t num_classes) {
  Value h = n.relu(n.linear(images, "fc1", {.out_features = 256}));
  h = n.relu(n.linear(h, "fc2", {.out_features = 256}));
  return n.linear(h, "fc3", {.out_features = num_classes});
}

// LeNet-style CNN: conv5x5 32 pad 2, maxpool 2, conv5x5 64 pad 2, maxpool 2, fc 1024, fc classes,
// ReLU after each conv and the first fc. Each conv's ReLU runs after its pool: max(0, x) is
// monotone, so maxpool(relu(x)) == relu(maxpool(x)) exactly, with the same gradients (the pool
// routes dy to the same argmax, and ReLU zeroes it exactly when that max is <= 0), and the ReLU
// touches a quarter of the values.
Value define_lenet(Net& n, Value images, int64_t num_classes) {
  Value h = n.conv2d(images, "conv1", {.out_channels = 32, .kernel = 5, .pad = 2});
  h = n.relu(n.max_pool2d(h, 2));
  h = n.conv2d(h, "conv2", {.out_channels = 64, .kernel = 5, .pad = 2});
  h = n.flatten(n.relu(n.max_pool2d(h, 2)));
  h = n.relu(n.linear(h, "fc1", {.out_features = 1024}));
  return n.linear(h, "fc2", {.out_features = num_classes});
}

}  // namespace hfta
