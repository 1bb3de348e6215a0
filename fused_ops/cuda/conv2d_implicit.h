// The fused conv2d on hfta's own implicit-GEMM kernels (conv2d_implicit_kernels.cu; the arithmetic
// and its fixed order are conv2d_implicit_math.h's), chosen by HFTA_CUDA_CONV=implicit
// (conv2d.cpp): every output element is one thread's sequential fmaf sum, so results do not depend
// on B or the launch and model b of a fused array gets the bits it would get alone.
#pragma once

#include <cstdint>

#include "fused_ops/conv2d.h"
#include "fused_ops/cuda/conv2d_implicit_math.h"

namespace hfta::cuda {

// The kernels' geometry of `p`. Throws hfta::Error when a size the kernels index with 32-bit ints
// (a per-image x or y, the weights of all models, N*OH*OW, a grid's blocks) does not fit.
implicit_math::ImplicitGeometry implicit_conv_geometry(const Conv2dParams& p);

// Models per launch of the weight gradient when its chunks' sums need device scratch: as many
// as fit kImplicitPartialsCapFloats of partial sums, at least one, at most B.
inline constexpr int64_t kImplicitPartialsCapFloats = int64_t{64} << 20;  // 256 MiB
int64_t implicit_dweight_models_per_pass(const implicit_math::ImplicitGeometry& g);

// fused_ops/conv2d.h's contract on device tensors, on the calling thread's stream.
void implicit_conv2d_forward(const Conv2dParams& p, const Conv2dForwardArgs& a);
void implicit_conv2d_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a);

}  // namespace hfta::cuda
