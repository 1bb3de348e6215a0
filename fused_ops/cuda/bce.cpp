// CUDA fused BCE with logits (the contract is fused_ops/bce.h), through the kernels of
// bce_kernels.cu; the arithmetic and the fixed order of its sums are bce_math.h's.
//
// The targets live on the device with the logits, but the contract raises hfta::Error for a
// target outside [0, 1]: each call copies the N targets to the host (N * 4 bytes), waits, and
// checks them as the CPU op does, then launches without waiting. A GAN's targets are constant
// (all 1 or all 0), so a device-side flag read back later would save the wait; not done yet.
#include "fused_ops/bce.h"

#include <cuda_runtime.h>

#include <vector>

#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/bce_kernels.h"

namespace hfta::cuda {

namespace {

void check_device_targets(const BceWithLogitsParams& p, const TensorView& targets) {
  std::vector<float> host(static_cast<size_t>(p.N));
  check(cudaMemcpyAsync(host.data(), targets.data, host.size() * sizeof(float),
                        cudaMemcpyDeviceToHost, stream()),
        "cudaMemcpyAsync (bce_with_logits targets to the host)");
  synchronize();
  check_bce_with_logits_targets(p, TensorView(host.data(), p.targets_shape()));
}

}  // namespace

void bce_with_logits_forward(const BceWithLogitsParams& p, const BceWithLogitsForwardArgs& a) {
  check_device_targets(p, a.targets);
  check(kernels::bce_forward(a.logits.data, a.targets.data, a.losses.data,
                             a.mean_sigmoid.empty() ? nullptr : a.mean_sigmoid.data, p.B, p.N,
                             stream()),
        "bce_with_logits_forward kernel launch");
}

void bce_with_logits_backward(const BceWithLogitsParams& p, const BceWithLogitsBackwardArgs& a) {
  check_device_targets(p, a.targets);
  check(kernels::bce_backward(a.logits.data, a.targets.data, a.dlosses.data, a.dlogits.data, p.B,
                              p.N, a.accumulate_dx, stream()),
        "bce_with_logits_backward kernel launch");
}

}  // namespace hfta::cuda
