// libFuzzer target: the input as a checkpoint file (magic, version, JSON header, floats, CRC),
// read by load_checkpoint twice: as it is, and with its last four bytes replaced by the CRC-32 of
// the rest, so that the checks behind the checksum (the header's fields, tensor shapes and
// offsets) meet the mutations too.
// A read succeeds or throws hfta::Error; anything else (a crash, a sanitizer report, an allocation
// over -rss_limit_mb, another exception) is a finding. See fuzz/README.md.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.h"
#include "fuzz/fuzz_input.h"
#include "io/checkpoint.h"

namespace {

void load(const std::string& path) {
  try {
    hfta::load_checkpoint(path);
  } catch (const hfta::Error&) {
    // expected: the reader refused the file
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  load(hfta::fuzz::write_input("c.ckpt", data, size));
  if (size >= 4) {
    std::string summed(reinterpret_cast<const char*>(data), size);
    const auto crc = static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0), data, size - 4));
    std::memcpy(summed.data() + size - 4, &crc, sizeof crc);
    load(hfta::fuzz::write_input("summed.ckpt", reinterpret_cast<const uint8_t*>(summed.data()),
                                 summed.size()));
  }
  return 0;
}
