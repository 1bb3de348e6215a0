#include "backend/cuda/scratch.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/runtime.h"
#include "core/error.h"

namespace hfta::cuda {

namespace {

// Freed at thread (or process) exit; errors then are ignored, as for the stream.
struct OwnedScratch {
  void* data = nullptr;
  int64_t bytes = 0;
  ~OwnedScratch() {
    if (data) cudaFree(data);
  }
};

OwnedScratch& owned_scratch() {
  thread_local OwnedScratch scratch;
  return scratch;
}

}  // namespace

float* device_scratch(int64_t floats) {
  HFTA_CHECK(floats >= 0, "device_scratch({}): a size must not be negative", floats);
  OwnedScratch& s = owned_scratch();
  const int64_t bytes = std::max<int64_t>(floats, 1) * static_cast<int64_t>(sizeof(float));
  if (bytes <= s.bytes) return static_cast<float*>(s.data);
  if (s.data) {
    HFTA_CUDA_CHECK(cudaStreamSynchronize(stream()));  // kernels may still read the old buffer
    HFTA_CUDA_CHECK(cudaFree(s.data));
    s.data = nullptr;
    s.bytes = 0;
  }
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, static_cast<size_t>(bytes));
  if (status != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    fail(
        "device scratch of {} bytes (an op's temporary columns) could not be allocated: {} ({} "
        "bytes free of {}): make the array smaller (fewer models B or a smaller batch)",
        bytes, cudaGetErrorName(status), free_bytes, total_bytes);
  }
  s.data = ptr;
  s.bytes = bytes;
  return static_cast<float*>(ptr);
}

int64_t device_scratch_bytes() { return owned_scratch().bytes; }

}  // namespace hfta::cuda
