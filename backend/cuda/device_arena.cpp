#include "backend/cuda/device_arena.h"

#include <utility>

#include "backend/cuda/runtime.h"

namespace hfta::cuda {

std::byte* device_allocate(size_t bytes, const std::string& what) {
  HFTA_CHECK(device_available(), "{} cannot be allocated: no CUDA device ({})", what,
             device_status());
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, bytes == 0 ? 1 : bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    fail(
        "{} of {} bytes could not be allocated on the device ({}: {} bytes free of {}): "
        "make the array smaller (fewer models B or a smaller batch)",
        what, bytes, cudaGetErrorName(status), free_bytes, total_bytes);
  }
  // Zeroed on this thread's stream and waited for: a plain cudaMemset would run on the legacy
  // default stream, which the non-blocking per-thread streams (runtime.cpp) do not wait for, so a
  // copy into the new memory could land before the zeroing. After the wait any stream may use it.
  cudaError_t zeroed = cudaMemsetAsync(ptr, 0, bytes, stream());
  if (zeroed == cudaSuccess) zeroed = cudaStreamSynchronize(stream());
  if (zeroed != cudaSuccess) {
    cudaFree(ptr);
    check(zeroed, "cudaMemsetAsync(ptr, 0, bytes, stream()) and its wait");
  }
  return static_cast<std::byte*>(ptr);
}

void device_free(std::byte* p) noexcept {
  if (p) cudaFree(p);
}

void device_zero(void* p, size_t bytes) {
  if (p && bytes > 0) HFTA_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream()));
}

void device_copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  HFTA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream()));
  synchronize();
}

PinnedHostBuffer::PinnedHostBuffer(size_t bytes) : bytes_(bytes) {
  void* ptr = nullptr;
  HFTA_CUDA_CHECK(cudaMallocHost(&ptr, bytes_ == 0 ? 1 : bytes_));
  data_ = static_cast<std::byte*>(ptr);
}

PinnedHostBuffer::~PinnedHostBuffer() {
  if (data_) cudaFreeHost(data_);
}

PinnedHostBuffer::PinnedHostBuffer(PinnedHostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedHostBuffer& PinnedHostBuffer::operator=(PinnedHostBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

TensorView PinnedHostBuffer::view(const Shape& shape) const {
  const size_t need = static_cast<size_t>(shape.numel()) * sizeof(float);
  HFTA_CHECK(need <= bytes_, "pinned buffer of {} bytes is too small for a tensor of shape {} ({})",
             bytes_, shape.str(), need);
  return TensorView(reinterpret_cast<float*>(data_), shape, Device::kCpu);
}

PinnedStaging::~PinnedStaging() {
  try {
    copied.wait();
  } catch (const Error&) {  // the stream or the context is gone: nothing is copying any more
  }
}

float* PinnedStaging::acquire(size_t bytes) {
  copied.wait();
  if (buffer.bytes() < bytes) buffer = PinnedHostBuffer(bytes);
  return reinterpret_cast<float*>(buffer.data());
}

namespace {

void check_copy(const TensorView& host, const TensorView& device, const char* what) {
  HFTA_CHECK(!host.empty() && !device.empty(), "{}: a tensor is missing", what);
  HFTA_CHECK(host.device == Device::kCpu && device.device == Device::kCuda,
             "{} needs a host tensor (device kCpu) and a device tensor (kCuda)", what);
  HFTA_CHECK(host.shape == device.shape, "{}: host tensor has shape {}, device tensor {}", what,
             host.shape.str(), device.shape.str());
}

size_t bytes_of(const TensorView& t) { return static_cast<size_t>(t.numel()) * sizeof(float); }

}  // namespace

void copy_to_device(const TensorView& host, const TensorView& device) {
  check_copy(host, device, "copy_to_device");
  device_copy(device.data, host.data, bytes_of(device));
}

void copy_to_host(const TensorView& device, const TensorView& host) {
  check_copy(host, device, "copy_to_host");
  device_copy(host.data, device.data, bytes_of(host));
}

void device_copy_from_pinned_async(void* dst, const void* pinned_src, size_t bytes) {
  if (bytes == 0) return;
  HFTA_CUDA_CHECK(cudaMemcpyAsync(dst, pinned_src, bytes, cudaMemcpyHostToDevice, stream()));
}

void copy_to_device_async(const TensorView& pinned_host, const TensorView& device) {
  check_copy(pinned_host, device, "copy_to_device");
  device_copy_from_pinned_async(device.data, pinned_host.data, bytes_of(device));
}

}  // namespace hfta::cuda
