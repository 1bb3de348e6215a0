#include "fused_ops/bce.h"

#include "fused_ops/dispatch.h"

namespace hfta {

namespace {

void check_bce_sizes(const BceWithLogitsParams& p) {
  HFTA_CHECK(p.B > 0 && p.N > 0, "bce_with_logits sizes must be positive, got B={} N={}", p.B, p.N);
}

// Targets in device memory are checked by the CUDA op, on a host copy (fused_ops/cuda/bce.cpp).
void check_targets(const BceWithLogitsParams& p, const TensorView& targets) {
  check_shape(targets, p.targets_shape(), "bce_with_logits targets");
  if (targets.device == Device::kCpu) check_bce_with_logits_targets(p, targets);
}

}  // namespace

void check_bce_with_logits_targets(const BceWithLogitsParams& p, const TensorView& targets) {
  check_shape(targets, p.targets_shape(), "bce_with_logits targets");
  HFTA_CHECK(targets.device == Device::kCpu,
             "check_bce_with_logits_targets reads the targets on the host, but they are on the {}: "
             "pass a host copy",
             device_name(targets.device));
  for (int64_t n = 0; n < p.N; ++n) {
    const float t = targets.data[n];
    HFTA_CHECK(t >= 0.0f && t <= 1.0f,
               "bce_with_logits target {} at sample {} is outside [0, 1]: targets are "
               "probabilities (1 for real, 0 for fake)",
               t, n);
  }
}

void check_bce_with_logits(const BceWithLogitsParams& p, const BceWithLogitsForwardArgs& a) {
  check_bce_sizes(p);
  check_shape(a.logits, p.logits_shape(), "bce_with_logits logits");
  check_shape(a.losses, p.losses_shape(), "bce_with_logits losses");
  check_optional_shape(a.mean_sigmoid, p.losses_shape(), "bce_with_logits mean_sigmoid");
  check_device(a.targets, a.logits.device, "bce_with_logits targets");
  check_device(a.losses, a.logits.device, "bce_with_logits losses");
  check_device(a.mean_sigmoid, a.logits.device, "bce_with_logits mean_sigmoid");
  check_targets(p, a.targets);
}

void check_bce_with_logits_backward(const BceWithLogitsParams& p,
                                    const BceWithLogitsBackwardArgs& a) {
  check_bce_sizes(p);
  check_shape(a.logits, p.logits_shape(), "bce_with_logits logits");
  check_shape(a.dlosses, p.losses_shape(), "bce_with_logits loss gradient");
  check_shape(a.dlogits, p.logits_shape(), "bce_with_logits logits gradient");
  check_device(a.targets, a.logits.device, "bce_with_logits targets");
  check_device(a.dlosses, a.logits.device, "bce_with_logits loss gradient");
  check_device(a.dlogits, a.logits.device, "bce_with_logits logits gradient");
  check_targets(p, a.targets);
}

void bce_with_logits_forward(const BceWithLogitsParams& p, const BceWithLogitsForwardArgs& a) {
  check_bce_with_logits(p, a);
  HFTA_DISPATCH_CUDA("bce_with_logits_forward", a.logits.device, cpu::bce_with_logits_forward(p, a),
                     cuda::bce_with_logits_forward(p, a));
}

void bce_with_logits_backward(const BceWithLogitsParams& p, const BceWithLogitsBackwardArgs& a) {
  check_bce_with_logits_backward(p, a);
  HFTA_DISPATCH_CUDA("bce_with_logits_backward", a.logits.device,
                     cpu::bce_with_logits_backward(p, a), cuda::bce_with_logits_backward(p, a));
}

}  // namespace hfta
