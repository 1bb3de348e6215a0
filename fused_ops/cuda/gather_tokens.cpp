// CUDA token gather (the contract is fused_ops/gather_tokens.h), through the kernels of
// gather_tokens_kernels.cu: the CPU op's bits (gather_tokens_math.h).
//
// The row indices live on the device, but the contract raises hfta::Error for a row outside the
// window: each call copies the K indices to the host (K * 4 bytes) and waits, then checks them as
// the CPU op does. Backward then groups the output rows by input row on the host and uploads the
// groups (R + 1 + at most K int32) into the thread's device scratch, so that the input gradient
// is a gather in a fixed order instead of a scatter with atomics.
#include "fused_ops/gather_tokens.h"

#include <cuda_runtime.h>

#include <vector>

#include "backend/cuda/runtime.h"
#include "backend/cuda/scratch.h"
#include "fused_ops/cuda/gather_tokens_kernels.h"
#include "fused_ops/cuda/gather_tokens_math.h"

namespace hfta::cuda {

namespace {

// The row indices copied to the host and checked there.
std::vector<int32_t> checked_host_rows(const GatherTokensParams& p, const IndexView& rows) {
  std::vector<int32_t> host(static_cast<size_t>(p.K));
  check(cudaMemcpyAsync(host.data(), rows.data, host.size() * sizeof(int32_t),
                        cudaMemcpyDeviceToHost, stream()),
        "cudaMemcpyAsync (gather_tokens row indices to the host)");
  synchronize();
  check_gather_tokens_rows(p, IndexView(host.data(), p.rows_shape()));
  return host;
}

}  // namespace

void gather_tokens_forward(const GatherTokensParams& p, const GatherTokensForwardArgs& a) {
  checked_host_rows(p, a.rows);
  check(
      kernels::gather_tokens_forward(a.x.data, a.rows.data, a.y.data, p.B, p.R, p.K, p.D, stream()),
      "gather_tokens_forward kernel launch");
}

void gather_tokens_backward(const GatherTokensParams& p, const GatherTokensBackwardArgs& a) {
  const std::vector<int32_t> rows = checked_host_rows(p, a.rows);
  const std::vector<int32_t> groups = gather_tokens_math::group_rows(rows.data(), p.K, p.R);
  // int32 in float-sized scratch; a pageable upload returns once the host copy is staged.
  auto* on_device = reinterpret_cast<int32_t*>(device_scratch(static_cast<int64_t>(groups.size())));
  check(cudaMemcpyAsync(on_device, groups.data(), groups.size() * sizeof(int32_t),
                        cudaMemcpyHostToDevice, stream()),
        "cudaMemcpyAsync (gather_tokens row groups to the device)");
  check(kernels::gather_tokens_backward(on_device, a.dy.data, a.dx.data, p.B, p.R, p.K, p.D,
                                        a.accumulate_dx, stream()),
        "gather_tokens_backward kernel launch");
}

}  // namespace hfta::cuda
