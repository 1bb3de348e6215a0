// CUDA fused softmax cross-entropy (the contract is fused_ops/cross_entropy.h), through the
// kernels of cross_entropy_kernels.cu; the arithmetic and the fixed order of its sums are
// cross_entropy_math.h's.
//
// The labels live on the device with the other tensors, but the contract raises hfta::Error for a
// label outside [0, K), and the loss divides by M, the rows not ignored: each call copies the N
// labels to the host (N * 4 bytes) and waits for them, checks them as the CPU op does, counts M
// and then launches without waiting. A device-side check (a flag read back later) would save the
// wait; not done yet.
#include "fused_ops/cross_entropy.h"

#include <cuda_runtime.h>

#include <vector>

#include "backend/cuda/runtime.h"
#include "backend/cuda/scratch.h"
#include "fused_ops/cuda/kernels.h"

namespace hfta::cuda {

namespace {

// The labels, checked on a host copy, as the kernels' problem description.
ce_math::CeShape checked_shape(const CrossEntropyParams& p, const IndexView& labels) {
  std::vector<int32_t> host(static_cast<size_t>(p.N));
  check(cudaMemcpyAsync(host.data(), labels.data, host.size() * sizeof(int32_t),
                        cudaMemcpyDeviceToHost, stream()),
        "cudaMemcpyAsync (cross-entropy labels to the host)");
  synchronize();
  const IndexView host_labels(host.data(), p.labels_shape());
  check_cross_entropy_labels(p, host_labels);
  return {.B = p.B,
          .N = p.N,
          .K = p.K,
          .M = cross_entropy_target_rows(p, host_labels),
          .has_ignore_index = p.ignore_index.has_value(),
          .ignore_index = p.ignore_index.value_or(0)};
}

}  // namespace

void cross_entropy_forward(const CrossEntropyParams& p, const CrossEntropyForwardArgs& a) {
  const ce_math::CeShape s = checked_shape(p, a.labels);
  check(kernels::cross_entropy_forward(s, a.logits.data, a.labels.data, a.saved.probs.data,
                                       a.losses.data, stream()),
        "cross_entropy_forward kernel launch");
}

void cross_entropy_backward(const CrossEntropyParams& p, const CrossEntropyBackwardArgs& a) {
  const ce_math::CeShape s = checked_shape(p, a.labels);
  check(kernels::cross_entropy_backward(s, a.saved.probs.data, a.labels.data, a.dlosses.data,
                                        a.dlogits.data, stream()),
        "cross_entropy_backward kernel launch");
}

void count_correct(const CrossEntropyParams& p, const CountCorrectArgs& a) {
  const ce_math::CeShape s = checked_shape(p, a.labels);
  // B counts in device scratch (int64 at the buffer's 256-byte aligned start), then to the host.
  auto* counts = reinterpret_cast<int64_t*>(device_scratch(2 * p.B));
  check(kernels::count_correct(s, a.logits.data, a.labels.data, counts, stream()),
        "count_correct kernel launch");
  check(cudaMemcpyAsync(a.correct.data(), counts, a.correct.size() * sizeof(int64_t),
                        cudaMemcpyDeviceToHost, stream()),
        "cudaMemcpyAsync (count_correct's counts to the host)");
  synchronize();
}

}  // namespace hfta::cuda
