// libFuzzer target: the input as a checkpoint file (magic, version, JSON header, floats, CRC),
// read by load_checkpoint.
// A read succeeds or throws hfta::Error; anything else (a crash, a sanitizer report, an allocation
// over -rss_limit_mb, another exception) is a finding. See fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz/fuzz_input.h"
#include "io/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hfta::fuzz::write_input("c.ckpt", data, size);
  try {
    hfta::load_checkpoint(path);
  } catch (const hfta::Error&) {
    // expected: the reader refused the file
  }
  return 0;
}
