// The CUDA ops' GEMM plans executed on the host, so their descriptions (operands, leading
// dimensions, strides, betas, batch counts) are checked without a GPU: a naive column-major GEMM
// with cuBLAS's contract, and the conv plans' executor (conv2d_gemms.h, conv_transpose2d_gemms.h)
// built on it and on the kernels' element functions (conv2d_math.h) over every index.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "fused_ops/cuda/conv2d_math.h"
#include "fused_ops/cuda/linear_gemms.h"

namespace hfta::test {

// C = alpha op(A) op(B) + beta C per batch entry, column-major, each dot product in double and
// rounded to float before alpha and beta apply (as a float GEMM's would be).
inline void host_column_major_gemm(const cuda::ColumnMajorGemm& g, float alpha = 1.0f) {
  for (int64_t i = 0; i < g.batch; ++i) {
    const float *a = g.a + i * g.stride_a, *b = g.b + i * g.stride_b;
    float* c = g.c + i * g.stride_c;
    for (int64_t col = 0; col < g.n; ++col)
      for (int64_t row = 0; row < g.m; ++row) {
        double sum = 0.0;
        for (int64_t l = 0; l < g.k; ++l)
          sum += double(g.transpose_a ? a[l + row * g.lda] : a[row + l * g.lda]) *
                 (g.transpose_b ? b[col + l * g.ldb] : b[l + col * g.ldb]);
        float& out = c[row + col * g.ldc];
        const double scaled = double(alpha) * static_cast<float>(sum);
        out = g.beta == 0.0f ? static_cast<float>(scaled)
                             : static_cast<float>(double(g.beta) * out + scaled);
      }
  }
}

// The conv plans' executor on the host: the kernels' element functions over every index,
// host_column_major_gemm, scratch refilled with NaN at every request (a column the plan forgets
// to fill shows up).
struct HostConvExec {
  std::vector<float> scratch_buffer;
  float* scratch(int64_t floats) {
    scratch_buffer.assign(static_cast<size_t>(std::max<int64_t>(floats, 1)),
                          std::numeric_limits<float>::quiet_NaN());
    return scratch_buffer.data();
  }
  void fill_bias(const float* bias, float* y, int64_t N, int64_t BC, int64_t P) {
    for (int64_t i = 0; i < N * BC * P; ++i) y[i] = bias[conv_math::bias_channel(i, BC, P)];
  }
  void bias_grad(const float* dy, float* dbias, int64_t N, int64_t BC, int64_t P) {
    for (int64_t c = 0; c < BC; ++c) {
      double sum = 0.0;
      for (int64_t e = 0; e < N * P; ++e) sum += dy[((e / P) * BC + c) * P + e % P];
      dbias[c] += static_cast<float>(sum);
    }
  }
  void im2col(const conv_math::ConvGeometry& g, const float* x, float* col, int64_t images) {
    for (int64_t i = 0; i < images * g.col_rows() * g.positions(); ++i)
      col[i] = conv_math::im2col_value(g, x, i);
  }
  void col2im(const conv_math::ConvGeometry& g, const float* col, float* x, int64_t images,
              bool accumulate) {
    for (int64_t i = 0; i < images * g.x_image(); ++i)
      x[i] = conv_math::col2im_value(g, col, i, accumulate ? x[i] : 0.0f, accumulate);
  }
  void gemm(const cuda::ColumnMajorGemm& g) { host_column_major_gemm(g); }
};

}  // namespace hfta::test
