#include "backend/cuda/cudnn.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "backend/cuda/runtime.h"
#include "core/error.h"

namespace hfta::cuda {

#if HFTA_HAS_CUDNN_HEADERS

namespace {

std::string library_name() { return "libcudnn.so." + std::to_string(CUDNN_MAJOR); }

struct Loaded {
  bool tried = false;
  bool ok = false;
  std::string status;
  Cudnn functions;
};

// Binds every function or says which one is missing; true when all are there.
bool bind_all(void* library, Cudnn& c, std::string& missing) {
  auto bind = [&](const char* symbol, auto& fn) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library, symbol));
    if (fn == nullptr && missing.empty()) missing = symbol;
  };
  bind("cudnnGetVersion", c.get_version);
  bind("cudnnGetErrorString", c.error_string);
  bind("cudnnCreate", c.create);
  bind("cudnnDestroy", c.destroy);
  bind("cudnnSetStream", c.set_stream);
  bind("cudnnCreateTensorDescriptor", c.create_tensor);
  bind("cudnnSetTensor4dDescriptorEx", c.set_tensor_4d_ex);
  bind("cudnnDestroyTensorDescriptor", c.destroy_tensor);
  bind("cudnnCreateFilterDescriptor", c.create_filter);
  bind("cudnnSetFilter4dDescriptor", c.set_filter_4d);
  bind("cudnnDestroyFilterDescriptor", c.destroy_filter);
  bind("cudnnCreateConvolutionDescriptor", c.create_conv);
  bind("cudnnSetConvolution2dDescriptor", c.set_conv_2d);
  bind("cudnnSetConvolutionGroupCount", c.set_group_count);
  bind("cudnnSetConvolutionMathType", c.set_math_type);
  bind("cudnnDestroyConvolutionDescriptor", c.destroy_conv);
  bind("cudnnGetConvolutionForwardAlgorithm_v7", c.forward_algorithms);
  bind("cudnnGetConvolutionForwardWorkspaceSize", c.forward_workspace);
  bind("cudnnConvolutionForward", c.forward);
  bind("cudnnGetConvolutionBackwardDataAlgorithm_v7", c.backward_data_algorithms);
  bind("cudnnGetConvolutionBackwardDataWorkspaceSize", c.backward_data_workspace);
  bind("cudnnConvolutionBackwardData", c.backward_data);
  bind("cudnnGetConvolutionBackwardFilterAlgorithm_v7", c.backward_filter_algorithms);
  bind("cudnnGetConvolutionBackwardFilterWorkspaceSize", c.backward_filter_workspace);
  bind("cudnnConvolutionBackwardFilter", c.backward_filter);
  bind("cudnnConvolutionBackwardBias", c.backward_bias);
  bind("cudnnAddTensor", c.add_tensor);
  return missing.empty();
}

// HFTA_CUDNN_LIBRARY when set, else the soname (LD_LIBRARY_PATH, the run path, ld.so.cache).
Loaded load() {
  Loaded l;
  l.tried = true;
  const char* env = std::getenv("HFTA_CUDNN_LIBRARY");
  const std::string path = env != nullptr && *env != '\0' ? env : library_name();
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    l.status = fmt::format(
        "cuDNN is not loadable ({}: {}); set HFTA_CUDNN_LIBRARY to its file, or put its folder on "
        "LD_LIBRARY_PATH",
        path, why != nullptr ? why : "not found");
    return l;
  }
  std::string missing;
  if (!bind_all(library, l.functions, missing)) {
    l.status = fmt::format("{} lacks {}: hfta calls cuDNN {}'s convolution API", path, missing,
                           CUDNN_MAJOR);
    return l;
  }
  const size_t version = l.functions.get_version();
  l.ok = true;
  l.status =
      fmt::format("cuDNN {}.{}.{} ({})", version / 10000, version / 100 % 100, version % 100, path);
  return l;  // the library stays open for the process's life
}

Loaded& loaded() {
  static std::mutex mutex;
  static Loaded l;
  std::lock_guard<std::mutex> lock(mutex);
  if (!l.tried) l = load();
  return l;
}

struct OwnedHandle {
  cudnnHandle_t handle = nullptr;
  ~OwnedHandle() {
    if (handle != nullptr) cudnn().destroy(handle);
  }
};

}  // namespace

bool cudnn_available() { return device_available() && loaded().ok; }

std::string cudnn_status() {
  if (!device_available()) return "no CUDA device: " + device_status();
  return loaded().status;
}

const Cudnn& cudnn() {
  const Loaded& l = loaded();
  HFTA_CHECK(l.ok, "{}", l.status);
  return l.functions;
}

void check(cudnnStatus_t status, const char* call) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  fail("{} failed: {}", call, cudnn().error_string(status));
}

cudnnHandle_t cudnn_handle() {
  // The thread's stream first: thread-locals are destroyed in reverse order, so the handle is
  // destroyed while the stream it is bound to still exists.
  (void)thread_context();
  thread_local OwnedHandle owned;
  if (owned.handle == nullptr) {
    const Cudnn& lib = cudnn();
    cudnnHandle_t handle = nullptr;
    check(lib.create(&handle), "cudnnCreate");
    const cudnnStatus_t bound = lib.set_stream(handle, stream());
    if (bound != CUDNN_STATUS_SUCCESS) {
      lib.destroy(handle);
      check(bound, "cudnnSetStream");
    }
    owned.handle = handle;
  }
  return owned.handle;
}

#else

bool cudnn_available() { return false; }

std::string cudnn_status() {
  return "this build has no cuDNN: its headers (cudnn.h) were not found when hfta was compiled";
}

#endif

}  // namespace hfta::cuda
