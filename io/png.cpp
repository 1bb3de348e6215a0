#include "io/png.h"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <vector>

#include "core/error.h"

namespace hfta {

namespace {

// libpng reports errors by longjmp: nothing here may need unwinding (no C++ objects with
// destructors), so the encoder is a function of its own and the caller closes the file.
bool encode(std::FILE* f, const uint8_t* pixels, int64_t width, int64_t height, int64_t C) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  if (png == nullptr) return false;
  png_infop info = png_create_info_struct(png);
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8,
               C == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int64_t y = 0; y < height; ++y)
    png_write_row(png, const_cast<uint8_t*>(pixels) + y * width * C);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

}  // namespace

void write_png_grid(const std::string& path, const TensorView& images, int64_t columns,
                    int64_t pad) {
  HFTA_CHECK(images.shape.rank() == 4 && (images.shape[1] == 1 || images.shape[1] == 3),
             "{}: a sample grid needs images [n, 1 or 3, H, W], got {}", path, images.shape.str());
  HFTA_CHECK(columns >= 1 && pad >= 0, "{}: bad grid layout ({} columns, pad {})", path, columns,
             pad);
  const int64_t n = images.shape[0], C = images.shape[1], H = images.shape[2], W = images.shape[3];
  const int64_t cols = std::min(columns, n), rows = (n + cols - 1) / cols;
  const int64_t width = cols * (W + pad) + pad, height = rows * (H + pad) + pad;
  std::vector<uint8_t> pixels(static_cast<size_t>(width * height * C), 0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t y0 = pad + (i / cols) * (H + pad), x0 = pad + (i % cols) * (W + pad);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
          const float v = images.data[((i * C + c) * H + y) * W + x];
          // [-1, 1] -> [0, 255]; NaN (a diverged model) shows as black.
          const float u = std::isnan(v) ? 0.0f : std::clamp((v + 1.0f) * 0.5f, 0.0f, 1.0f);
          pixels[static_cast<size_t>(((y0 + y) * width + x0 + x) * C + c)] =
              static_cast<uint8_t>(std::lround(u * 255.0f));
        }
  }

  std::FILE* f = std::fopen(path.c_str(), "wb");
  HFTA_CHECK(f != nullptr, "cannot write {}: check that its directory exists and is writable",
             path);
  const bool ok = encode(f, pixels.data(), width, height, C);
  const bool closed = std::fclose(f) == 0;
  HFTA_CHECK(ok, "libpng failed writing {}", path);
  HFTA_CHECK(closed, "cannot finish writing {}", path);
}

}  // namespace hfta
