// An in-memory classification dataset: every sample is a float tensor of one shape plus a label.
//
//   images  [size, ...sample_shape]  float, already normalized (dataset-specific statistics)
//   labels  [size]                   int32 in [0, num_classes)
//           or [size, labels_per_sample] for per-point labels (part segmentation: one label per
//           point, num_classes = the parts)
// Datasets are small enough to hold in memory (Fashion-MNIST train: 188 MB as float).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace hfta {

// Which part of a dataset with a fixed train/test division to load.
enum class Split { kTrain, kTest };

struct Dataset {
  std::string name;
  Shape sample_shape;  // e.g. [1, 28, 28]
  int64_t size = 0;
  int num_classes = 0;
  std::vector<float> images;
  std::vector<int32_t> labels;
  int64_t labels_per_sample = 1;

  int64_t sample_numel() const { return sample_shape.numel(); }
  const float* sample(int64_t i) const { return images.data() + i * sample_numel(); }
  // [size, ...sample_shape]
  Shape images_shape() const;
  // Throws hfta::Error naming the dataset when sizes disagree or a label is out of range.
  void check() const;
};

// The first n samples (all of them when n >= size): for quick runs and benchmarks.
Dataset take_first(const Dataset& data, int64_t n);

// For readers that hold a whole file in memory: throws hfta::Error, before anything is read, when
// `path` is larger than the memory available (a sparse file, a disk image given by mistake), so
// the OOM killer does not meet it first. `description` names the file in the error ("text file").
void check_file_fits_in_memory(const std::string& path, const std::string& description);

}  // namespace hfta
