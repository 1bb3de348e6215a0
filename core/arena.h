// Arenas own memory, sized at setup so the training step never allocates.
//
// A model lays out its tensors by calling carve() on an arena twice: once on a counting arena
// (no memory, just sizes), then on a real one allocated with the counted size. One code path
// describes the layout, so the two passes cannot disagree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/tensor.h"

namespace hfta {

class Arena {
 public:
  // A counting arena: carve() returns views with null data and only adds up sizes.
  Arena() = default;
  // A real arena of `bytes` bytes, zero-filled, 64-byte aligned.
  explicit Arena(size_t bytes, std::string name = "arena");

  Arena(Arena&&) noexcept = default;
  Arena& operator=(Arena&&) noexcept = default;

  template <typename T = float>
  View<T> carve(const Shape& shape) {
    size_t bytes = align_up(static_cast<size_t>(shape.numel()) * sizeof(T));
    T* ptr = nullptr;
    if (counting()) {
      used_ += bytes;
    } else {
      HFTA_CHECK(used_ + bytes <= capacity_,
                 "{} is full: {} bytes used of {}, {} more requested for a tensor of shape {}",
                 name_, used_, capacity_, bytes, shape.str());
      ptr = reinterpret_cast<T*>(base_.get() + used_);
      used_ += bytes;
    }
    return View<T>(ptr, shape);
  }

  bool counting() const { return base_ == nullptr; }
  size_t used() const { return used_; }
  size_t capacity() const { return capacity_; }
  std::byte* data() const { return base_.get(); }
  void zero();
  // Forget every carve; memory stays allocated (for per-step scratch).
  void reset() { used_ = 0; }

  static constexpr size_t kAlignment = 64;
  static constexpr size_t kHugePage = size_t{2} << 20;
  static size_t align_up(size_t bytes) {
    return (bytes + kAlignment - 1) / kAlignment * kAlignment;
  }

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte, Free> base_;
  size_t capacity_ = 0;
  size_t used_ = 0;
  std::string name_ = "counting arena";
};

}  // namespace hfta
