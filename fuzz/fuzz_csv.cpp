// libFuzzer target: the input as a CSV file, read by read_csv; every field then parsed as a
// number and as an integer (CsvTable::number, CsvTable::integer).
// A read succeeds or throws hfta::Error; anything else (a crash, a sanitizer report, an allocation
// over -rss_limit_mb, another exception) is a finding. See fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz/fuzz_input.h"
#include "io/csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hfta::fuzz::write_input("metrics.csv", data, size);
  try {
    const hfta::CsvTable table = hfta::read_csv(path);
    for (size_t r = 0; r < table.rows.size(); ++r) {
      for (size_t c = 0; c < table.rows[r].size(); ++c) {
        try {
          table.number(r, c);
        } catch (const hfta::Error&) {
          // not a number: expected
        }
        try {
          table.integer(r, c);
        } catch (const hfta::Error&) {
          // not an integer: expected
        }
      }
    }
  } catch (const hfta::Error&) {
    // expected: the reader refused the file
  }
  return 0;
}
