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
#include "core/determinism.h"
#include "fused_ops/cuda/conv2d_cudnn.h"
#include "fused_ops/cuda/conv2d_gemms.h"
#include "fused_ops/cuda/conv2d_implicit.h"
#include "fused_ops/cuda/conv_device_exec.h"
#include "fused_ops/cuda/kernels.h"

namespace hfta::cuda {

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

bool cudnn_atomic_backward_from_env() {
  const char* env = std::getenv("HFTA_CUDNN_BACKWARD");
  const std::string_view v = env != nullptr ? env : "";
  if (v.empty() || v == "deterministic") return false;
  if (v == "atomic") return !deterministic();
  fail("HFTA_CUDNN_BACKWARD={}: choose deterministic (the default) or atomic", v);
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

// HFTA_CUDA_CONV's choice; in deterministic mode auto is the GEMM path, whose per-entry calls give
// model b the bits of its run alone (cuDNN's grouped call, and the algorithm it picks, depend on
// B).
CudaConvBackend conv_backend() {
  const CudaConvBackend backend = cuda_conv_backend_from_env();
  return backend == CudaConvBackend::kAuto && deterministic() ? CudaConvBackend::kGemm : backend;
}
}  // namespace

void conv2d_forward(const Conv2dParams& p, const Conv2dForwardArgs& a) {
  const CudaConvBackend backend = conv_backend();
  if (backend == CudaConvBackend::kImplicit) return implicit_conv2d_forward(p, a);
  if (const auto shapes = cudnn_shapes_to_run(p, backend))
    return cudnn_conv2d_forward(p, *shapes, a);
  conv2d_forward_plan(p, a, kConv2dScratchCapFloats, ConvDeviceExec{.op = "conv2d"});
}

void conv2d_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a) {
  const CudaConvBackend backend = conv_backend();
  if (backend == CudaConvBackend::kImplicit) return implicit_conv2d_backward(p, a);
  if (const auto shapes = cudnn_shapes_to_run(p, backend))
    return cudnn_conv2d_backward(p, *shapes, a);
  conv2d_backward_plan(p, a, kConv2dScratchCapFloats, ConvDeviceExec{.op = "conv2d"});
}

}  // namespace hfta::cuda
