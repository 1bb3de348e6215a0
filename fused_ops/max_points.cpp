#include "fused_ops/max_points.h"

#include <limits>

#include "fused_ops/dispatch.h"

namespace hfta {

static void check_max_over_points_sizes(const MaxOverPointsParams& p) {
  HFTA_CHECK(p.B > 0 && p.N > 0 && p.L > 0 && p.C > 0,
             "max_over_points sizes must be positive, got B={} N={} L={} C={}", p.B, p.N, p.L, p.C);
  HFTA_CHECK(p.L <= std::numeric_limits<int32_t>::max(),
             "max_over_points has L={} points, more than its int32 argmax can index", p.L);
}

void check_max_over_points(const MaxOverPointsParams& p, const MaxOverPointsForwardArgs& a) {
  check_max_over_points_sizes(p);
  check_shape(a.x, p.x_shape(), "max_over_points input");
  check_optional_shape(a.saved.argmax, p.argmax_shape(), "max_over_points saved argmax");
  check_shape(a.y, p.y_shape(), "max_over_points output");
  check_device(a.saved.argmax, a.x.device, "max_over_points saved argmax");
  check_device(a.y, a.x.device, "max_over_points output");
}

void check_max_over_points_backward(const MaxOverPointsParams& p,
                                    const MaxOverPointsBackwardArgs& a) {
  check_max_over_points_sizes(p);
  HFTA_CHECK(!a.saved.argmax.empty(),
             "max_over_points backward needs the saved argmax: pass .saved = {{.argmax = ...}} to "
             "the forward and the backward");
  check_shape(a.saved.argmax, p.argmax_shape(), "max_over_points saved argmax");
  check_shape(a.dy, p.y_shape(), "max_over_points output gradient");
  check_shape(a.dx, p.x_shape(), "max_over_points input gradient");
  check_device(a.saved.argmax, a.dy.device, "max_over_points saved argmax");
  check_device(a.dx, a.dy.device, "max_over_points input gradient");
}

void max_over_points_forward(const MaxOverPointsParams& p, const MaxOverPointsForwardArgs& a) {
  check_max_over_points(p, a);
  HFTA_DISPATCH_CUDA("max_over_points_forward", a.x.device, cpu::max_over_points_forward(p, a),
                     cuda::max_over_points_forward(p, a));
}

void max_over_points_backward(const MaxOverPointsParams& p, const MaxOverPointsBackwardArgs& a) {
  check_max_over_points_backward(p, a);
  HFTA_DISPATCH_CUDA("max_over_points_backward", a.dy.device, cpu::max_over_points_backward(p, a),
                     cuda::max_over_points_backward(p, a));
}

}  // namespace hfta
