// libFuzzer target: the input as an IDX file, plain or gzip (read_idx tells them apart by the
// magic bytes), read by read_idx.
// A read succeeds or throws hfta::Error; anything else (a crash, a sanitizer report, an allocation
// over -rss_limit_mb, another exception) is a finding. See fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "datasets/idx.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hfta::fuzz::write_input("images-idx3-ubyte", data, size);
  try {
    hfta::read_idx(path);
  } catch (const hfta::Error&) {
    // expected: the reader refused the file
  }
  return 0;
}
