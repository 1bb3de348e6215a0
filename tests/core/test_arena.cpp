// Arena: zeroed on allocation and by zero(), 64-byte aligned, and 2 MiB-aligned from 2 MiB up
// (the size that transparent huge pages need).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "core/arena.h"

namespace hfta {
namespace {

bool aligned_to(const void* p, size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

TEST(Arena, SmallArenasAreCacheLineAlignedAndZeroed) {
  Arena a(1000, "small");
  EXPECT_GE(a.capacity(), 1000u);
  EXPECT_TRUE(aligned_to(a.data(), Arena::kAlignment));
  for (size_t i = 0; i < a.capacity(); ++i) ASSERT_EQ(a.data()[i], std::byte{0}) << i;
}

TEST(Arena, LargeArenasAreHugePageAlignedAndZeroed) {
  for (size_t bytes : {Arena::kHugePage, Arena::kHugePage + 64, 3 * Arena::kHugePage - 64}) {
    Arena a(bytes, "large");
    EXPECT_EQ(a.capacity(), bytes) << "the capacity is what was asked for (rounded to 64)";
    EXPECT_TRUE(aligned_to(a.data(), Arena::kHugePage)) << bytes;
    std::memset(a.data(), 0xff, a.capacity());  // every byte of the capacity is writable
    a.zero();
    for (size_t i = 0; i < a.capacity(); i += 4093) ASSERT_EQ(a.data()[i], std::byte{0}) << i;
    EXPECT_EQ(a.data()[a.capacity() - 1], std::byte{0});
  }
}

TEST(ArenaMemory, AvailableMemoryIsReadAndBoundedByTheMachine) {
  const size_t available = available_memory_bytes();
  const size_t total =
      static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  EXPECT_GT(available, size_t{0});
  EXPECT_LE(available, total);
  EXPECT_NO_THROW(check_memory_available(size_t{1} << 20, "a small arena", "nothing"));
}

// An arena bigger than the machine has available is refused before it is allocated (zeroing it
// would be killed by the kernel with nothing said): the error names it and how much it needed.
TEST(ArenaMemory, AnArenaTheMachineCannotHoldIsRefusedWithItsSize) {
  const size_t too_big = available_memory_bytes() + (size_t{1} << 30);
  try {
    Arena a(too_big, "activations");
    ADD_FAILURE() << "an arena of " << too_big << " bytes was allocated";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.needed_bytes(), Arena::align_up(too_big));
    const std::string what = e.what();
    EXPECT_NE(what.find("the activations arena: "), std::string::npos) << what;
    EXPECT_NE(what.find("available"), std::string::npos) << what;
    EXPECT_NE(what.find("reduce B or the batch size"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace hfta
