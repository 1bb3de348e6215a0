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

#include "core/error.h"
#include "core/tensor.h"

namespace hfta {

// Memory this process can still take before the kernel's OOM killer steps in: /proc/meminfo's
// MemAvailable, or less where a cgroup limits the process (memory.max - memory.current). SIZE_MAX
// where neither can be read.
size_t available_memory_bytes();

// Thrown when arenas need more memory than the machine has available. Arenas are zeroed at
// once, so without this check an array too big for the machine is not refused but killed by the
// kernel (with nothing said) partway through zeroing. A plan chooser catches it to rule a
// candidate out; anywhere else it reaches the user as any Error.
class OutOfMemory : public Error {
 public:
  OutOfMemory(const std::string& message, size_t needed_bytes)
      : Error(message), needed_bytes_(needed_bytes) {}
  size_t needed_bytes() const { return needed_bytes_; }

 private:
  size_t needed_bytes_;
};

// Throws OutOfMemory, naming `what` and the remedy `advice`, when `bytes` more would leave less
// than kMemoryHeadroom of the available memory (for what is allocated beside the arenas:
// optimizer state, oneDNN's scratch, the loader).
inline constexpr size_t kMemoryHeadroom = size_t{256} << 20;
void check_memory_available(size_t bytes, const std::string& what, const std::string& advice);

class Arena {
 public:
  // A counting arena: carve() returns views with null data (on `device`) and only adds up sizes.
  Arena() = default;
  explicit Arena(Device device) : device_(device) {}
  // A real arena of `bytes` bytes, zero-filled, 64-byte aligned, on `device`: host memory, or
  // device memory of the CUDA backend (core/device_memory.h), whose views carry Device::kCuda.
  // Throws OutOfMemory when the machine does not have the host memory available, hfta::Error when
  // the device does not have its memory.
  explicit Arena(size_t bytes, std::string name = "arena", Device device = Device::kCpu);

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
    return View<T>(ptr, shape, device_);
  }

  bool counting() const { return base_ == nullptr; }
  Device device() const { return device_; }
  size_t used() const { return used_; }
  size_t capacity() const { return capacity_; }
  std::byte* data() const { return base_.get(); }
  // Zero-fills the arena (on the device: on the calling thread's stream, returning at once).
  void zero();
  // Copies every byte of `other`, an arena of the same capacity on any device (a host mirror of a
  // device arena and back); waits for the copy when either is on the host.
  void copy_from(const Arena& other);
  // Forget every carve; memory stays allocated (for per-step scratch).
  void reset() { used_ = 0; }

  static constexpr size_t kAlignment = 64;
  static constexpr size_t kHugePage = size_t{2} << 20;
  // Arenas from this size up check the machine's available memory before they are allocated.
  static constexpr size_t kCheckedArenaBytes = size_t{64} << 20;
  static size_t align_up(size_t bytes) {
    return (bytes + kAlignment - 1) / kAlignment * kAlignment;
  }

 private:
  struct Free {
    Device device;  // value-initialized (kCpu) by unique_ptr; no default member initializer,
                    // which would keep Free from being default-constructible inside Arena
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte, Free> base_;
  size_t capacity_ = 0;
  size_t used_ = 0;
  std::string name_ = "counting arena";
  Device device_ = Device::kCpu;
};

}  // namespace hfta
