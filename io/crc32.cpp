#include "io/crc32.h"

#include <zlib.h>

#include <algorithm>

namespace hfta {

uint32_t crc32_start() { return static_cast<uint32_t>(crc32(0L, Z_NULL, 0)); }

// zlib's crc32 takes 32-bit lengths: longer spans go in pieces.
uint32_t crc32_update(uint32_t crc, const void* data, size_t size) {
  uLong c = crc;
  const auto* bytes = static_cast<const Bytef*>(data);
  while (size > 0) {
    const auto chunk = static_cast<uInt>(std::min<size_t>(size, size_t{1} << 30));
    c = crc32(c, bytes, chunk);
    bytes += chunk;
    size -= chunk;
  }
  return static_cast<uint32_t>(c);
}

}  // namespace hfta
