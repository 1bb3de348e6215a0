// Fused "plus the identity": the T-Net's last step (fxia22's STN3d/STNkd add a flattened k x k
// identity to fc3's output, so an untrained transform starts near I), for B models in one call.
//
//   x, y   [B, N, k, k]   model b, sample s: one k x k matrix; y = x + I (y may alias x)
// Backward: the gradient is dy itself: dx = dy, or dx += dy with accumulate_dx (the add's
// backward, fused_ops/add.h).
// With k = 1 every element gains exactly 1: BatchNorm's num_batches_tracked counters [B] use it
// to count a training step where the counters live (on a device, a host loop cannot reach them).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace hfta {

struct AddIdentityParams {
  int64_t B = 1;
  int64_t N = 1;  // matrices per model
  int64_t k = 1;  // each matrix is k x k

  Shape x_shape() const { return {B, N, k, k}; }
  Shape y_shape() const { return x_shape(); }
};

struct AddIdentityForwardArgs {
  TensorView x{}, y{};
};
struct AddIdentityBackwardArgs {
  TensorView dy{};
  TensorView dx{};  // written (=), or added to with accumulate_dx; an empty view = not wanted
  bool accumulate_dx = false;
};

// Throws hfta::Error when a size is not positive, a tensor does not match its shape above, or
// the tensors are on different devices.
void check_add_identity(const AddIdentityParams& p, const AddIdentityForwardArgs& a);
void check_add_identity_backward(const AddIdentityParams& p, const AddIdentityBackwardArgs& a);

void add_identity_forward(const AddIdentityParams& p, const AddIdentityForwardArgs& a);
void add_identity_backward(const AddIdentityParams& p, const AddIdentityBackwardArgs& a);

// counters += 1, in place, wherever they live (BatchNorm's num_batches_tracked, one per model):
// 1 x 1 identities added.
void add_one(const TensorView& counters);

namespace ref {
void add_identity_forward(const AddIdentityParams& p, const AddIdentityForwardArgs& a);
void add_identity_backward(const AddIdentityParams& p, const AddIdentityBackwardArgs& a);
}  // namespace ref

namespace cpu {
void add_identity_forward(const AddIdentityParams& p, const AddIdentityForwardArgs& a);
}  // namespace cpu

// Every tensor in device memory (fused_ops/cuda/add_identity.cpp; defined only in a build with
// -DHFTA_CUDA=ON). Runs on the calling thread's stream and returns without waiting for it.
namespace cuda {
void add_identity_forward(const AddIdentityParams& p, const AddIdentityForwardArgs& a);
}  // namespace cuda

}  // namespace hfta
