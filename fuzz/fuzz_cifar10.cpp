// libFuzzer target: the input as CIFAR-10's test batch (3073-byte records: a label byte and
// 3072 pixel bytes), in a directory of its own: load_cifar10(dir, Split::kTest).
// A read succeeds or throws hfta::Error; anything else (a crash, a sanitizer report, an allocation
// over -rss_limit_mb, another exception) is a finding. See fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "datasets/cifar10.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hfta::fuzz::write_input("test_batch.bin", data, size);
  try {
    hfta::load_cifar10(hfta::fuzz::temp_dir(), hfta::Split::kTest);
  } catch (const hfta::Error&) {
    // expected: the reader refused the file
  }
  return 0;
}
