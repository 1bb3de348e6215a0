#include "core/arena.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

#include "core/parallel.h"

namespace hfta {

// Arenas of 2 MiB or more are 2 MiB-aligned and asked for transparent huge pages (the kernel's
// THP mode is usually "madvise"). The optimizer streams every parameter, gradient and moment
// each step, one model's several MB at a time, and with 4 KiB pages that is a TLB miss every
// 4 KiB. On the paravirtualized dev machines those misses cost much more when two threads of
// one process stream at once than when two processes do: Adam's update of the MLP ran 2.5x
// slower per model inside a threads plan than in a process of its own, and about the same with
// huge pages (docs/benchmarks.md).
Arena::Arena(size_t bytes, std::string name) : capacity_(align_up(bytes)), name_(std::move(name)) {
  if (capacity_ == 0) capacity_ = kAlignment;
  const bool huge = capacity_ >= kHugePage;
  const size_t allocated = huge ? (capacity_ + kHugePage - 1) / kHugePage * kHugePage : capacity_;
  void* p = std::aligned_alloc(huge ? kHugePage : kAlignment, allocated);
  if (huge && p != nullptr) madvise(p, allocated, MADV_HUGEPAGE);
  HFTA_CHECK(p != nullptr, "could not allocate {} bytes for {}: reduce B or the batch size",
             capacity_, name_);
  base_.reset(static_cast<std::byte*>(p));
  zero();
}

// Spread over the threads: one thread's stores reach about half the memory bandwidth, and the
// gradient arena, which is zeroed every step, reaches a hundred MB at LeNet B=8 (see
// docs/benchmarks.md, 'Measurements behind code choices').
void Arena::zero() {
  if (!base_) return;
  std::byte* base = base_.get();
  for_each_chunk(static_cast<int64_t>(capacity_), [&](int64_t begin, int64_t end) {
    std::memset(base + begin, 0, static_cast<size_t>(end - begin));
  });
}

void Arena::Free::operator()(std::byte* p) const { std::free(p); }

}  // namespace hfta
