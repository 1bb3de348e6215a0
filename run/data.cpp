#include "run/data.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "datasets/cifar10.h"
#include "datasets/fashion_mnist.h"
#include "datasets/shapenet_part.h"
#include "datasets/shapes.h"
#include "datasets/synthetic.h"

namespace hfta {

std::vector<std::string> dataset_names() {
  return {"cifar10",   "fashion-mnist",  "shapenet-part", "shapes",
          "synthetic", "synthetic-text", "text",          "wikitext2"};
}

namespace {
// Points per cloud: the model's [L, 3] samples (--npoints), else PointNet's classification size.
int64_t points_per_cloud(const Shape& sample_shape) {
  return sample_shape.rank() == 2 && sample_shape[1] == 3 ? sample_shape[0] : 1024;
}
}  // namespace

Data load_data(const std::string& dataset, const std::string& dir, const Shape& sample_shape,
               int64_t num_classes, int64_t train_size, int64_t test_size, uint64_t seed,
               bool per_point_labels) {
  HFTA_CHECK(!per_point_labels || dataset == "shapes" || dataset == "shapenet-part",
             "--dataset {} has no part labels: a segmentation model trains on --dataset shapes "
             "or shapenet-part",
             dataset);
  // Point clouds as classification (class labels) or segmentation (part labels) data.
  auto clouds = [per_point_labels](const PointCloudSet& train, const PointCloudSet& test) {
    if (!per_point_labels) return Data{train, test};
    return Data{.train = with_part_labels(train),
                .test = with_part_labels(test),
                .parts = {.parts_of_class = test.parts_of_class, .test_classes = test.labels}};
  };
  // Text corpora feed language models (tasks/language_model/train_lm.h), not classifiers.
  HFTA_CHECK(dataset != "text" && dataset != "wikitext2" && dataset != "synthetic-text",
             "--dataset {} is text: train a language model on it (--model transformer)", dataset);
  if (dataset == "fashion-mnist") {
    std::string d = dir.empty() ? kFashionMnistDefaultDir : dir;
    return {load_fashion_mnist(d, Split::kTrain), load_fashion_mnist(d, Split::kTest)};
  }
  if (dataset == "cifar10") {
    HFTA_CHECK(!dir.empty(),
               "--dataset cifar10 needs --data-dir: the cifar-10-batches-bin folder of CIFAR-10's "
               "binary version (data_batch_1.bin ... data_batch_5.bin, test_batch.bin)");
    return {load_cifar10(dir, Split::kTrain), load_cifar10(dir, Split::kTest)};
  }
  if (dataset == "shapes") {  // procedural clouds of 10 classes: sizes as synthetic data's
    const int64_t L = points_per_cloud(sample_shape);
    return clouds(make_shapes(Split::kTrain, train_size, L, seed),
                  make_shapes(Split::kTest, test_size, L, seed));
  }
  if (dataset == "shapenet-part") {  // class labels of ShapeNet part's clouds
    HFTA_CHECK(!dir.empty(),
               "--dataset shapenet-part needs --data-dir: the shapenetcore_partanno_segmentation_"
               "benchmark_v0 folder (synsetoffset2category.txt, train_test_split/)");
    const ShapeNetPartOptions options{.npoints = points_per_cloud(sample_shape), .seed = seed};
    return clouds(load_shapenet_part(dir, Split::kTrain, options),
                  load_shapenet_part(dir, Split::kTest, options));
  }
  HFTA_CHECK(dataset == "synthetic", "--dataset {} is not known: choose {}", dataset,
             fmt::join(dataset_names(), " or "));
  return {make_synthetic(sample_shape, static_cast<int>(num_classes), train_size, seed,
                         {.sample_stream = 0}),
          make_synthetic(sample_shape, static_cast<int>(num_classes), test_size, seed,
                         {.sample_stream = 1})};
}

Dataset resize_images(const Dataset& data, int64_t side) {
  HFTA_CHECK(data.sample_shape.rank() == 3 && side >= 1,
             "resize_images: {} has samples {}, not [C, H, W] images (or size {} < 1)", data.name,
             data.sample_shape.str(), side);
  const int64_t C = data.sample_shape[0], H = data.sample_shape[1], W = data.sample_shape[2];
  Dataset out = data;
  out.sample_shape = Shape{C, side, side};
  out.images.assign(static_cast<size_t>(data.size * C * side * side), 0.0f);
  // Source coordinate of output pixel o: (o + 0.5) * in / out - 0.5, clamped at 0.
  auto taps = [side](int64_t in, int64_t o, int64_t& i0, int64_t& i1, float& w1) {
    const double src = std::max(0.0, (o + 0.5) * static_cast<double>(in) / side - 0.5);
    i0 = std::min<int64_t>(static_cast<int64_t>(src), in - 1);
    i1 = std::min<int64_t>(i0 + 1, in - 1);
    w1 = static_cast<float>(src - static_cast<double>(i0));
  };
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < data.size * C; ++i) {
    const float* src = data.images.data() + i * H * W;
    float* dst = out.images.data() + i * side * side;
    for (int64_t y = 0; y < side; ++y) {
      int64_t y0, y1, x0, x1;
      float wy, wx;
      taps(H, y, y0, y1, wy);
      for (int64_t x = 0; x < side; ++x) {
        taps(W, x, x0, x1, wx);
        const float top = src[y0 * W + x0] * (1 - wx) + src[y0 * W + x1] * wx;
        const float bottom = src[y1 * W + x0] * (1 - wx) + src[y1 * W + x1] * wx;
        dst[y * side + x] = top * (1 - wy) + bottom * wy;
      }
    }
  }
  return out;
}

}  // namespace hfta
