// IDX files (the MNIST / Fashion-MNIST container), gzip-compressed or plain.
//
// Layout: magic 0x00 0x00 <type> <rank>, then <rank> big-endian uint32 dimensions, then the
// payload, row-major, exactly prod(dims) elements. Only type 0x08 (unsigned byte) is supported:
// it is the only type the datasets we read use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hfta {

inline constexpr uint8_t kIdxUnsignedByte = 0x08;

struct IdxData {
  std::vector<int64_t> dims;   // e.g. [60000, 28, 28] for Fashion-MNIST training images
  std::vector<uint8_t> bytes;  // prod(dims) bytes, row-major
};

// Reads an IDX file. Gzip is detected by its magic bytes (1f 8b); anything else is read as a
// plain IDX file. Throws hfta::Error naming the file on a missing or unreadable file, a bad
// magic, an unsupported type, a bad dimension, a truncated payload (with the expected and actual
// byte counts) or bytes after the payload.
IdxData read_idx(const std::string& path);

}  // namespace hfta
