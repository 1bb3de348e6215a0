// CUDA fused conv2d (the contract is fused_ops/conv2d.h): the plan of conv2d_gemms.h run with the
// kernels of conv2d_kernels.cu (im2col, a gathering col2im, the bias fill and bias gradient) and
// cublasSgemmStridedBatched, columns in the calling thread's device scratch
// (backend/cuda/scratch.h). fp32 throughout, no TF32 (backend/cuda/runtime.cpp).
#include "fused_ops/conv2d.h"

#include <limits>

#include "backend/cuda/cublas.h"
#include "backend/cuda/runtime.h"
#include "backend/cuda/scratch.h"
#include "fused_ops/cuda/conv2d_gemms.h"
#include "fused_ops/cuda/kernels.h"

namespace hfta::cuda {

namespace {

// cuBLAS takes 32-bit sizes and leading dimensions (64-bit strides).
int blas_int(int64_t v, const char* what) {
  HFTA_CHECK(v <= std::numeric_limits<int>::max(),
             "CUDA conv2d: {} = {} is beyond cuBLAS's 32-bit sizes: split the layer or the batch",
             what, v);
  return static_cast<int>(v);
}

// The plan's executor on the device: every call enqueues on the thread's stream.
struct DeviceExec {
  cudaStream_t s = stream();
  float* scratch(int64_t floats) { return device_scratch(floats); }
  void fill_bias(const float* bias, float* y, int64_t N, int64_t BC, int64_t P) {
    check(kernels::conv_fill_bias(bias, y, N, BC, P, s), "conv2d fill_bias kernel launch");
  }
  void bias_grad(const float* dy, float* dbias, int64_t N, int64_t BC, int64_t P) {
    HFTA_CHECK(BC <= std::numeric_limits<int>::max(),
               "CUDA conv2d: {} output channels over all models exceed the bias kernel's grid", BC);
    check(kernels::conv_bias_grad(dy, dbias, N, BC, P, s), "conv2d bias_grad kernel launch");
  }
  void im2col(const ConvGeometry& g, const float* x, float* col, int64_t images) {
    check(kernels::im2col(g, x, col, images, s), "conv2d im2col kernel launch");
  }
  void col2im(const ConvGeometry& g, const float* dcol, float* dx, int64_t images,
              bool accumulate) {
    check(kernels::col2im(g, dcol, dx, images, accumulate, s), "conv2d col2im kernel launch");
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

void conv2d_forward(const Conv2dParams& p, const Conv2dForwardArgs& a) {
  conv2d_forward_plan(p, a, kConv2dScratchCapFloats, DeviceExec{});
}

void conv2d_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a) {
  conv2d_backward_plan(p, a, kConv2dScratchCapFloats, DeviceExec{});
}

}  // namespace hfta::cuda
