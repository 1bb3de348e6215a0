// Arena: zeroed on allocation and by zero(), 64-byte aligned, and 2 MiB-aligned from 2 MiB up
// (the size that transparent huge pages need).
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace hfta
