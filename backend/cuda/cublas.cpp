#include "backend/cuda/cublas.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "core/error.h"

namespace hfta::cuda {

namespace {

// The soname of the toolkit the backend was compiled against (CUBLAS_VER_MAJOR of its headers).
std::string library_name() { return "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR); }

template <typename Fn>
void bind(void* library, const char* symbol, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(library, symbol));
  HFTA_CHECK(fn != nullptr,
             "{} has no {}: install the cuBLAS of CUDA {} (the one hfta was built with)",
             library_name(), symbol, CUBLAS_VER_MAJOR);
}

// Opens cuBLAS by its soname (LD_LIBRARY_PATH, the executable's run path, ld.so.cache), else from
// the folder of the CUDA runtime the process has loaded: the toolkit ships them side by side.
void* open_library(const std::string& name) {
  if (void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return library;
  Dl_info runtime{};
  if (dladdr(reinterpret_cast<void*>(&cudaRuntimeGetVersion), &runtime) == 0 ||
      runtime.dli_fname == nullptr)
    return nullptr;
  std::string path = runtime.dli_fname;
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return nullptr;
  path = path.substr(0, slash + 1) + name;
  return dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
}

Cublas load() {
  const std::string name = library_name();
  void* library = open_library(name);
  HFTA_CHECK(library != nullptr,
             "cannot load cuBLAS ({}): {}. Install the CUDA {} toolkit's cuBLAS (or put its lib "
             "folder on LD_LIBRARY_PATH), or keep the tensors on the CPU",
             name, dlerror(), CUBLAS_VER_MAJOR);
  Cublas c;
  bind(library, "cublasCreate_v2", c.create);
  bind(library, "cublasDestroy_v2", c.destroy);
  bind(library, "cublasSetStream_v2", c.set_stream);
  bind(library, "cublasSetMathMode", c.set_math_mode);
  bind(library, "cublasSgemmStridedBatched", c.sgemm_strided_batched);
  bind(library, "cublasGetStatusName", c.status_name);
  bind(library, "cublasGetStatusString", c.status_string);
  return c;  // the library stays open for the process's life
}

}  // namespace

const Cublas& cublas() {
  static std::mutex mutex;
  static Cublas loaded;
  std::lock_guard<std::mutex> lock(mutex);
  if (loaded.create == nullptr) loaded = load();
  return loaded;
}

}  // namespace hfta::cuda
