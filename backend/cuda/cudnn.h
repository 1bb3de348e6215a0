// cuDNN, loaded at run time and optional: hfta compiles its cuDNN calls wherever cuDNN's headers
// are (cudnn.h: in /usr/local/cuda/include or /usr/include/x86_64-linux-gnu), and opens the
// library (libcudnn.so.9) with dlopen on the first convolution that wants it, as it opens cuBLAS.
// Where either is missing, cudnn_available() is false and the convolutions run on hfta's own
// im2col + cuBLAS path (fused_ops/cuda/conv2d.cpp). HFTA_CUDNN_LIBRARY names the library file
// when it is not on the loader's path (PyTorch's wheels keep it in
// site-packages/nvidia/cudnn/lib).
#pragma once

#include <string>

#if __has_include(<cudnn.h>)
#include <cudnn.h>
#define HFTA_HAS_CUDNN_HEADERS 1
#else
#define HFTA_HAS_CUDNN_HEADERS 0
#endif

namespace hfta::cuda {

// Whether cuDNN can be used: its headers were there at build time and its library loads now
// (tried once per process). Never throws.
bool cudnn_available();
// Why, in one line: "cuDNN 9.19.0 (libcudnn.so.9)", or what is missing.
std::string cudnn_status();

#if HFTA_HAS_CUDNN_HEADERS
// The functions the convolutions call, as pointers with cuDNN's own signatures.
struct Cudnn {
  decltype(&cudnnGetVersion) get_version = nullptr;
  decltype(&cudnnGetErrorString) error_string = nullptr;
  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnDestroy) destroy = nullptr;
  decltype(&cudnnSetStream) set_stream = nullptr;
  decltype(&cudnnCreateTensorDescriptor) create_tensor = nullptr;
  decltype(&cudnnSetTensor4dDescriptorEx) set_tensor_4d_ex = nullptr;
  decltype(&cudnnDestroyTensorDescriptor) destroy_tensor = nullptr;
  decltype(&cudnnCreateFilterDescriptor) create_filter = nullptr;
  decltype(&cudnnSetFilter4dDescriptor) set_filter_4d = nullptr;
  decltype(&cudnnDestroyFilterDescriptor) destroy_filter = nullptr;
  decltype(&cudnnCreateConvolutionDescriptor) create_conv = nullptr;
  decltype(&cudnnSetConvolution2dDescriptor) set_conv_2d = nullptr;
  decltype(&cudnnSetConvolutionGroupCount) set_group_count = nullptr;
  decltype(&cudnnSetConvolutionMathType) set_math_type = nullptr;
  decltype(&cudnnDestroyConvolutionDescriptor) destroy_conv = nullptr;
  decltype(&cudnnGetConvolutionForwardAlgorithm_v7) forward_algorithms = nullptr;
  decltype(&cudnnGetConvolutionForwardWorkspaceSize) forward_workspace = nullptr;
  decltype(&cudnnConvolutionForward) forward = nullptr;
  decltype(&cudnnGetConvolutionBackwardDataAlgorithm_v7) backward_data_algorithms = nullptr;
  decltype(&cudnnGetConvolutionBackwardDataWorkspaceSize) backward_data_workspace = nullptr;
  decltype(&cudnnConvolutionBackwardData) backward_data = nullptr;
  decltype(&cudnnGetConvolutionBackwardFilterAlgorithm_v7) backward_filter_algorithms = nullptr;
  decltype(&cudnnGetConvolutionBackwardFilterWorkspaceSize) backward_filter_workspace = nullptr;
  decltype(&cudnnConvolutionBackwardFilter) backward_filter = nullptr;
  decltype(&cudnnConvolutionBackwardBias) backward_bias = nullptr;
  decltype(&cudnnAddTensor) add_tensor = nullptr;
};

// The loaded library; throws hfta::Error saying what is missing when cudnn_available() is false.
const Cudnn& cudnn();
// The calling thread's cuDNN handle, bound to its stream (runtime.h), created on first use and
// destroyed at thread exit.
cudnnHandle_t cudnn_handle();
// Throws hfta::Error "<call> failed: <cuDNN's message>" unless `status` is success.
void check(cudnnStatus_t status, const char* call);
#endif

}  // namespace hfta::cuda
