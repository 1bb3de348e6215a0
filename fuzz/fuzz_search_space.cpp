// libFuzzer target: the input as a `hfta tune --space` file, read by TuneSpace::load, then the
// first configurations drawn from it and turned into arrays and hyperparameters (what the search
// does with a space it accepted).
// A read succeeds or throws hfta::Error; anything else (a crash, a sanitizer report, an allocation
// over -rss_limit_mb, another exception) is a finding. See fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz/fuzz_input.h"
#include "tune/tune_space.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hfta::fuzz::write_input("space.json", data, size);
  try {
    const hfta::TuneSpace space = hfta::TuneSpace::load(path, "adam");
    for (int64_t i = 0; i < 4; ++i) {
      const hfta::TuneConfig config = space.sample(7, i);
      const hfta::ArrayKey key = hfta::array_key(config, {.optimizer = "adam"});
      hfta::config_hyper(config, key.optimizer);
      for (const auto& [name, value] : config) value.str();
    }
  } catch (const hfta::Error&) {
    // expected: the reader refused the file
  }
  return 0;
}
