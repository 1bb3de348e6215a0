#include "core/device_memory.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "core/parallel.h"

#if HFTA_WITH_CUDA
#include "backend/cuda/device_arena.h"
#include "backend/cuda/peak.h"
#include "backend/cuda/runtime.h"
#endif

namespace hfta {

#if !HFTA_WITH_CUDA
namespace {

[[noreturn]] void no_cuda_backend(const std::string& what) {
  fail(
      "{} needs CUDA device memory, but this build has no CUDA backend: configure with "
      "-DHFTA_CUDA=ON on a machine with /usr/local/cuda, or use --device cpu",
      what);
}

}  // namespace
#endif

Device parse_device(std::string_view name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  fail("unknown device '{}': choose cpu or cuda", name);
}

std::string_view device_flag_name(Device device) {
  return device == Device::kCuda ? "cuda" : "cpu";
}

bool device_available(Device device) {
  if (device == Device::kCpu) return true;
#if HFTA_WITH_CUDA
  return cuda::device_available();
#else
  return false;
#endif
}

std::string describe_device(Device device) {
  if (device == Device::kCpu) return "CPU";
#if HFTA_WITH_CUDA
  return "CUDA: " + cuda::device_status();
#else
  return "CUDA: this build has no CUDA backend (configure with -DHFTA_CUDA=ON on a machine with "
         "/usr/local/cuda)";
#endif
}

std::byte* allocate_device_memory(size_t bytes, const std::string& what) {
#if HFTA_WITH_CUDA
  return cuda::device_allocate(bytes, what);
#else
  no_cuda_backend(what);
#endif
}

void free_device_memory(std::byte* p) noexcept {
#if HFTA_WITH_CUDA
  cuda::device_free(p);
#else
  (void)p;  // nothing was ever allocated
#endif
}

double measure_device_peak_gflops(Device device) {
  HFTA_CHECK(device != Device::kCpu,
             "measure_device_peak_gflops is for devices; the CPU's peak is backend/cpu/peak.h's");
#if HFTA_WITH_CUDA
  return cuda::measure_sgemm_peak_gflops();
#else
  no_cuda_backend("measuring the device's peak");
#endif
}

void synchronize(Device device) {
  if (device == Device::kCpu) return;
#if HFTA_WITH_CUDA
  cuda::synchronize();
#else
  no_cuda_backend("waiting for the device");
#endif
}

void zero_memory(Device device, void* p, size_t bytes) {
  if (p == nullptr || bytes == 0) return;
  if (device == Device::kCpu) {
    std::memset(p, 0, bytes);
    return;
  }
#if HFTA_WITH_CUDA
  cuda::device_zero(p, bytes);
#else
  no_cuda_backend("zeroing memory");
#endif
}

void copy_memory(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (dst_device == Device::kCpu && src_device == Device::kCpu) {
    std::memcpy(dst, src, bytes);
    return;
  }
#if HFTA_WITH_CUDA
  cuda::device_copy(dst, src, bytes);
#else
  no_cuda_backend("a copy");
#endif
}

#if HFTA_WITH_CUDA
struct StagedUpload::Staging {
  cuda::PinnedStaging stages[2];  // used in turn
  int next = 0;
};
#else
struct StagedUpload::Staging {};
#endif

StagedUpload::StagedUpload() = default;
StagedUpload::~StagedUpload() = default;
StagedUpload::StagedUpload(StagedUpload&&) noexcept = default;
StagedUpload& StagedUpload::operator=(StagedUpload&&) noexcept = default;

StagedUpload::StagedUpload(Device device, size_t capacity, std::string what)
    : device_(device), capacity_(capacity), what_(std::move(what)) {
  if (device_ == Device::kCpu) return;
#if HFTA_WITH_CUDA
  HFTA_CHECK(cuda::device_available(), "{}: no CUDA device: {}", what_, cuda::device_status());
  staging_ = std::make_unique<Staging>();
  for (cuda::PinnedStaging& stage : staging_->stages) stage.acquire(capacity_);  // allocated now
#else
  no_cuda_backend(what_);
#endif
}

void StagedUpload::upload_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  HFTA_CHECK(bytes <= capacity_, "{}: {} bytes to upload, but its staging holds {}", what_, bytes,
             capacity_);
  if (device_ == Device::kCpu) {
    std::memcpy(dst, src, bytes);
    return;
  }
#if HFTA_WITH_CUDA
  cuda::PinnedStaging& stage = staging_->stages[staging_->next];
  staging_->next = 1 - staging_->next;
  float* pinned = stage.acquire(bytes);  // once the buffer's previous copy has read it
  std::memcpy(pinned, src, bytes);
  cuda::device_copy_from_pinned_async(dst, pinned, bytes);
  stage.copied.record();
#else
  (void)dst;
  no_cuda_backend(what_);
#endif
}

void zero_view(const TensorView& t) {
  if (t.empty()) return;
  if (t.device != Device::kCpu)
    return zero_memory(t.device, t.data, static_cast<size_t>(t.numel()) * sizeof(float));
  for_each_chunk(t.numel(), [&](int64_t begin, int64_t end) {
    std::fill(t.data + begin, t.data + end, 0.0f);
  });
}

void fill_view(const TensorView& t, float value) {
  if (t.empty()) return;
  if (t.device == Device::kCpu) {
    std::fill(t.data, t.data + t.numel(), value);
    return;
  }
  const std::vector<float> values(static_cast<size_t>(t.numel()), value);
  copy_memory(t.data, t.device, values.data(), Device::kCpu, values.size() * sizeof(float));
}

}  // namespace hfta
