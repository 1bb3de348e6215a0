// CUDA T-Net regularizer (the contract is fused_ops/transform_regularizer.h), through the kernels
// of transform_regularizer_kernels.cu: the CPU op's bits (transform_regularizer_math.h). M and
// the norms (doubles, B*N*(k*k + 1) of them) live in the thread's device scratch for the call.
#include "fused_ops/transform_regularizer.h"

#include <limits>

#include "backend/cuda/runtime.h"
#include "backend/cuda/scratch.h"
#include "core/error.h"
#include "fused_ops/cuda/transform_regularizer_kernels.h"

namespace hfta::cuda {

namespace {

struct Scratch {
  double *m, *norms;
};

// Doubles in float-sized scratch: device_scratch's buffer is cudaMalloc'd, so 8-byte aligned.
Scratch scratch_for(const TransformRegularizerParams& p) {
  const int64_t matrices = p.B * p.N, elements = matrices * p.k * p.k;
  HFTA_CHECK(elements <= std::numeric_limits<int64_t>::max() / 4,
             "transform_regularizer on the device: B={} N={} k={} is too large for its scratch",
             p.B, p.N, p.k);
  auto* m = reinterpret_cast<double*>(device_scratch(2 * (elements + matrices)));
  return {m, m + elements};
}

}  // namespace

void transform_regularizer_forward(const TransformRegularizerParams& p,
                                   const TransformRegularizerForwardArgs& a) {
  const Scratch s = scratch_for(p);
  check(kernels::transform_regularizer_forward(a.a.data, a.loss.data, s.m, s.norms, p.B, p.N, p.k,
                                               p.scale, stream()),
        "transform_regularizer_forward kernel launch");
}

void transform_regularizer_backward(const TransformRegularizerParams& p,
                                    const TransformRegularizerBackwardArgs& a) {
  const Scratch s = scratch_for(p);
  check(kernels::transform_regularizer_backward(a.a.data, a.dloss.data, a.da.data, s.m, s.norms,
                                                p.B, p.N, p.k, p.scale, a.accumulate_dx, stream()),
        "transform_regularizer_backward kernel launch");
}

}  // namespace hfta::cuda
