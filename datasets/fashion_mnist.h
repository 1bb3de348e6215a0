// Fashion-MNIST (Xiao et al. 2017): 28x28 grayscale clothing images, 10 classes,
// 60000 training and 10000 test samples, read from Debian's `dataset-fashion-mnist` files.
//
// Pixels are scaled to [0, 1] and normalized with the training set's statistics
// (mean 0.2860, std 0.3530), the values PyTorch examples use: x = (p / 255 - 0.2860) / 0.3530.
// Both splits use the training statistics, so the test split's mean is near, not exactly, 0.
#pragma once

#include <string>

#include "datasets/dataset.h"

namespace hfta {

inline constexpr const char* kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

// Reads <dir>/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] (the .gz name is tried first).
// Throws hfta::Error naming the file on a missing file (with the apt-get command that installs
// it), a malformed file, images that are not [n, 28, 28], labels outside [0, 10), or image and
// label counts that disagree (naming both files).
Dataset load_fashion_mnist(const std::string& dir = kFashionMnistDefaultDir,
                           Split split = Split::kTrain);

}  // namespace hfta
