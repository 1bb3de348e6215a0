// Memory by device, for code that holds a Device rather than knowing one: the arenas of nets and
// optimizers (core/arena.h), the nets' initial values, the minibatch's copy and what a
// checkpoint reads. The host's cases are plain memory operations; kCuda's go to the CUDA backend
// (backend/cuda/device_arena.h) and raise "this build has no CUDA backend" in a build without it.
// Declared here, below every layer that holds tensors (core's arenas among them), and defined in
// backend/device_memory.cpp, the one place that knows the backends.
//
// Ordering: device work runs on the calling thread's stream (backend/cuda/runtime.h). A copy that
// touches host memory waits for the stream, so what it read or wrote on the host is final when it
// returns; zero_memory on the device returns at once, ordered before the kernels after it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/error.h"
#include "core/tensor.h"

namespace hfta {

// --device's names: "cpu" and "cuda". parse_device throws hfta::Error naming the choices.
Device parse_device(std::string_view name);
std::string_view device_flag_name(Device device);
// Whether `device` can be used by this process: the CPU always; CUDA in a build with the CUDA
// backend on a machine where its runtime finds a device. Never throws.
bool device_available(Device device);
// One line for a run's first lines: the device and what this process found there, e.g. "CUDA: 1
// device: NVIDIA H200 (sm_90, 139.8 GiB)", or why there is none.
std::string describe_device(Device device);

// `bytes` zero-filled bytes of device memory, 256-byte aligned. Throws hfta::Error naming `what`
// when there is no device (or no CUDA backend in this build) or it lacks the memory.
std::byte* allocate_device_memory(size_t bytes, const std::string& what);
void free_device_memory(std::byte* p) noexcept;

// Waits until `device` has done everything this thread enqueued there (the CPU: nothing to wait
// for), raising what failed there.
void synchronize(Device device);

// Zero-fills `bytes` bytes at `p` on `device`.
void zero_memory(Device device, void* p, size_t bytes);
// Copies `bytes` bytes from `src` (on src_device) to `dst` (on dst_device): host to host, host to
// device, device to host or device to device.
void copy_memory(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);

// Copies `from` into `to`, whatever devices they are on. Throws hfta::Error naming `what` when a
// view is missing or the shapes differ.
template <typename T>
void copy_view(const View<T>& from, const View<T>& to, std::string_view what = "copy") {
  HFTA_CHECK(!from.empty() && !to.empty(), "{}: a tensor is missing", what);
  HFTA_CHECK(from.shape == to.shape, "{}: copying a tensor of shape {} into one of shape {}", what,
             from.shape.str(), to.shape.str());
  copy_memory(to.data, to.device, from.data, from.device,
              static_cast<size_t>(from.numel()) * sizeof(T));
}

// Host-to-device uploads through page-locked staging, for what a step copies to the device every
// time (the minibatch): the caller's bytes are copied into one of two pinned host buffers, used in
// turn, and from there to the device by DMA, asynchronously on the calling thread's stream. An
// upload waits only for the copy that last read the same buffer (two uploads before), so the host
// can prepare the next step's inputs while the device still copies and computes; the caller's
// memory may be reused at once, and the device copy is ordered before everything enqueued after
// it on that stream. On the CPU an upload is a memcpy. One thread at a time.
class StagedUpload {
 public:
  StagedUpload();
  // Uploads of at most `capacity` bytes to `device`. Throws hfta::Error naming `what` when there
  // is no such device (or no CUDA backend in this build) or the pinned memory cannot be had.
  StagedUpload(Device device, size_t capacity, std::string what);
  ~StagedUpload();
  StagedUpload(StagedUpload&&) noexcept;
  StagedUpload& operator=(StagedUpload&&) noexcept;

  // Copies `host` (host memory) into `on_device` (this upload's device), same shape.
  template <typename T>
  void upload(const View<T>& host, const View<T>& on_device) {
    HFTA_CHECK(!host.empty() && !on_device.empty(), "{}: a tensor is missing", what_);
    HFTA_CHECK(host.device == Device::kCpu && on_device.device == device_,
               "{}: uploads a host tensor to the {} (got tensors on {} and {})", what_,
               device_flag_name(device_), device_flag_name(host.device),
               device_flag_name(on_device.device));
    HFTA_CHECK(host.shape == on_device.shape,
               "{}: copying a tensor of shape {} into one of shape {}", what_, host.shape.str(),
               on_device.shape.str());
    upload_bytes(on_device.data, host.data, static_cast<size_t>(host.numel()) * sizeof(T));
  }
  size_t capacity() const { return capacity_; }

 private:
  void upload_bytes(void* dst, const void* src, size_t bytes);

  struct Staging;  // the backend's pinned buffers and their copies' events
  Device device_ = Device::kCpu;
  size_t capacity_ = 0;
  std::string what_;
  std::unique_ptr<Staging> staging_;
};

// The device's fp32 peak in GFLOP/s (a large sgemm of its BLAS), what "% of peak" means for runs
// on it. Throws hfta::Error for the CPU (backend/cpu/peak.h measures that) and without a device.
double measure_device_peak_gflops(Device device);

// Sets every element of `t` to `value`; on the device through a host copy of the values (for
// small tensors, such as the B loss gradients of a backward).
void fill_view(const TensorView& t, float value);
// Zeroes t; on the CPU spread over the threads (a gradient of megabytes zeroed just before an op
// adds to it, where one thread's stores would reach half the memory bandwidth).
void zero_view(const TensorView& t);

}  // namespace hfta
