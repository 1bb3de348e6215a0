#include "backend/cuda/runtime.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string_view>
#include <utility>

#include "backend/cuda/cublas.h"
#include "core/error.h"

namespace hfta::cuda {

namespace {

struct DeviceProbe {
  bool available = false;
  std::string status;
};

DeviceProbe probe_devices() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear it, so that it does not surface as a later call's error
    return {false, fmt::format("cudaGetDeviceCount failed: {} ({})", cudaGetErrorName(status),
                               cudaGetErrorString(status))};
  }
  if (count == 0) return {false, "cudaGetDeviceCount found 0 devices"};
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    cudaGetLastError();
    return {true, fmt::format("{} device(s)", count)};
  }
  return {true, fmt::format("{} device(s): {} (sm_{}{}, {:.1f} GiB)", count, prop.name, prop.major,
                            prop.minor, static_cast<double>(prop.totalGlobalMem) / (1 << 30))};
}

const DeviceProbe& devices() {
  static const DeviceProbe probe = probe_devices();
  return probe;
}

// Owns one thread's stream and handle. Errors while destroying them at thread or process exit
// are ignored: the runtime may already be unloading, and there is no one left to tell.
struct OwnedContext {
  ThreadContext context;
  ~OwnedContext() {
    if (context.blas) cublas().destroy(context.blas);
    if (context.stream) cudaStreamDestroy(context.stream);
  }
};

}  // namespace

bool device_available() { return devices().available; }

std::string device_status() { return devices().status; }

void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    fail("{} failed: {} ({})", call, cudaGetErrorName(status), cudaGetErrorString(status));
}

void check(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail("{} failed: {} ({})", call, cublas().status_name(status), cublas().status_string(status));
}

const ThreadContext& thread_context() {
  thread_local OwnedContext owned;
  if (owned.context.blas == nullptr) {
    HFTA_CHECK(device_available(),
               "a CUDA op was called, but there is no CUDA device: {}. Keep the tensors on the CPU",
               device_status());
    // Half-made contexts are kept (and completed by the next call) so nothing leaks on failure.
    if (owned.context.stream == nullptr)
      HFTA_CUDA_CHECK(cudaStreamCreateWithFlags(&owned.context.stream, cudaStreamNonBlocking));
    const Cublas& lib = cublas();
    cublasHandle_t handle = nullptr;
    HFTA_CUDA_CHECK(lib.create(&handle));
    const cublasStatus_t bound = lib.set_stream(handle, owned.context.stream);
    if (bound != CUBLAS_STATUS_SUCCESS) lib.destroy(handle);
    check(bound, "cublasSetStream(handle, stream)");
    // fp32 GEMMs stay fp32 (no TF32) unless HFTA_CUDA_TF32=1: the results must match the
    // reference to fp32 rounding.
    const bool tf32 = tf32_from_env();
    const cublasStatus_t math =
        lib.set_math_mode(handle, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    if (math != CUBLAS_STATUS_SUCCESS) lib.destroy(handle);
    check(math, tf32 ? "cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH)"
                     : "cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH)");
    owned.context.blas = handle;
  }
  return owned.context;
}

bool tf32_from_env() {
  const char* env = std::getenv("HFTA_CUDA_TF32");
  const std::string_view v = env != nullptr ? env : "";
  if (v.empty() || v == "0") return false;
  if (v == "1") return true;
  fail("HFTA_CUDA_TF32={}: choose 0 (plain fp32, the default) or 1 (TF32 tensor cores)", v);
}

void synchronize() {
  HFTA_CUDA_CHECK(cudaStreamSynchronize(stream()));
  HFTA_CUDA_CHECK(cudaGetLastError());
}

StreamEvent::~StreamEvent() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

StreamEvent::StreamEvent(StreamEvent&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)),
      recorded_(std::exchange(other.recorded_, false)) {}

StreamEvent& StreamEvent::operator=(StreamEvent&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
    recorded_ = std::exchange(other.recorded_, false);
  }
  return *this;
}

void StreamEvent::record() {
  // Without timing: an event that only orders is cheaper to record and to wait for.
  if (event_ == nullptr) HFTA_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  HFTA_CUDA_CHECK(cudaEventRecord(event_, stream()));
  recorded_ = true;
}

void StreamEvent::wait() {
  if (!recorded_) return;
  HFTA_CUDA_CHECK(cudaEventSynchronize(event_));
  recorded_ = false;
}

}  // namespace hfta::cuda
