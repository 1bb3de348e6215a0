#include "fused_ops/bmm.h"

#include "fused_ops/dispatch.h"

namespace hfta {

static void check_bmm_sizes(const BmmParams& p) {
  HFTA_CHECK(p.B > 0 && p.N > 0 && p.L > 0 && p.K > 0 && p.M > 0,
             "bmm sizes must be positive, got B={} N={} L={} K={} M={}", p.B, p.N, p.L, p.K, p.M);
}

void check_bmm(const BmmParams& p, const BmmForwardArgs& a) {
  check_bmm_sizes(p);
  check_shape(a.x, p.x_shape(), "bmm input x");
  check_shape(a.t, p.t_shape(), "bmm input t (one K x M matrix per sample)");
  check_shape(a.y, p.y_shape(), "bmm output");
  check_device(a.t, a.x.device, "bmm input t");
  check_device(a.y, a.x.device, "bmm output");
}

void check_bmm_backward(const BmmParams& p, const BmmBackwardArgs& a) {
  check_bmm_sizes(p);
  check_shape(a.x, p.x_shape(), "bmm input x");
  check_shape(a.t, p.t_shape(), "bmm input t (one K x M matrix per sample)");
  check_shape(a.dy, p.y_shape(), "bmm output gradient");
  check_optional_shape(a.dx, p.x_shape(), "bmm x gradient");
  check_optional_shape(a.dt, p.t_shape(), "bmm t gradient");
  check_device(a.t, a.x.device, "bmm input t");
  check_device(a.dy, a.x.device, "bmm output gradient");
  check_device(a.dx, a.x.device, "bmm x gradient");
  check_device(a.dt, a.x.device, "bmm t gradient");
}

void bmm_forward(const BmmParams& p, const BmmForwardArgs& a) {
  check_bmm(p, a);
  HFTA_DISPATCH_CUDA("bmm_forward", a.x.device, cpu::bmm_forward(p, a), cuda::bmm_forward(p, a));
}

void bmm_backward(const BmmParams& p, const BmmBackwardArgs& a) {
  check_bmm_backward(p, a);
  HFTA_DISPATCH_CUDA("bmm_backward", a.x.device, cpu::bmm_backward(p, a), cuda::bmm_backward(p, a));
}

}  // namespace hfta
