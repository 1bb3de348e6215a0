// Slots of a live array (models/slots.h), the slow cases (tests/models/slots_harness.h says what
// is checked): lenet at B = 5 and resnet18, whose BatchNorm running statistics a refill resets
// and a compaction carries.
#include "slots_harness.h"

namespace hfta {
namespace {

std::vector<SlotCase> slot_cases() {
  std::vector<SlotCase> cases;
  for (const char* plan : {"fused", "chunk:2", "threads"}) cases.push_back({"lenet", 5, plan});
  cases.push_back({"resnet18", 3, "fused"});
  cases.push_back({"resnet18", 3, "chunk:2"});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Arrays, Slots, testing::ValuesIn(slot_cases()), case_name);

}  // namespace
}  // namespace hfta
