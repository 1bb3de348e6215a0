// The CUDA backend's runtime: whether a device is there, the per-thread stream and cuBLAS handle
// every kernel runs on, and the one check that turns a vendor status code into hfta::Error.
//
// Streams: each host thread gets its own stream (non-blocking with respect to the legacy default
// stream) and a cuBLAS handle bound to it, created on the thread's first CUDA op. An op enqueues
// its kernels on the calling thread's stream and returns without waiting; synchronize() waits,
// and raises the errors of what ran. Device 0 only, for now.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

namespace hfta::cuda {

// True when the CUDA runtime finds at least one device. Never throws: a missing driver, a machine
// without a GPU or any other cudaGetDeviceCount error is false. Asks the runtime once per process.
bool device_available();

// Why device_available() is what it is, one line: "1 device: NVIDIA H200 (sm_90, 139.8 GiB)" or
// "cudaGetDeviceCount failed: cudaErrorNoDevice (no CUDA-capable device is detected)".
std::string device_status();

// Throws hfta::Error "<call> failed: <error name> (<error string>)" unless `status` is success.
// `call` names the vendor call (the source text, through HFTA_CUDA_CHECK).
void check(cudaError_t status, const char* call);
void check(cublasStatus_t status, const char* call);

// HFTA_CUDA_TF32: "1" lets cuBLAS's fp32 GEMMs and cuDNN's fp32 convolutions use TF32 tensor
// cores (products of 10-bit mantissas: relative errors near 1e-3 instead of fp32's 1e-7), as
// PyTorch's cuDNN convolutions may by default; "0" or unset keeps plain fp32, which every test and
// PyTorch's golden losses assume. Read when a thread's cuBLAS handle is made and when a
// convolution's cuDNN algorithms are chosen. Throws hfta::Error naming the choices for any other
// value.
bool tf32_from_env();

// The calling thread's stream and cuBLAS handle (bound to that stream), created on first use.
// Throws hfta::Error when there is no device or creating them fails.
struct ThreadContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
};
const ThreadContext& thread_context();
inline cudaStream_t stream() { return thread_context().stream; }
inline cublasHandle_t blas() { return thread_context().blas; }

// Waits for everything enqueued on the calling thread's stream; raises the first error of what
// ran there (a kernel's fault surfaces here, not at its launch).
void synchronize();

// A mark in the calling thread's stream: record() marks everything enqueued there so far; wait()
// blocks the host until the stream has passed the last mark (at once when nothing was recorded),
// raising what failed there. Waits for one copy, where synchronize() would wait for every kernel.
class StreamEvent {
 public:
  StreamEvent() = default;
  ~StreamEvent();
  StreamEvent(StreamEvent&& other) noexcept;
  StreamEvent& operator=(StreamEvent&& other) noexcept;
  StreamEvent(const StreamEvent&) = delete;
  StreamEvent& operator=(const StreamEvent&) = delete;

  void record();
  void wait();

 private:
  cudaEvent_t event_ = nullptr;  // created on the first record()
  bool recorded_ = false;
};

}  // namespace hfta::cuda

// HFTA_CUDA_CHECK(cudaMalloc(&p, n)): runs the call and raises hfta::Error naming it when it
// returns anything but success.
#define HFTA_CUDA_CHECK(call) ::hfta::cuda::check((call), #call)
