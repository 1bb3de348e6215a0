#include "fused_ops/add_identity.h"

#include "fused_ops/add.h"
#include "fused_ops/dispatch.h"

namespace hfta {

static void check_add_identity_sizes(const AddIdentityParams& p) {
  HFTA_CHECK(p.B > 0 && p.N > 0 && p.k > 0,
             "add_identity sizes must be positive, got B={} N={} k={}", p.B, p.N, p.k);
}

void check_add_identity(const AddIdentityParams& p, const AddIdentityForwardArgs& a) {
  check_add_identity_sizes(p);
  check_shape(a.x, p.x_shape(), "add_identity input");
  check_shape(a.y, p.y_shape(), "add_identity output");
  check_device(a.y, a.x.device, "add_identity output");
}

void check_add_identity_backward(const AddIdentityParams& p, const AddIdentityBackwardArgs& a) {
  check_add_identity_sizes(p);
  check_shape(a.dy, p.y_shape(), "add_identity output gradient");
  check_optional_shape(a.dx, p.x_shape(), "add_identity input gradient");
  check_device(a.dx, a.dy.device, "add_identity input gradient");
}

void add_identity_forward(const AddIdentityParams& p, const AddIdentityForwardArgs& a) {
  check_add_identity(p, a);
  HFTA_DISPATCH_CUDA("add_identity_forward", a.x.device, cpu::add_identity_forward(p, a),
                     cuda::add_identity_forward(p, a));
}

void add_one(const TensorView& counters) {
  const AddIdentityParams one{.B = counters.numel(), .N = 1, .k = 1};
  const TensorView c = counters.reshaped(one.x_shape());
  add_identity_forward(one, {.x = c, .y = c});
}

// The identity is a constant: the gradient passes through, which is the add's backward on every
// device.
void add_identity_backward(const AddIdentityParams& p, const AddIdentityBackwardArgs& a) {
  check_add_identity_backward(p, a);
  if (a.dx.empty()) return;
  add_backward({.dy = a.dy, .dx = a.dx, .accumulate_dx = a.accumulate_dx});
}

}  // namespace hfta
