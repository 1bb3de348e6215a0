// Fused elementwise add: the residual connection y = a + b of B models in one call.
//
//   a, b, y   one shape, any layout ([N, B*C, H, W], [B, N, F], ...): elementwise, so model b's
//             elements are added exactly as they would be alone
// Forward: y = a + b (y may alias a or b).
// Backward: the gradient of both operands is dy: dx = dy, or dx += dy with accumulate_dx (the
// operand also feeds another op whose gradient is already in dx). Called once per operand.
#pragma once

#include "core/tensor.h"

namespace hfta {

struct AddForwardArgs {
  TensorView a, b, y;
};
struct AddBackwardArgs {
  TensorView dy;
  TensorView dx;  // written (=), or added to with accumulate_dx
  bool accumulate_dx = false;
};

// Throws hfta::Error when a tensor is missing or the shapes differ.
void check_add(const AddForwardArgs& a);
void check_add_backward(const AddBackwardArgs& a);

void add_forward(const AddForwardArgs& a);
void add_backward(const AddBackwardArgs& a);

namespace ref {
void add_forward(const AddForwardArgs& a);
void add_backward(const AddBackwardArgs& a);
}  // namespace ref

namespace cpu {
void add_forward(const AddForwardArgs& a);
void add_backward(const AddBackwardArgs& a);
}  // namespace cpu

// Every tensor in device memory (fused_ops/cuda/add.cpp; defined only in a build with
// -DHFTA_CUDA=ON). Runs on the calling thread's stream (backend/cuda/runtime.h) and returns
// without waiting for it.
namespace cuda {
void add_forward(const AddForwardArgs& a);
void add_backward(const AddBackwardArgs& a);
}  // namespace cuda

}  // namespace hfta
