// CRC-32 (zlib's) over spans of any length: checkpoints' integrity check and the per-model
// state hashes of summary.csv (io/checkpoint.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace hfta {

// The CRC of no bytes, to start from.
uint32_t crc32_start();
// `crc` continued over `size` bytes at `data`.
uint32_t crc32_update(uint32_t crc, const void* data, size_t size);

}  // namespace hfta
