// A model of one's own, written against hfta's public API: a small CNN for 28x28 grey images.
// A model is a function that records its layers on a Net (models/net.h) from the images to the
// logits; hfta records it once for all B models of an array, so every layer below runs as one
// fused op for the B models, and each model is still exactly the model it would be alone.
// Parameter names follow PyTorch's state_dict of the same module, so an export loads there too:
//   nn.Sequential(conv1, ReLU, MaxPool2d(2), conv2, ReLU, MaxPool2d(2), Flatten, fc).
#pragma once

#include "models/model.h"
#include "models/net.h"

inline hfta::Value define_custom_cnn(hfta::Net& n, hfta::Value images, int64_t num_classes) {
  hfta::Value h = n.relu(n.conv2d(images, "conv1", {.out_channels = 16, .kernel = 3, .pad = 1}));
  h = n.max_pool2d(h, 2);  // 16 x 14 x 14
  h = n.relu(n.conv2d(h, "conv2", {.out_channels = 32, .kernel = 3, .pad = 1}));
  h = n.flatten(n.max_pool2d(h, 2));  // 32 x 7 x 7
  return n.linear(h, "fc", {.out_features = num_classes});
}

// The array's specification: B models of the custom CNN for Fashion-MNIST's 1 x 28 x 28 images
// and 10 classes, models with their own RNG streams (ids 0..B-1) from `seed`.
inline hfta::ModelSpec custom_cnn_spec(int64_t B, int64_t batch_size, uint64_t seed) {
  return {.B = B,
          .batch_size = batch_size,
          .seed = seed,
          .sample_shape = {1, 28, 28},
          .num_classes = 10};
}
