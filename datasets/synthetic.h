// A synthetic classification dataset that needs no files: deterministic and learnable.
//
// Class c has a mean pattern m_c of shape sample_shape, every element drawn from N(0, 1) by the
// stream (seed, c). Sample i draws its label uniformly and its image as
//   x_i = (m_{label_i} + noise_std * z_i) / sqrt(1 + noise_std^2),   z_i ~ N(0, I),
// so the values have unit variance and the classes are separable by a linear model when the
// sample has many elements relative to noise_std^2. Sample i depends only on (seed,
// sample_stream, i), whatever the thread count.
#pragma once

#include <cstdint>

#include "datasets/dataset.h"

namespace hfta {

struct SyntheticOptions {
  float noise_std = 1.0f;
  // Samples come from stream `sample_stream` of the same class means: use 0 for a training set
  // and 1 for a test set drawn from the same distribution.
  uint64_t sample_stream = 0;
};

Dataset make_synthetic(const Shape& sample_shape, int num_classes, int64_t size, uint64_t seed,
                       const SyntheticOptions& options = {});

}  // namespace hfta
