// cuBLAS, loaded on first use: its libraries (libcublas.so.13 and the 540 MB libcublasLt it
// pulls in) are opened with dlopen when a thread first needs a handle, not linked, so a CUDA
// build started on a machine without a GPU (every CPU run, every test process) does not pay the
// ~70 ms it takes to map and relocate them at each start. The functions the backend calls, as
// pointers with cuBLAS's own signatures.
#pragma once

#include <cublas_v2.h>

namespace hfta::cuda {

struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// The loaded library. Throws hfta::Error naming the library and the way out when it cannot be
// opened or lacks a function; later calls try again.
const Cublas& cublas();

}  // namespace hfta::cuda
