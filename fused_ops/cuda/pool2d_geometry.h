// Pool2dParams / AdaptiveAvgPool2dParams (fused_ops/pool2d.h) as the kernels' plain geometry
// (pool2d_math.h): shared by the op's host side (fused_ops/cuda/pool2d.cpp) and the host tests
// (tests/cuda/test_cuda_pool.cpp), so the tests run the kernels' arithmetic on the geometry the op
// launches them with.
#pragma once

#include "fused_ops/cuda/pool2d_math.h"
#include "fused_ops/pool2d.h"

namespace hfta::cuda {

inline pool_math::PoolGeometry pool_geometry(const Pool2dParams& p) {
  return {.planes = p.N * p.B * p.C,
          .H = p.H,
          .W = p.W,
          .OH = p.out_h(),
          .OW = p.out_w(),
          .kh = p.kernel_h,
          .kw = p.kernel_w,
          .sh = p.effective_stride_h(),
          .sw = p.effective_stride_w(),
          .ph = p.pad_h,
          .pw = p.pad_w,
          .count_include_pad = p.count_include_pad};
}

inline pool_math::AdaptiveGeometry adaptive_pool_geometry(const AdaptiveAvgPool2dParams& p) {
  return {.planes = p.N * p.B * p.C, .H = p.H, .W = p.W, .OH = p.out_h, .OW = p.out_w};
}

}  // namespace hfta::cuda
