#include "fused_ops/repeat_points.h"

#include "fused_ops/dispatch.h"

namespace hfta {

static void check_repeat_points_sizes(const RepeatPointsParams& p) {
  HFTA_CHECK(p.B > 0 && p.N > 0 && p.L > 0 && p.C > 0,
             "repeat_points sizes must be positive, got B={} N={} L={} C={}", p.B, p.N, p.L, p.C);
}

void check_repeat_points(const RepeatPointsParams& p, const RepeatPointsForwardArgs& a) {
  check_repeat_points_sizes(p);
  check_shape(a.x, p.x_shape(), "repeat_points input");
  check_shape(a.y, p.y_shape(), "repeat_points output");
  check_device(a.y, a.x.device, "repeat_points output");
}

void check_repeat_points_backward(const RepeatPointsParams& p, const RepeatPointsBackwardArgs& a) {
  check_repeat_points_sizes(p);
  check_shape(a.dy, p.y_shape(), "repeat_points output gradient");
  check_shape(a.dx, p.x_shape(), "repeat_points input gradient");
  check_device(a.dx, a.dy.device, "repeat_points input gradient");
}

void repeat_points_forward(const RepeatPointsParams& p, const RepeatPointsForwardArgs& a) {
  check_repeat_points(p, a);
  HFTA_DISPATCH_CUDA("repeat_points_forward", a.x.device, cpu::repeat_points_forward(p, a),
                     cuda::repeat_points_forward(p, a));
}

void repeat_points_backward(const RepeatPointsParams& p, const RepeatPointsBackwardArgs& a) {
  check_repeat_points_backward(p, a);
  HFTA_DISPATCH_CUDA("repeat_points_backward", a.dy.device, cpu::repeat_points_backward(p, a),
                     cuda::repeat_points_backward(p, a));
}

}  // namespace hfta
