// libFuzzer target: the input as a sweep's plot.json, read by load_plot_settings, and as its
// throughput.csv, read by read_csv and summarize_sweep, drawn by gnuplot_script and tabled by
// fusion_table (what `hfta sweep --plot-only` reads).
// A read succeeds or throws hfta::Error; anything else (a crash, a sanitizer report, an allocation
// over -rss_limit_mb, another exception) is a finding. See fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz/fuzz_input.h"
#include "io/csv.h"
#include "sweep/plot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = hfta::fuzz::temp_dir();
  hfta::fuzz::write_input("plot.json", data, size);
  try {
    hfta::load_plot_settings(dir);
  } catch (const hfta::Error&) {
    // expected: the reader refused the file
  }
  const std::string csv = hfta::fuzz::write_input("throughput.csv", data, size);
  try {
    const auto points = hfta::summarize_sweep(hfta::read_csv(csv));
    hfta::gnuplot_script(points, "title", 1 << 30);
    hfta::fusion_table(points);
  } catch (const hfta::Error&) {
    // expected: the reader refused the file
  }
  return 0;
}
