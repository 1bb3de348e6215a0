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
#include "fused_ops/cuda/conv_transpose2d_gemms.h"
#include "fused_ops/cuda/kernels.h"

namespace hfta::cuda {

namespace {

// cuBLAS takes 32-bit sizes and leading dimensions (64-bit strides).
int blas_int(int64_t v, const char* what) {
  HFTA_CHECK(v <= std::numeric_limits<int>::max(),
             "CUDA conv_transpose2d: {} = {} is beyond cuBLAS's 32-bit sizes: split the layer or "
             "the batch",
             what, v);
  return static_cast<int>(v);
}

// The plan's executor on the device: every call enqueues on the thread's stream.
struct DeviceExec {
  cudaStream_t s = stream();
  float* scratch(int64_t floats) { return device_scratch(floats); }
  void fill_bias(const float* bias, float* y, int64_t N, int64_t BC, int64_t P) {
    check(kernels::conv_fill_bias(bias, y, N, BC, P, s),
          "conv_transpose2d fill_bias kernel launch");
  }
  void bias_grad(const float* dy, float* dbias, int64_t N, int64_t BC, int64_t P) {
    HFTA_CHECK(BC <= std::numeric_limits<int>::max(),
               "CUDA conv_transpose2d: {} output channels over all models exceed the bias "
               "kernel's grid",
               BC);
    check(kernels::conv_bias_grad(dy, dbias, N, BC, P, s),
          "conv_transpose2d bias_grad kernel launch");
  }
  void im2col(const ConvGeometry& g, const float* dy, float* col, int64_t images) {
    check(kernels::im2col(g, dy, col, images, s), "conv_transpose2d im2col kernel launch");
  }
  void col2im(const ConvGeometry& g, const float* col, float* y, int64_t images, bool accumulate) {
    check(kernels::col2im(g, col, y, images, accumulate, s),
          "conv_transpose2d col2im kernel launch");
  }
  void gemm(const ColumnMajorGemm& g) {
    const float one = 1.0f;
    HFTA_CUDA_CHECK(cublas().sgemm_strided_batched(
        blas(), g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
        g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, blas_int(g.m, "m"), blas_int(g.n, "n"),
        blas_int(g.k, "k"), &one, g.a, blas_int(g.lda, "lda"), g.stride_a, g.b,
        blas_int(g.ldb, "ldb"), g.stride_b, &g.beta, g.c, blas_int(g.ldc, "ldc"), g.stride_c,
        blas_int(g.batch, "batch")));
  }
};

}  // namespace

void conv_transpose2d_forward(const ConvTranspose2dParams& p, const ConvTranspose2dForwardArgs& a) {
  conv_transpose2d_forward_plan(p, a, kConv2dScratchCapFloats, deterministic(), DeviceExec{});
}

void conv_transpose2d_backward(const ConvTranspose2dParams& p,
                               const ConvTranspose2dBackwardArgs& a) {
  conv_transpose2d_backward_plan(p, a, kConv2dScratchCapFloats, deterministic(), DeviceExec{});
}

}  // namespace hfta::cuda
