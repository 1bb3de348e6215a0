#include "core/arena.h"

#include <cstdlib>
#include <cstring>

namespace hfta {

Arena::Arena(size_t bytes, std::string name) : capacity_(align_up(bytes)), name_(std::move(name)) {
  if (capacity_ == 0) capacity_ = kAlignment;
  void* p = std::aligned_alloc(kAlignment, capacity_);
  HFTA_CHECK(p != nullptr, "could not allocate {} bytes for {}: reduce B or the batch size",
             capacity_, name_);
  base_.reset(static_cast<std::byte*>(p));
  zero();
}

void Arena::zero() {
  if (base_) std::memset(base_.get(), 0, capacity_);
}

void Arena::Free::operator()(std::byte* p) const { std::free(p); }

}  // namespace hfta
