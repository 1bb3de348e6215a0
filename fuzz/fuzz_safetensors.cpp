// libFuzzer target: the input as a safetensors file (length, JSON header, tensor bytes), read
// by read_safetensors with its metadata.
// A read succeeds or throws hfta::Error; anything else (a crash, a sanitizer report, an allocation
// over -rss_limit_mb, another exception) is a finding. See fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "core/error.h"
#include "fuzz/fuzz_input.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hfta::fuzz::write_input("t.safetensors", data, size);
  try {
    std::map<std::string, std::string> metadata;
    hfta::read_safetensors(path, &metadata);
  } catch (const hfta::Error&) {
    // expected: the reader refused the file
  }
  return 0;
}
