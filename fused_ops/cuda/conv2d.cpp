// CUDA fused conv2d (the contract is fused_ops/conv2d.h): on cuDNN where it is loadable and can
// express the problem (conv2d_cudnn.h; HFTA_CUDA_CONV=gemm|cudnn forces either,
// HFTA_CUDA_CONV=cudnn-per-model runs B per-model cuDNN convolutions for comparison, and
// HFTA_CUDA_CONV=implicit runs hfta's implicit-GEMM kernels, conv2d_implicit.h), else the plan of
// conv2d_gemms.h run with the kernels of conv2d_kernels.cu (im2col, a gathering col2im, the bias
// fill and bias gradient) and cublasSgemmStridedBatched, columns in the calling thread's device
// scratch (backend/cuda/scratch.h). fp32 throughout, no TF32 (backend/cuda/runtime.cpp).
#include "fused_ops/conv2d.h"

#include <cstdlib>
#include <limits>
#include <optional>
#include <string_view>

#include "backend/cuda/cublas.h"
#include "backend/cuda/cudnn.h"
#include "backend/cuda/runtime.h"
#include "backend/cuda/scratch.h"
#include "fused_ops/cuda/conv2d_cudnn.h"
#include "fused_ops/cuda/conv2d_gemms.h"
#include "fused_ops/cuda/conv2d_implicit.h"
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

CudaConvBackend cuda_conv_backend_from_env() {
  const char* env = std::getenv("HFTA_CUDA_CONV");
  const std::string_view v = env != nullptr ? env : "";
  if (v.empty() || v == "auto") return CudaConvBackend::kAuto;
  if (v == "gemm") return CudaConvBackend::kGemm;
  if (v == "cudnn") return CudaConvBackend::kCudnn;
  if (v == "cudnn-per-model") return CudaConvBackend::kCudnnPerModel;
  if (v == "implicit") return CudaConvBackend::kImplicit;
  fail("HFTA_CUDA_CONV={}: choose auto (the default), gemm, cudnn, cudnn-per-model or implicit", v);
}

CudnnConvMapping cudnn_conv_mapping(CudaConvBackend backend) {
  return backend == CudaConvBackend::kCudnnPerModel ? CudnnConvMapping::kPerModel
                                                    : CudnnConvMapping::kGrouped;
}

bool conv2d_uses_cudnn(const Conv2dParams& p, CudaConvBackend backend, bool cudnn_loaded) {
  if (backend == CudaConvBackend::kGemm || backend == CudaConvBackend::kImplicit) return false;
  // Auto and cudnn run the grouped call, which cannot express a shared input with groups > 1;
  // cudnn-per-model runs each model's own convolution, which can (every problem whose sizes fit
  // cuDNN's 32-bit ints).
  const bool expressible = cudnn_conv_shapes(p, cudnn_conv_mapping(backend)).has_value();
  if (backend == CudaConvBackend::kAuto) return expressible && cudnn_loaded;
  const char* name = backend == CudaConvBackend::kCudnn ? "cudnn" : "cudnn-per-model";
  HFTA_CHECK(expressible,
             "HFTA_CUDA_CONV={}: cuDNN cannot run this convolution ({}): unset HFTA_CUDA_CONV "
             "to run such layers on hfta's GEMM path",
             name,
             backend == CudaConvBackend::kCudnn && p.shared_input && p.groups > 1
                 ? "a shared input with groups > 1; HFTA_CUDA_CONV=cudnn-per-model runs it"
                 : "a size beyond cuDNN's 32-bit ints");
  HFTA_CHECK(cudnn_loaded, "HFTA_CUDA_CONV={}: {}", name, cudnn_status());
  return true;
}

namespace {
// The cuDNN convolutions to run `p` as, or nullopt for the GEMM path; cuDNN's library is loaded
// only when the choice may fall on it. Under auto, a problem for which cuDNN has no usable
// algorithm runs on the GEMM path.
std::optional<CudnnConvShapes> cudnn_shapes_to_run(const Conv2dParams& p, CudaConvBackend backend) {
  if (backend == CudaConvBackend::kGemm) return std::nullopt;
  const std::optional<CudnnConvShapes> shapes = cudnn_conv_shapes(p, cudnn_conv_mapping(backend));
  if (!conv2d_uses_cudnn(p, backend, shapes && cudnn_available())) return std::nullopt;
  if (cudnn_conv2d_has_algorithms(p, *shapes)) return shapes;
  HFTA_CHECK(backend == CudaConvBackend::kAuto,
             "HFTA_CUDA_CONV={}: cuDNN offers no deterministic, direct-sum fp32 algorithm for "
             "this convolution: unset HFTA_CUDA_CONV",
             backend == CudaConvBackend::kCudnn ? "cudnn" : "cudnn-per-model");
  return std::nullopt;
}
}  // namespace

void conv2d_forward(const Conv2dParams& p, const Conv2dForwardArgs& a) {
  const CudaConvBackend backend = cuda_conv_backend_from_env();
  if (backend == CudaConvBackend::kImplicit) return implicit_conv2d_forward(p, a);
  if (const auto shapes = cudnn_shapes_to_run(p, backend))
    return cudnn_conv2d_forward(p, *shapes, a);
  conv2d_forward_plan(p, a, kConv2dScratchCapFloats, DeviceExec{});
}

void conv2d_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a) {
  const CudaConvBackend backend = cuda_conv_backend_from_env();
  if (backend == CudaConvBackend::kImplicit) return implicit_conv2d_backward(p, a);
  if (const auto shapes = cudnn_shapes_to_run(p, backend))
    return cudnn_conv2d_backward(p, *shapes, a);
  conv2d_backward_plan(p, a, kConv2dScratchCapFloats, DeviceExec{});
}

}  // namespace hfta::cuda
