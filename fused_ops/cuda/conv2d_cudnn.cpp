// The fused conv2d on cuDNN (fused_ops/cuda/conv2d_cudnn_shapes.h says how the B models map onto
// one grouped convolution, or onto B per-model ones; fused_ops/cuda/conv2d.cpp decides when it
// runs). fp32 without TF32 (CUDNN_FMA_MATH, algorithms using tensor-op math skipped; TF32 where
// HFTA_CUDA_TF32=1 admits it),
// deterministic direct-sum algorithms only (no FFT, no Winograd, no atomics), the workspace in
// the thread's device scratch (at most kCudnnWorkspaceCapBytes); HFTA_CUDNN_BACKWARD=atomic also
// admits the backward algorithms that add with atomics. Each direction's algorithm is
// the best-ranked such candidate of cuDNN's heuristics, looked up once per mapped problem and
// thread; the per-model mapping's B calls share it (they are one problem at B offsets).
#include "fused_ops/cuda/conv2d_cudnn.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <utility>

#include "backend/cuda/cudnn.h"
#include "backend/cuda/runtime.h"
#include "backend/cuda/scratch.h"
#include "core/error.h"
#include "fused_ops/conv2d.h"

namespace hfta::cuda {

#if HFTA_HAS_CUDNN_HEADERS

namespace {

constexpr size_t kCudnnWorkspaceCapBytes = size_t{256} << 20;

// The descriptors of one call; destroyed with it (creating them is host work of a few
// microseconds, small beside a launch).
class Descriptors {
 public:
  explicit Descriptors(const CudnnConvShapes& s) : lib_(cudnn()) {
    try {
      make(s);
    } catch (...) {
      release();  // a half-made set: the destructor of an unfinished object does not run
      throw;
    }
  }
  ~Descriptors() { release(); }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;

  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

