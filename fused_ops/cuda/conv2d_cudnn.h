// The fused conv2d on cuDNN (conv2d_cudnn.cpp), for problems cudnn_conv_shapes() expresses, and
// the choice between it and hfta's own GEMM path (conv2d.cpp).
#pragma once

#include "fused_ops/conv2d.h"
#include "fused_ops/cuda/conv2d_cudnn_shapes.h"

namespace hfta::cuda {

// Whether cuDNN has deterministic, direct-sum fp32 algorithms (within the workspace cap) for all
// three directions of `p`, as cudnn_conv_shapes(p) = `s`: looked up once per problem and thread.
// False in a build without cuDNN's headers. Needs the library (cudnn_available()).
bool cudnn_conv2d_has_algorithms(const Conv2dParams& p, const CudnnConvShapes& s);

// fused_ops/conv2d.h's contract on device tensors; `s` is cudnn_conv_shapes(p). Throws
// hfta::Error when cuDNN is not available or offers no usable algorithm.
void cudnn_conv2d_forward(const Conv2dParams& p, const CudnnConvShapes& s,
                          const Conv2dForwardArgs& a);
void cudnn_conv2d_backward(const Conv2dParams& p, const CudnnConvShapes& s,
                           const Conv2dBackwardArgs& a);

// HFTA_CUDA_CONV: "auto" (or unset), "gemm", "cudnn" or "implicit"; throws hfta::Error naming the
// choices for any other value.
CudaConvBackend cuda_conv_backend_from_env();
// Whether the CUDA conv2d of `p` runs on cuDNN under `backend` where `cudnn_loaded` says whether
// the library is there: kGemm and kImplicit never, kAuto when cuDNN can express the problem and is
// loaded, kCudnn always (throwing hfta::Error, with the reason, where it cannot). Host-only logic,
// so tested without a GPU.
bool conv2d_uses_cudnn(const Conv2dParams& p, CudaConvBackend backend, bool cudnn_loaded);

}  // namespace hfta::cuda
