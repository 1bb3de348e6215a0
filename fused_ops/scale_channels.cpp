#include "fused_ops/scale_channels.h"

#include <utility>

#include "fused_ops/dispatch.h"

namespace hfta {

static void check_scale_channels_params(const ScaleChannelsParams& p) {
  HFTA_CHECK(p.B >= 1 && p.N >= 1 && p.C >= 1 && p.HW >= 1,
             "scale_channels sizes B={} N={} C={} HW={}, expected all >= 1", p.B, p.N, p.C, p.HW);
}

void check_scale_channels(const ScaleChannelsParams& p, const ScaleChannelsForwardArgs& a) {
  check_scale_channels_params(p);
  check_shape(a.x, p.x_shape(), "scale_channels input");
  check_shape(a.s, p.s_shape(), "scale_channels scale");
  check_shape(a.y, p.x_shape(), "scale_channels output");
  check_device(a.s, a.x.device, "scale_channels scale");
  check_device(a.y, a.x.device, "scale_channels output");
}

void check_scale_channels_backward(const ScaleChannelsParams& p,
                                   const ScaleChannelsBackwardArgs& a) {
  check_scale_channels_params(p);
  check_shape(a.dy, p.x_shape(), "scale_channels output gradient");
  check_optional_shape(a.dx, p.x_shape(), "scale_channels input gradient");
  check_optional_shape(a.ds, p.s_shape(), "scale_channels scale gradient");
  if (!a.dx.empty()) check_shape(a.s, p.s_shape(), "scale_channels scale (for the input gradient)");
  if (!a.ds.empty()) check_shape(a.x, p.x_shape(), "scale_channels input (for the scale gradient)");
  for (const auto& [t, name] : {std::pair{a.x, "scale_channels input"},
                                {a.s, "scale_channels scale"},
                                {a.dx, "scale_channels input gradient"},
                                {a.ds, "scale_channels scale gradient"}})
    check_device(t, a.dy.device, name);
  HFTA_CHECK(!a.accumulate_dx || a.dx.data != a.dy.data,
             "scale_channels backward with accumulate_dx got dx and dy in one buffer: accumulating "
             "needs dx apart from dy");
}

void scale_channels_forward(const ScaleChannelsParams& p, const ScaleChannelsForwardArgs& a) {
  check_scale_channels(p, a);
  HFTA_DISPATCH_CUDA("scale_channels_forward", a.x.device, cpu::scale_channels_forward(p, a),
                     cuda::scale_channels_forward(p, a));
}

void scale_channels_backward(const ScaleChannelsParams& p, const ScaleChannelsBackwardArgs& a) {
  check_scale_channels_backward(p, a);
  HFTA_DISPATCH_CUDA("scale_channels_backward", a.dy.device, cpu::scale_channels_backward(p, a),
                     cuda::scale_channels_backward(p, a));
}

}  // namespace hfta