 private:
  void make(const CudnnConvShapes& s) {
    check(lib_.create_tensor(&x), "cudnnCreateTensorDescriptor");
    check(lib_.create_tensor(&y), "cudnnCreateTensorDescriptor");
    check(lib_.create_tensor(&bias), "cudnnCreateTensorDescriptor");
    check(lib_.create_filter(&w), "cudnnCreateFilterDescriptor");
    check(lib_.create_conv(&conv), "cudnnCreateConvolutionDescriptor");
    // Strides even where packed, so one code path describes both mappings' tensors.
    auto tensor = [&](cudnnTensorDescriptor_t d, const CudnnTensorShape& t) {
      check(lib_.set_tensor_4d_ex(d, CUDNN_DATA_FLOAT, t.dims[0], t.dims[1], t.dims[2], t.dims[3],
                                  t.strides[0], t.strides[1], t.strides[2], t.strides[3]),
            "cudnnSetTensor4dDescriptorEx");
    };
    tensor(x, s.x);
    tensor(y, s.y);
    tensor(bias, s.bias);
    check(
        lib_.set_filter_4d(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.w[0], s.w[1], s.w[2], s.w[3]),
        "cudnnSetFilter4dDescriptor");
    check(lib_.set_conv_2d(conv, s.pad_h, s.pad_w, s.stride_h, s.stride_w, s.dilation_h,
                           s.dilation_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "cudnnSetConvolution2dDescriptor");
    check(lib_.set_group_count(conv, s.groups), "cudnnSetConvolutionGroupCount");
    // Plain fp32 FMAs; HFTA_CUDA_TF32=1 lets cuDNN use TF32 tensor cores instead.
    check(lib_.set_math_type(conv, tf32_from_env() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH),
          "cudnnSetConvolutionMathType");
  }
  void release() {
    if (x) lib_.destroy_tensor(x);
    if (y) lib_.destroy_tensor(y);
    if (bias) lib_.destroy_tensor(bias);
    if (w) lib_.destroy_filter(w);
    if (conv) lib_.destroy_conv(conv);
  }

  const Cudnn& lib_;
};

// The algorithms whose sums are a direct convolution's, in some order: the error bound of an fp32
// sum (what the tests hold every backend to). FFT and Winograd transform the operands and round
// differently; the backward passes' ALGO_0 (and the filter's ALGO_3) add with atomics, in an
// order that changes from run to run.
bool accurate(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
}
bool accurate(cudnnConvolutionFwdAlgo_t a, bool) { return accurate(a); }
bool accurate(cudnnConvolutionBwdDataAlgo_t a, bool atomic) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 ||
         (atomic && a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0);
}
bool accurate(cudnnConvolutionBwdFilterAlgo_t a, bool atomic) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 ||
         (atomic &&
          (a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3));
}

// What the environment admits beyond the default (HFTA_CUDNN_BACKWARD, HFTA_CUDA_TF32).
struct Admitted {
  bool atomic_backward = false, tf32 = false;
  auto operator<=>(const Admitted&) const = default;
};

// A candidate cuDNN ranked that ran its heuristics, is deterministic (unless the backward's
// atomic ones are admitted) and accurate, does plain fp32 math (or TF32's tensor-op math where
// admitted) and fits the workspace cap.
template <typename Perf>
bool usable(const Perf& perf, bool atomic, bool tf32) {
  return perf.status == CUDNN_STATUS_SUCCESS &&
         (perf.determinism == CUDNN_DETERMINISTIC || atomic) && accurate(perf.algo, atomic) &&
         (perf.mathType == CUDNN_FMA_MATH || perf.mathType == CUDNN_DEFAULT_MATH ||
          (tf32 && perf.mathType == CUDNN_TENSOR_OP_MATH)) &&
         perf.memory <= kCudnnWorkspaceCapBytes;
}

struct Algorithms {
  cudnnConvolutionFwdAlgo_t forward{};
  cudnnConvolutionBwdDataAlgo_t backward_data{};
  cudnnConvolutionBwdFilterAlgo_t backward_filter{};
  size_t forward_bytes = 0, backward_data_bytes = 0, backward_filter_bytes = 0;
};

// The best-ranked usable candidate, or nullopt.
template <typename Perf, typename Query>
std::optional<Perf> pick(const char* query_name, bool atomic, bool tf32, Query query) {
  Perf perfs[16];
  int returned = 0;
  check(query(16, &returned, perfs), query_name);
  for (int k = 0; k < returned; ++k)
    if (usable(perfs[k], atomic, tf32)) return perfs[k];
  return std::nullopt;
}

// Looked up once per mapped problem and thread (cuDNN's heuristics cost tens of microseconds):
// the algorithms depend only on the descriptors, which `s` describes (`d` is made from `s`), and
// on what the environment admits. nullopt when some direction has no usable algorithm.
const std::optional<Algorithms>& algorithms(const CudnnConvShapes& s, const Descriptors& d) {
  thread_local std::map<std::pair<Admitted, CudnnConvShapes>, std::optional<Algorithms>> cache;
  const Admitted admitted{.atomic_backward = cudnn_atomic_backward_from_env(),
                          .tf32 = tf32_from_env()};
  const bool atomic = admitted.atomic_backward, tf32 = admitted.tf32;
  const auto key = std::make_pair(admitted, s);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const Cudnn& lib = cudnn();
  cudnnHandle_t h = cudnn_handle();
  const auto forward = pick<cudnnConvolutionFwdAlgoPerf_t>(
      "cudnnGetConvolutionForwardAlgorithm_v7", false, tf32,
      [&](int n, int* got, cudnnConvolutionFwdAlgoPerf_t* out) {
        return lib.forward_algorithms(h, d.x, d.w, d.conv, d.y, n, got, out);
      });
  const auto backward_data = pick<cudnnConvolutionBwdDataAlgoPerf_t>(
      "cudnnGetConvolutionBackwardDataAlgorithm_v7", atomic, tf32,
      [&](int n, int* got, cudnnConvolutionBwdDataAlgoPerf_t* out) {
        return lib.backward_data_algorithms(h, d.w, d.y, d.conv, d.x, n, got, out);
      });
  const auto backward_filter = pick<cudnnConvolutionBwdFilterAlgoPerf_t>(
      "cudnnGetConvolutionBackwardFilterAlgorithm_v7", atomic, tf32,
      [&](int n, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* out) {
        return lib.backward_filter_algorithms(h, d.x, d.y, d.conv, d.w, n, got, out);
      });
  if (!forward || !backward_data || !backward_filter)
    return cache.emplace(key, std::nullopt).first->second;
  Algorithms a;
  a.forward = forward->algo;
  a.backward_data = backward_data->algo;
  a.backward_filter = backward_filter->algo;
  check(lib.forward_workspace(h, d.x, d.w, d.conv, d.y, a.forward, &a.forward_bytes),
        "cudnnGetConvolutionForwardWorkspaceSize");
  check(lib.backward_data_workspace(h, d.w, d.y, d.conv, d.x, a.backward_data,
                                    &a.backward_data_bytes),
        "cudnnGetConvolutionBackwardDataWorkspaceSize");
  check(lib.backward_filter_workspace(h, d.x, d.y, d.conv, d.w, a.backward_filter,
                                      &a.backward_filter_bytes),
        "cudnnGetConvolutionBackwardFilterWorkspaceSize");
  return cache.emplace(key, a).first->second;
}

const Algorithms& required_algorithms(const Conv2dParams& p, const CudnnConvShapes& s,
                                      const Descriptors& d) {
  const std::optional<Algorithms>& a = algorithms(s, d);
  HFTA_CHECK(a.has_value(),
             "cuDNN offers no deterministic, direct-sum fp32 algorithm within {} MiB of workspace "
             "for the {} convolution of {} models ({} -> {} channels, kernel {}x{}): run it with "
             "HFTA_CUDA_CONV=gemm",
             kCudnnWorkspaceCapBytes >> 20, s.calls > 1 ? "per-model" : "grouped", p.B,
             p.in_channels, p.out_channels, p.kernel_h, p.kernel_w);
  return *a;
}

// `bytes` of the thread's device scratch (cuDNN's workspace), or null for none.
void* workspace(size_t bytes) {
  if (bytes == 0) return nullptr;
  return device_scratch(static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float)));
}

}  // namespace

