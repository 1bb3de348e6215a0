// The device executor of the GEMM plans of the CUDA conv2d (conv2d_gemms.h) and conv_transpose2d
// (conv_transpose2d_gemms.h): each call enqueues one of conv2d_kernels.cu's kernels or one
// cublasSgemmStridedBatched on the calling thread's stream, columns in its device scratch
// (backend/cuda/scratch.h). `op` names the op in errors. Host code: included by those ops' .cpp.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <limits>

#include "backend/cuda/cublas.h"
#include "backend/cuda/runtime.h"
#include "backend/cuda/scratch.h"
#include "core/determinism.h"
#include "core/error.h"
#include "fused_ops/cuda/conv2d_math.h"
#include "fused_ops/cuda/kernels.h"
#include "fused_ops/cuda/linear_gemms.h"

namespace hfta::cuda {

struct ConvDeviceExec {
  const char* op = "conv2d";
  cudaStream_t s = stream();

  // cuBLAS takes 32-bit sizes and leading dimensions (64-bit strides).
  int blas_int(int64_t v, const char* what) const {
    HFTA_CHECK(v <= std::numeric_limits<int>::max(),
               "CUDA {}: {} = {} is beyond cuBLAS's 32-bit sizes: split the layer or the batch", op,
               what, v);
    return static_cast<int>(v);
  }
  void launched(cudaError_t status, const char* kernel) const {
    if (status != cudaSuccess)
      check(status, fmt::format("{} {} kernel launch", op, kernel).c_str());
  }

  float* scratch(int64_t floats) { return device_scratch(floats); }
  void fill_bias(const float* bias, float* y, int64_t N, int64_t BC, int64_t P) {
    launched(kernels::conv_fill_bias(bias, y, N, BC, P, s), "fill_bias");
  }
  void bias_grad(const float* dy, float* dbias, int64_t N, int64_t BC, int64_t P) {
    HFTA_CHECK(BC <= std::numeric_limits<int>::max(),
               "CUDA {}: {} output channels over all models exceed the bias kernel's grid", op, BC);
    launched(kernels::conv_bias_grad(dy, dbias, N, BC, P, s), "bias_grad");
  }
  void im2col(const conv_math::ConvGeometry& g, const float* x, float* col, int64_t images) {
    launched(kernels::im2col(g, x, col, images, s), "im2col");
  }
  void col2im(const conv_math::ConvGeometry& g, const float* col, float* x, int64_t images,
              bool accumulate) {
    launched(kernels::col2im(g, col, x, images, accumulate, s), "col2im");
  }
  // In deterministic mode one call per batch entry (issue_per_entry): a (model, group, image)'s
  // product is the call its model's run alone makes.
  void gemm(const ColumnMajorGemm& g) {
    if (deterministic() && g.batch > 1)
      return issue_per_entry(g, [&](const ColumnMajorGemm& one) { strided_batched(one); });
    strided_batched(g);
  }
  void strided_batched(const ColumnMajorGemm& g) {
    const float one = 1.0f;
    HFTA_CUDA_CHECK(cublas().sgemm_strided_batched(
        blas(), g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
        g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, blas_int(g.m, "m"), blas_int(g.n, "n"),
        blas_int(g.k, "k"), &one, g.a, blas_int(g.lda, "lda"), g.stride_a, g.b,
        blas_int(g.ldb, "ldb"), g.stride_b, &g.beta, g.c, blas_int(g.ldc, "ldc"), g.stride_c,
        blas_int(g.batch, "batch")));
  }
};

}  // namespace hfta::cuda
