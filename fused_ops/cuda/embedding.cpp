// CUDA fused embedding (the contract is fused_ops/embedding.h), through the kernels of
// embedding_kernels.cu; the arithmetic is embedding_math.h's.
//
// The ids live on the device, but the contract raises hfta::Error for an id outside [0, V): each
// call copies the R ids to the host (R * 4 bytes) and waits, then checks them as the CPU op does.
// Backward then groups the rows by id on the host (embedding_groups.h) and uploads the groups
// (at most V + 1 + 2R int32) into the thread's device scratch, so that the weight gradient is a
// gather in a fixed order instead of a scatter with atomics. A device-side sort would save the
// host round trip; not done yet (docs/cuda.md).
#include "fused_ops/cuda/embedding.h"

#include <cuda_runtime.h>

#include <limits>
#include <vector>

#include "backend/cuda/runtime.h"
#include "backend/cuda/scratch.h"
#include "fused_ops/cuda/embedding_groups.h"
#include "fused_ops/cuda/embedding_kernels.h"

namespace hfta::cuda {

namespace {

embedding_math::EmbShape shape_of(const EmbeddingParams& p) {
  return {.B = p.B, .R = p.R, .V = p.V, .D = p.D};
}

// The ids copied to the host, where the op's checks read them.
std::vector<int32_t> host_ids(const EmbeddingParams& p, const IndexView& ids) {
  std::vector<int32_t> host(static_cast<size_t>(p.R));
  check(cudaMemcpyAsync(host.data(), ids.data, host.size() * sizeof(int32_t),
                        cudaMemcpyDeviceToHost, stream()),
        "cudaMemcpyAsync (embedding ids to the host)");
  synchronize();
  return host;
}

}  // namespace

void embedding_forward(const EmbeddingParams& p, const EmbeddingForwardArgs& a) {
  // The dispatching op checked shapes and devices; the ids' range needs their values.
  std::vector<int32_t> ids = host_ids(p, a.ids);
  check_embedding_ids(p, IndexView(ids.data(), p.ids_shape()));
  check(kernels::embedding_forward(shape_of(p), a.weight.data, a.ids.data, a.y.data, stream()),
        "embedding_forward kernel launch");
}

void embedding_backward(const EmbeddingParams& p, const EmbeddingBackwardArgs& a) {
  HFTA_CHECK(p.R + p.V < std::numeric_limits<int32_t>::max(),
             "CUDA embedding backward: R={} rows and V={} ids exceed its 32-bit row groups: use "
             "fewer token rows per call",
             p.R, p.V);
  std::vector<int32_t> ids = host_ids(p, a.ids);
  check_embedding_ids(p, IndexView(ids.data(), p.ids_shape()));
  const EmbeddingGroups groups = group_rows(ids.data(), p.R, p.V, p.padding_idx.value_or(-1));
  const std::vector<int32_t> block = groups.packed();
  // int32 in float-sized scratch; a pageable upload returns once the host copy is staged.
  auto* on_device = reinterpret_cast<int32_t*>(device_scratch(static_cast<int64_t>(block.size())));
  check(cudaMemcpyAsync(on_device, block.data(), block.size() * sizeof(int32_t),
                        cudaMemcpyHostToDevice, stream()),
        "cudaMemcpyAsync (embedding row groups to the device)");
  check(kernels::embedding_backward(shape_of(p), on_device, groups.groups(), a.dy.data,
                                    a.dweight.data, stream()),
        "embedding_backward kernel launch");
}

}  // namespace hfta::cuda
