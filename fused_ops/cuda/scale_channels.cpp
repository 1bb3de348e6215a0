// CUDA channel scaling (the contract is fused_ops/scale_channels.h), through the kernels of
// scale_channels_kernels.cu: the CPU op's bits (scale_channels_math.h).
#include "fused_ops/scale_channels.h"

#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/kernels.h"

namespace hfta::cuda {

void scale_channels_forward(const ScaleChannelsParams& p, const ScaleChannelsForwardArgs& a) {
  check(kernels::scale_channels_forward(a.x.data, a.s.data, a.y.data, p.N * p.B * p.C, p.HW,
                                        stream()),
        "scale_channels_forward kernel launch");
}

void scale_channels_backward(const ScaleChannelsParams& p, const ScaleChannelsBackwardArgs& a) {
  check(kernels::scale_channels_backward(a.x.data, a.s.data, a.dy.data, a.dx.data, a.ds.data,
                                         p.N * p.B * p.C, p.HW, a.accumulate_dx, a.accumulate_ds,
                                         stream()),
        "scale_channels_backward kernel launch");
}

}  // namespace hfta::cuda
