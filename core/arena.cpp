#include "core/arena.h"

#include <cstdlib>
#include <cstring>

#include "core/parallel.h"

namespace hfta {

Arena::Arena(size_t bytes, std::string name) : capacity_(align_up(bytes)), name_(std::move(name)) {
  if (capacity_ == 0) capacity_ = kAlignment;
  void* p = std::aligned_alloc(kAlignment, capacity_);
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
