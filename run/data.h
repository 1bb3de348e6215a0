// The datasets the workflows train on: Fashion-MNIST from its IDX files, or synthetic data shaped
// for the model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "datasets/dataset.h"

namespace hfta {

// The names load_data() knows.
std::vector<std::string> dataset_names();

// Part segmentation's evaluation: the parts of each class (its shapes' IoU is over them) and
// the class of each test shape. Empty for other data.
struct PartTable {
  std::vector<std::vector<int32_t>> parts_of_class;
  std::vector<int32_t> test_classes;
};

struct Data {
  Dataset train, test;
  PartTable parts;  // per-point labels only
};

// `dataset` is "fashion-mnist" (from `dir`, empty = Debian's directory), "cifar10" (the binary
// batches in `dir`) or "synthetic"
// (train_size and test_size samples of `sample_shape` in `num_classes` classes, from `seed`);
// point clouds: "shapes" (procedural, train_size and test_size clouds) or "shapenet-part" (from
// `dir`), both of sample_shape[0] points when sample_shape is [L, 3], else 1024.
// With `per_point_labels` (a segmentation model) the point clouds' labels are their part labels
// ([size, L], num_classes = the parts) and `parts` is filled.
// Throws hfta::Error naming an unknown dataset or a missing file.
Data load_data(const std::string& dataset, const std::string& dir, const Shape& sample_shape,
               int64_t num_classes, int64_t train_size, int64_t test_size, uint64_t seed,
               bool per_point_labels = false);

// `data` with every image resized to side x side, bilinear with half-pixel centers (PyTorch's
// interpolate(mode="bilinear", align_corners=False), which is also torchvision's Resize when
// upsampling): for a 64x64 DCGAN on 28x28 Fashion-MNIST.
Dataset resize_images(const Dataset& data, int64_t side);

}  // namespace hfta
