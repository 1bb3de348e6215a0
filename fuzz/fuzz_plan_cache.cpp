// libFuzzer target: the input as the plan cache (run/plan_cache.h), looked up for the seeds'
// keys by cached_plan and cached_gemm_routing. A malformed cache or entry reads as absent (it is
// only a cache); nothing may escape.
// Anything but returning or throwing hfta::Error (a crash, a sanitizer report, an allocation
// over -rss_limit_mb, another exception) is a finding. See fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz/fuzz_input.h"
#include "run/plan_cache.h"
#include "tests/io/seed_workflow_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hfta::fuzz::write_input("plans.json", data, size);
  try {
    for (const char* key :
         {hfta::seeds::kPlanKey, hfta::seeds::kOtherPlanKey, hfta::seeds::kRoutingKey}) {
      if (const auto plan = hfta::cached_plan(path, key)) plan->str();
      hfta::cached_gemm_routing(path, key);
    }
  } catch (const hfta::Error&) {
    // expected: the reader refused the file
  }
  return 0;
}
