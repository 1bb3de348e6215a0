// The CUDA BatchNorm1d's arithmetic on the rows layout (fused_ops/batchnorm1d.h;
// fused_ops/cuda/batchnorm1d_kernels.cu), as __host__ __device__ functions the kernels and the
// host test (tests/cuda/test_cuda_batchnorm1d.cpp) both run. The scheme is BatchNorm2d's
// (batchnorm2d_math.h, whose statistics, running update, normalization and gradient coefficients
// it reuses): one block of bn::kThreads threads per channel k = b*C + c; thread t reduces the
// channel's rows r = t, t + kThreads, ... in double, and the kThreads partial sums meet in a fixed
// tree. Only where a channel's values live differs: a column of model b's [R, C] rows.
// No project include but batchnorm2d_math.h and backend/cuda/host_device.h (nvcc, C++17).
//
// Known cost (unmeasured): a warp's threads read 32 rows of one column, 32 sectors for 32 floats;
// the blocks of neighbouring channels read the same sectors, which L2 may or may not still hold.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/host_device.h"
#include "fused_ops/cuda/batchnorm2d_math.h"

namespace hfta::cuda::bn1 {

// Where channel k's row r lives in [B, R, C].
struct RowsGeometry {
  int64_t R, C;
  HFTA_HOST_DEVICE int64_t count() const { return R; }
  HFTA_HOST_DEVICE int64_t offset(int64_t k, int64_t r) const {
    return ((k / C) * R + r) * C + k % C;
  }
};

// Thread t's partial sum of channel k's values.
HFTA_HOST_DEVICE inline double partial_sum(const float* x, const RowsGeometry& g, int64_t k,
                                           int t) {
  double s = 0.0;
  for (int64_t r = t; r < g.R; r += bn::kThreads) s += static_cast<double>(x[g.offset(k, r)]);
  return s;
}

// Thread t's partial sum of squared deviations from `mean`.
HFTA_HOST_DEVICE inline double partial_sq_dev(const float* x, const RowsGeometry& g, int64_t k,
                                              int t, float mean) {
  double s = 0.0;
  for (int64_t r = t; r < g.R; r += bn::kThreads) {
    const double d = static_cast<double>(x[g.offset(k, r)]) - mean;
    s = fma(d, d, s);
  }
  return s;
}

// Thread t's partial sums of dy and of dy * (x - mean), for backward.
HFTA_HOST_DEVICE inline void partial_grad_sums(const float* x, const float* dy,
                                               const RowsGeometry& g, int64_t k, int t, float mean,
                                               double& sum_dy, double& sum_dy_xmu) {
  sum_dy = 0.0;
  sum_dy_xmu = 0.0;
  for (int64_t r = t; r < g.R; r += bn::kThreads) {
    const int64_t o = g.offset(k, r);
    const double grad = static_cast<double>(dy[o]);
    sum_dy += grad;
    sum_dy_xmu = fma(grad, static_cast<double>(x[o]) - mean, sum_dy_xmu);
  }
}

}  // namespace hfta::cuda::bn1
