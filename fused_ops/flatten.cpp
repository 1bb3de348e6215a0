#include "fused_ops/flatten.h"

#include "fused_ops/dispatch.h"

namespace hfta {

static void check_flatten_sizes(const FlattenParams& p) {
  HFTA_CHECK(p.B > 0 && p.N > 0 && p.C > 0 && p.H > 0 && p.W > 0,
             "flatten sizes must be positive, got B={} N={} C={} H={} W={}", p.B, p.N, p.C, p.H,
             p.W);
}

void check_flatten(const FlattenParams& p, const FlattenForwardArgs& a) {
  check_flatten_sizes(p);
  check_shape(a.x, p.x_shape(), "flatten input");
  check_shape(a.y, p.y_shape(), "flatten output");
  check_device(a.y, a.x.device, "flatten output");
}

void check_flatten_backward(const FlattenParams& p, const FlattenBackwardArgs& a) {
  check_flatten_sizes(p);
  check_shape(a.dy, p.y_shape(), "flatten output gradient");
  check_shape(a.dx, p.x_shape(), "flatten input gradient");
  check_device(a.dx, a.dy.device, "flatten input gradient");
}

void flatten_forward(const FlattenParams& p, const FlattenForwardArgs& a) {
  check_flatten(p, a);
  HFTA_DISPATCH_CUDA("flatten_forward", a.x.device, cpu::flatten_forward(p, a),
                     cuda::flatten_forward(p, a));
}

void flatten_backward(const FlattenParams& p, const FlattenBackwardArgs& a) {
  check_flatten_backward(p, a);
  HFTA_DISPATCH_CUDA("flatten_backward", a.dy.device, cpu::flatten_backward(p, a),
                     cuda::flatten_backward(p, a));
}

}  // namespace hfta
