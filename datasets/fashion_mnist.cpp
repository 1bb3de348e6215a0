#include "datasets/fashion_mnist.h"

#include <filesystem>

#include "core/parallel.h"
#include "datasets/idx.h"

namespace hfta {
namespace {

constexpr int kClasses = 10;
constexpr int64_t kSide = 28;

// The .gz file if present, else the uncompressed one; throws with the install hint otherwise.
std::string find_file(const std::string& dir, const std::string& stem) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string gz = (fs::path(dir) / (stem + ".gz")).string();
  const std::string plain = (fs::path(dir) / stem).string();
  if (fs::exists(gz, ec)) return gz;
  if (fs::exists(plain, ec)) return plain;
  if (!fs::is_directory(dir, ec))
    fail(
        "Fashion-MNIST directory '{}' does not exist: install the dataset with `apt-get install "
        "dataset-fashion-mnist` (it goes to {}), or pass the directory that holds {}.gz",
        dir, kFashionMnistDefaultDir, stem);
  fail(
      "Fashion-MNIST file '{}' (or '{}') is missing: install the dataset with `apt-get install "
      "dataset-fashion-mnist`, or pass a directory that holds all four files",
      gz, plain);
}

}  // namespace

Dataset load_fashion_mnist(const std::string& dir, Split split) {
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  const std::string images_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");

  IdxData images = read_idx(images_path);
  HFTA_CHECK(images.dims.size() == 3 && images.dims[1] == kSide && images.dims[2] == kSide,
             "Fashion-MNIST images file '{}' has dimensions [{}], expected [n, 28, 28]: is it an "
             "images file?",
             images_path, fmt::join(images.dims, ", "));
  IdxData labels = read_idx(labels_path);
  HFTA_CHECK(labels.dims.size() == 1,
             "Fashion-MNIST labels file '{}' has dimensions [{}], expected [n]: is it a labels "
             "file?",
             labels_path, fmt::join(labels.dims, ", "));
  HFTA_CHECK(images.dims[0] == labels.dims[0],
             "Fashion-MNIST images file '{}' holds {} images but labels file '{}' holds {} "
             "labels: the two files must come from the same split",
             images_path, images.dims[0], labels_path, labels.dims[0]);

  Dataset out;
  out.name = split == Split::kTrain ? "fashion-mnist-train" : "fashion-mnist-test";
  out.sample_shape = Shape{1, kSide, kSide};
  out.size = images.dims[0];
  out.num_classes = kClasses;
  out.labels.resize(static_cast<size_t>(out.size));
  for (int64_t i = 0; i < out.size; ++i) {
    HFTA_CHECK(labels.bytes[i] < kClasses,
               "Fashion-MNIST labels file '{}' has label {} at index {}, expected 0 to 9",
               labels_path, labels.bytes[i], i);
    out.labels[i] = labels.bytes[i];
  }
  // (p / 255 - mean) / std, folded into one multiply-add per pixel.
  const float scale = 1.0f / (255.0f * kFashionMnistStd);
  const float shift = -kFashionMnistMean / kFashionMnistStd;
  out.images.resize(images.bytes.size());
  const int64_t per_sample = kSide * kSide;
  parallel_for(out.size, [&](int64_t i) {
    const uint8_t* src = images.bytes.data() + i * per_sample;
    float* dst = out.images.data() + i * per_sample;
    for (int64_t j = 0; j < per_sample; ++j) dst[j] = src[j] * scale + shift;
  });
  return out;
}

}  // namespace hfta
