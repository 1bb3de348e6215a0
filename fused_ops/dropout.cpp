#include "fused_ops/dropout.h"

#include <cmath>

#include "fused_ops/dispatch.h"

namespace hfta {

static void check_dropout_params(const DropoutParams& p) {
  HFTA_CHECK(p.B > 0 && p.per_model_numel > 0,
             "dropout sizes must be positive, got B={} per_model_numel={}", p.B, p.per_model_numel);
  HFTA_CHECK(p.p >= 0.0f && p.p < 1.0f,
             "dropout probability p is {}, expected a value in [0, 1) (p is the probability to "
             "drop an element; use eval mode to turn dropout off)",
             p.p);
  if (p.layout == DropoutLayout::kConvChannels) {
    HFTA_CHECK(p.N > 0 && p.C > 0 && p.HW > 0,
               "dropout sizes must be positive, got N={} C={} HW={}", p.N, p.C, p.HW);
    HFTA_CHECK(p.per_model_numel == p.N * p.C * p.HW,
               "dropout per_model_numel is {} but N*C*HW = {}*{}*{} = {}: build the params with "
               "DropoutParams::conv_channels()",
               p.per_model_numel, p.N, p.C, p.HW, p.N * p.C * p.HW);
  }
}

// The layout's shape: [B, ...] with per_model_numel elements per model, or [N, B*C, ...HW].
static void check_dropout_tensor(const DropoutParams& p, const TensorView& t,
                                 std::string_view name) {
  HFTA_CHECK(t.data != nullptr, "{} is missing", name);
  if (p.layout == DropoutLayout::kModelMajor) {
    HFTA_CHECK(t.shape.rank() >= 1 && t.shape[0] == p.B && t.numel() == p.numel(),
               "{} has shape {}, expected [B={}, ...] with per_model_numel={} elements per model",
               name, t.shape.str(), p.B, p.per_model_numel);
  } else {
    HFTA_CHECK(t.shape.rank() >= 2 && t.shape[0] == p.N && t.shape[1] == p.B * p.C &&
                   t.shape.numel_from(2) == p.HW,
               "{} has shape {}, expected [N={}, B*C={}, ...] with H*W={} (the conv layout)", name,
               t.shape.str(), p.N, p.B * p.C, p.HW);
  }
}

void check_dropout(const DropoutParams& p, const DropoutForwardArgs& a) {
  check_dropout_params(p);
  const TensorView &x = a.x, &y = a.y;
  const DropoutSaved& saved = a.saved;
  const std::span<RngStream> streams = a.streams;
  check_dropout_tensor(p, x, "dropout input");
  check_shape(y, x.shape, "dropout output");
  check_device(y, x.device, "dropout output");
  if (p.active()) {
    check_shape(saved.mask, x.shape, "dropout mask (needed in training with p > 0)");
    check_device(saved.mask, x.device, "dropout mask");
    HFTA_CHECK(static_cast<int64_t>(streams.size()) == p.B,
               "dropout got {} random streams for B={} models: pass one stream per model, "
               "RngStream::for_model(seed, b, kRngDropout)",
               streams.size(), p.B);
  }
}

void check_dropout_backward(const DropoutParams& p, const DropoutBackwardArgs& a) {
  check_dropout_params(p);
  const TensorView &dy = a.dy, &dx = a.dx;
  const DropoutSaved& saved = a.saved;
  HFTA_CHECK(!a.accumulate_dx || dx.data != dy.data,
             "dropout backward with accumulate_dx got dx and dy in one buffer: accumulating needs "
             "dx apart from dy");
  check_dropout_tensor(p, dy, "dropout output gradient");
  check_shape(dx, dy.shape, "dropout input gradient");
  check_device(dx, dy.device, "dropout input gradient");
  if (p.active()) {
    check_shape(saved.mask, dy.shape, "dropout mask (needed in training with p > 0)");
    check_device(saved.mask, dy.device, "dropout mask");
  }
}

void dropout_forward(const DropoutParams& p, const DropoutForwardArgs& a) {
  check_dropout(p, a);
  HFTA_DISPATCH_CUDA("dropout_forward", a.x.device, cpu::dropout_forward(p, a),
                     cuda::dropout_forward(p, a));
}

void dropout_backward(const DropoutParams& p, const DropoutBackwardArgs& a) {
  check_dropout_backward(p, a);
  HFTA_DISPATCH_CUDA("dropout_backward", a.dy.device, cpu::dropout_backward(p, a),
                     cuda::dropout_backward(p, a));
}

}  // namespace hfta
