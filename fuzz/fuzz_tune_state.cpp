// libFuzzer target: the input as a tune run's history.csv, read by read_tune_history, and as its
// tune.json, checked by check_tune_state against the run the seeds come from (what
// `hfta tune --resume` reads).
// A read succeeds or throws hfta::Error; anything else (a crash, a sanitizer report, an allocation
// over -rss_limit_mb, another exception) is a finding. See fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz/fuzz_input.h"
#include "tests/io/seed_workflow_files.h"
#include "tune/tune.h"
#include "tune/tune_search.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const hfta::TuneSpace space = hfta::seeds::tune_space();
  static const std::string state = hfta::tune_state_json(hfta::seeds::tune_options(), space);
  const std::string history = hfta::fuzz::write_input("history.csv", data, size);
  try {
    hfta::read_tune_history(history, space);
  } catch (const hfta::Error&) {
    // expected: the reader refused the file
  }
  const std::string json = hfta::fuzz::write_input("tune.json", data, size);
  try {
    hfta::check_tune_state(json, state);
  } catch (const hfta::Error&) {
    // expected: the reader refused the file
  }
  return 0;
}
