// CUDA fused conv_transpose2d (the contract is fused_ops/conv_transpose2d.h): the plan of
// conv_transpose2d_gemms.h, run with the CUDA conv2d's kernels (im2col, the gathering col2im, the
// bias fill and bias gradient of conv2d_kernels.cu) and cublasSgemmStridedBatched, columns in the
// calling thread's device scratch (backend/cuda/scratch.h). fp32 throughout, no TF32
// (backend/cuda/runtime.cpp). No cuDNN: DCGAN's generator layers are small, and the GEMM path
// keeps model b's bits independent of B in deterministic mode.
#include "fused_ops/conv_transpose2d.h"

#include <limits>

#include "backend/cuda/cublas.h"
#include "backend/cuda/runtime.h"
#include "backend/cuda/scratch.h"
#include "core/determinism.h"
#include "fused_ops/cuda/conv_device_exec.h"
#include "fused_ops/cuda/conv_transpose2d_gemms.h"
#include "fused_ops/cuda/kernels.h"

namespace hfta::cuda {

void conv_transpose2d_forward(const ConvTranspose2dParams& p, const ConvTranspose2dForwardArgs& a) {
  conv_transpose2d_forward_plan(p, a, kConv2dScratchCapFloats, deterministic(),
                                ConvDeviceExec{.op = "conv_transpose2d"});
}

void conv_transpose2d_backward(const ConvTranspose2dParams& p,
                               const ConvTranspose2dBackwardArgs& a) {
  conv_transpose2d_backward_plan(p, a, kConv2dScratchCapFloats, deterministic(),
                                 ConvDeviceExec{.op = "conv_transpose2d"});
}

}  // namespace hfta::cuda
