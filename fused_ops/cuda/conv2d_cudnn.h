// The fused conv2d on cuDNN (conv2d_cudnn.cpp), for problems cudnn_conv_shapes() expresses (one
// grouped convolution, or B per-model ones), and the choice between it and hfta's own GEMM path
// (conv2d.cpp).
#pragma once

#include "fused_ops/conv2d.h"
#include "fused_ops/cuda/conv2d_cudnn_shapes.h"

namespace hfta::cuda {

// Whether cuDNN has deterministic, direct-sum fp32 algorithms (within the workspace cap) for all
// three directions of `p`, as cudnn_conv_shapes(p, mapping) = `s`: looked up once per problem
// and thread. False in a build without cuDNN's headers. Needs the library (cudnn_available()).
bool cudnn_conv2d_has_algorithms(const Conv2dParams& p, const CudnnConvShapes& s);

// fused_ops/conv2d.h's contract on device tensors; `s` is cudnn_conv_shapes(p, mapping): its
// calls run one after another on the thread's stream. Throws hfta::Error when cuDNN is not
// available or offers no usable algorithm.
void cudnn_conv2d_forward(const Conv2dParams& p, const CudnnConvShapes& s,
                          const Conv2dForwardArgs& a);
void cudnn_conv2d_backward(const Conv2dParams& p, const CudnnConvShapes& s,
                           const Conv2dBackwardArgs& a);

// HFTA_CUDA_CONV: "auto" (or unset), "gemm", "cudnn", "cudnn-per-model" or "implicit"; throws
// hfta::Error naming the choices for any other value.
CudaConvBackend cuda_conv_backend_from_env();
// HFTA_CUDNN_BACKWARD: "deterministic" (or unset) admits only the backward algorithms that sum
// in a fixed order (data and filter ALGO_1); "atomic" also those that add with atomics (data
// ALGO_0, filter ALGO_0 and ALGO_3): full fp32 sums whose order changes from run to run, so never
// in deterministic mode (false there). Opt-in until a GPU run shows what they are worth (the
// grouped backward with ALGO_1 is most of a ResNet-18 array's step, docs/benchmarks.md). Throws
// hfta::Error naming the choices for any other value.
bool cudnn_atomic_backward_from_env();
// How `backend`'s cuDNN calls map the models: per model for kCudnnPerModel, else grouped.
CudnnConvMapping cudnn_conv_mapping(CudaConvBackend backend);
// Whether the CUDA conv2d of `p` runs on cuDNN under `backend` where `cudnn_loaded` says whether
// the library is there: kGemm and kImplicit never, kAuto when the grouped call can express the
// problem and cuDNN is loaded, kCudnn and kCudnnPerModel always (throwing hfta::Error, with the
// reason, where their mapping cannot; per model can express a shared input with groups > 1).
// Host-only logic, so tested without a GPU.
bool conv2d_uses_cudnn(const Conv2dParams& p, CudaConvBackend backend, bool cudnn_loaded);

}  // namespace hfta::cuda
