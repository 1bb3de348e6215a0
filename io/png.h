// PNG output (libpng): sample grids of generated images.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace hfta {

// Writes `images` [n, C, H, W] (C = 1 gray or 3 RGB, values in [-1, 1], e.g. a generator's Tanh
// output) as one PNG of a grid `columns` images wide, with `pad` black pixels between and around
// the images (as torchvision.utils.make_grid(normalize=True, value_range=(-1, 1))). Values are
// clamped. Throws hfta::Error naming the file when it cannot be written or the shape is not
// [n, 1 or 3, H, W].
void write_png_grid(const std::string& path, const TensorView& images, int64_t columns = 8,
                    int64_t pad = 2);

}  // namespace hfta
