// Device memory for the CUDA backend, owned as core/arena.h's Arena owns host memory: one
// cudaMalloc per arena, sized at setup and carved into views (device kCuda), so a training step
// never allocates. Plus the host<->device copies of a view, and a pinned (page-locked) host
// buffer to stage minibatches in for asynchronous copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/cuda/runtime.h"
#include "core/arena.h"
#include "core/error.h"
#include "core/tensor.h"

namespace hfta::cuda {

// Raw device memory, for core/device_memory.h (the arenas of nets and optimizers on kCuda) and
// DeviceArena. device_allocate returns `bytes` zero-filled bytes (synchronously, before any stream
// uses them) and raises hfta::Error naming `what`, the size and the device's free memory when
// they cannot be had, or when there is no device.
std::byte* device_allocate(size_t bytes, const std::string& what);
void device_free(std::byte* p) noexcept;
// Zero-fills `bytes` bytes of device memory on the calling thread's stream; returns at once.
void device_zero(void* p, size_t bytes);
// Copies `bytes` bytes between any two of host and device memory (unified addressing tells which
// is which) on the calling thread's stream, and waits for the copy: host memory may be read or
// reused at once.
void device_copy(void* dst, const void* src, size_t bytes);
// Copies `bytes` bytes from pinned host memory (a PinnedHostBuffer's) to device memory on the
// calling thread's stream and returns at once: the source must stay unchanged until the stream
// has passed the copy (a StreamEvent recorded after it, or synchronize()).
void device_copy_from_pinned_async(void* dst, const void* pinned_src, size_t bytes);

// Device memory owned as core/arena.h's Arena owns host memory, because it is one: an Arena on
// Device::kCuda (one cudaMalloc per arena, zero-filled, sized at setup and carved into views that
// carry Device::kCuda, so a training step never allocates). The name the CUDA code and its tests
// use for arenas that only ever hold device memory.
class DeviceArena : public Arena {
 public:
  // A counting arena: carve() returns device views with null data and only adds up sizes.
  DeviceArena() : Arena(Device::kCuda) {}
  // A real arena of `bytes` bytes of device memory, zero-filled. Throws hfta::Error when there is
  // no device or it does not have the memory.
  explicit DeviceArena(size_t bytes, std::string name = "device arena")
      : Arena(bytes, std::move(name), Device::kCuda) {}
};

// Page-locked host memory (cudaMallocHost): the device copies it by DMA, without a bounce
// through a driver buffer, and copies from it can overlap with kernels. The staging buffer a
// loader writes each minibatch into.
class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  // `bytes` bytes of pinned host memory (not zeroed). Throws hfta::Error when it cannot be had.
  explicit PinnedHostBuffer(size_t bytes);
  ~PinnedHostBuffer();

  PinnedHostBuffer(PinnedHostBuffer&& other) noexcept;
  PinnedHostBuffer& operator=(PinnedHostBuffer&& other) noexcept;
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;

  // The buffer's start as a host view (device kCpu) of `shape`; throws when it does not fit.
  TensorView view(const Shape& shape) const;
  std::byte* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
};

// A pinned buffer that values drawn on the host (dropout masks) are staged in before their
// asynchronous copy to the device, reused call after call (one per thread and op: thread_local).
// acquire() hands it out once the copy that last read it has finished, grown to `bytes`; the
// caller records `copied` after enqueueing its copy out of it. Freed only after that copy.
struct PinnedStaging {
  PinnedHostBuffer buffer;
  StreamEvent copied;

  PinnedStaging() = default;
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;
  ~PinnedStaging();
  float* acquire(size_t bytes);
};

// Copies a host view (device kCpu) to a device view (kCuda) of the same shape, or back, on the
// calling thread's stream, and waits for the copy: the host buffer may be reused at once.
// Throws hfta::Error when the shapes or devices are not these.
void copy_to_device(const TensorView& host, const TensorView& device);
void copy_to_host(const TensorView& device, const TensorView& host);

// Same as copy_to_device, but returns at once: the copy runs in stream order before the kernels
// enqueued after it. `host` must lie in pinned memory (a PinnedHostBuffer's view) and stay
// unchanged until the stream has passed the copy (synchronize()).
void copy_to_device_async(const TensorView& pinned_host, const TensorView& device);

}  // namespace hfta::cuda
