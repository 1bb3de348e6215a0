// CIFAR-10 (Krizhevsky 2009): 32x32 colour images, 10 classes, 50000 training and 10000 test
// samples, read from the "CIFAR-10 binary version" (cifar-10-binary.tar.gz from
// https://www.cs.toronto.edu/~kriz/cifar.html, which unpacks to cifar-10-batches-bin/).
//
// Files: data_batch_1.bin .. data_batch_5.bin (train), test_batch.bin (test). Each is a sequence
// of 3073-byte records (10000 per file in the real data): 1 label byte (0..9), then 3072 pixel
// bytes, the red, green and blue 32x32 planes in turn, each row-major. A sample is that record's
// pixels as float [3, 32, 32], unchanged in layout.
//
// Pixels are scaled to [0, 1] and normalized per channel with the training set's statistics, as
// the Fashion-MNIST loader does with its single channel: x = (p / 255 - mean[c]) / std[c], with
// mean (0.4914, 0.4822, 0.4465) and std (0.2470, 0.2435, 0.2616), the per-channel mean and
// standard deviation of the 50000 training images (torchvision's common CIFAR transform; the
// std (0.2023, 0.1994, 0.2010) seen in many examples is not the pixel standard deviation). Both
// splits use the training statistics.
#pragma once

#include <array>
#include <string>

#include "datasets/dataset.h"

namespace hfta {

inline constexpr std::array<float, 3> kCifar10Mean = {0.4914f, 0.4822f, 0.4465f};
inline constexpr std::array<float, 3> kCifar10Std = {0.2470f, 0.2435f, 0.2616f};
inline constexpr int64_t kCifar10RecordBytes = 1 + 3 * 32 * 32;

// Reads the split's files from `dir` (the unpacked cifar-10-batches-bin directory). Throws
// hfta::Error naming every missing file of the split (and where the binary version comes from),
// a file whose size is not a whole number of 3073-byte records (naming the file and its size),
// an empty file, an unreadable file, or a label above 9 (naming the file and the record).
Dataset load_cifar10(const std::string& dir, Split split = Split::kTrain);

}  // namespace hfta
