// CUDA fused dropout (the contract is fused_ops/dropout.h). A model's mask comes from its own
// sequential random stream (core/rng.h), so it is drawn on the host exactly as the CPU op draws
// it (cpu::dropout_draw_mask, one model per host thread) into pinned staging memory, copied to
// saved.mask on the calling thread's stream, and applied by one kernel (dropout_kernels.cu): the
// same masks, and the same bits, as on the CPU. Drawing on the device instead needs a stream that
// can jump ahead to each element (docs/cuda.md).
#include "fused_ops/dropout.h"

#include <cuda_runtime.h>

#include <cstddef>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/kernels.h"

namespace hfta::cuda {

void dropout_forward(const DropoutParams& p, const DropoutForwardArgs& a) {
  const int64_t n = a.x.numel();
  if (!p.active()) {
    if (a.y.data != a.x.data)
      check(cudaMemcpyAsync(a.y.data, a.x.data, static_cast<size_t>(n) * sizeof(float),
                            cudaMemcpyDeviceToDevice, stream()),
            "cudaMemcpyAsync (dropout in eval mode)");
    return;
  }
  // The calling thread's staging for masks: the next forward draws into it once this one's copy
  // has read it.
  thread_local PinnedStaging staging;
  float* host_mask = staging.acquire(static_cast<size_t>(n) * sizeof(float));
  cpu::dropout_draw_mask(p, a.streams, host_mask);
  copy_to_device_async(staging.buffer.view(a.x.shape), a.saved.mask);
  staging.copied.record();
  check(kernels::dropout_forward(a.x.data, a.saved.mask.data, a.y.data, n, stream()),
        "dropout_forward kernel launch");
}

void dropout_backward(const DropoutParams& p, const DropoutBackwardArgs& a) {
  const int64_t n = a.dy.numel();
  if (!p.active()) {  // dx = dy or dx += dy: the add's backward kernel
    if (a.accumulate_dx || a.dx.data != a.dy.data)
      check(kernels::add_backward(a.dy.data, a.dx.data, n, a.accumulate_dx, stream()),
            "dropout_backward (identity) kernel launch");
    return;
  }
  check(kernels::dropout_backward(a.saved.mask.data, a.dy.data, a.dx.data, n, a.accumulate_dx,
                                  stream()),
        "dropout_backward kernel launch");
}

}  // namespace hfta::cuda