bool cudnn_conv2d_has_algorithms(const Conv2dParams&, const CudnnConvShapes& s) {
  const Descriptors d(s);
  return algorithms(s, d).has_value();
}

// Call b of `s.calls` runs on the fused tensors' data `step` * b floats in (conv2d_cudnn_shapes.h);
// all of them enqueue on the thread's stream, in model order.
void cudnn_conv2d_forward(const Conv2dParams& p, const CudnnConvShapes& s,
                          const Conv2dForwardArgs& a) {
  const Cudnn& lib = cudnn();
  const Descriptors d(s);
  const Algorithms& algo = required_algorithms(p, s, d);
  const float one = 1.0f, zero = 0.0f;
  for (int64_t b = 0; b < s.calls; ++b) {
    float* y = a.y.data + b * s.y_step;
    check(lib.forward(cudnn_handle(), &one, d.x, a.x.data + b * s.x_step, d.w,
                      a.weight.data + b * s.w_step, d.conv, algo.forward,
                      workspace(algo.forward_bytes), algo.forward_bytes, &zero, d.y, y),
          "cudnnConvolutionForward");
    if (!a.bias.empty())
      check(
          lib.add_tensor(cudnn_handle(), &one, d.bias, a.bias.data + b * s.bias_step, &one, d.y, y),
          "cudnnAddTensor (the bias)");
  }
}

void cudnn_conv2d_backward(const Conv2dParams& p, const CudnnConvShapes& s,
                           const Conv2dBackwardArgs& a) {
  const Cudnn& lib = cudnn();
  const Descriptors d(s);
  const Algorithms& algo = required_algorithms(p, s, d);
  const float one = 1.0f, zero = 0.0f;
  for (int64_t b = 0; b < s.calls; ++b) {
    const float* dy = a.dy.data + b * s.y_step;
    const float* x = a.x.data + b * s.x_step;
    const float* w = a.weight.data + b * s.w_step;
    // dweight and dbias accumulate (beta 1), dx is written or added (fused_ops/conv2d.h). Calls
    // that share x (x_step 0) sum their gradients into it: the first writes (or adds, with
    // accumulate_dx), the others add, in model order.
    if (!a.dbias.empty())
      check(lib.backward_bias(cudnn_handle(), &one, d.y, dy, &one, d.bias,
                              a.dbias.data + b * s.bias_step),
            "cudnnConvolutionBackwardBias");
    if (!a.dweight.empty())
      check(lib.backward_filter(cudnn_handle(), &one, d.x, x, d.y, dy, d.conv, algo.backward_filter,
                                workspace(algo.backward_filter_bytes), algo.backward_filter_bytes,
                                &one, d.w, a.dweight.data + b * s.w_step),
            "cudnnConvolutionBackwardFilter");
    if (!a.dx.empty()) {
      const bool add = a.accumulate_dx || (b > 0 && s.x_step == 0);
      check(lib.backward_data(cudnn_handle(), &one, d.w, w, d.y, dy, d.conv, algo.backward_data,
                              workspace(algo.backward_data_bytes), algo.backward_data_bytes,
                              add ? &one : &zero, d.x, a.dx.data + b * s.x_step),
            "cudnnConvolutionBackwardData");
    }
  }
}

#else

bool cudnn_conv2d_has_algorithms(const Conv2dParams&, const CudnnConvShapes&) { return false; }

void cudnn_conv2d_forward(const Conv2dParams&, const CudnnConvShapes&, const Conv2dForwardArgs&) {
  fail("{}", cudnn_status());
}
void cudnn_conv2d_backward(const Conv2dParams&, const CudnnConvShapes&, const Conv2dBackwardArgs&) {
  fail("{}", cudnn_status());
}

#endif

}  // namespace hfta::cuda
