#include "fused_ops/dropout.h"

namespace hfta {
namespace ref {

namespace {

// Index in the fused tensor of element i of model b's single-model tensor ([N, C, HW] for the
// conv layout, flat otherwise).
int64_t fused_index(const DropoutParams& p, int64_t b, int64_t i) {
  if (p.layout == DropoutLayout::kModelMajor) return b * p.per_model_numel + i;
  const int64_t n = i / (p.C * p.HW), c_hw = i % (p.C * p.HW);
  return (n * p.B + b) * p.C * p.HW + c_hw;
}

}  // namespace

// The specification: B independent single-model dropouts, each drawing from its own stream in
// its own element order.
void dropout_forward(const DropoutParams& p, const DropoutForwardArgs& a) {
  const TensorView &x = a.x, &y = a.y;
  const DropoutSaved& saved = a.saved;
  const std::span<RngStream> streams = a.streams;
  check_dropout(p, a);
  if (!p.active()) {
    for (int64_t i = 0; i < x.numel(); ++i) y.data[i] = x.data[i];
    return;
  }
  const float scale = p.keep_scale();
  for (int64_t b = 0; b < p.B; ++b) {
    RngStream& rng = streams[b];
    for (int64_t i = 0; i < p.per_model_numel; ++i) {
      const int64_t at = fused_index(p, b, i);
      const float keep = rng.uniform() >= p.p ? scale : 0.0f;
      saved.mask.data[at] = keep;
      y.data[at] = x.data[at] * keep;
    }
  }
}

void dropout_backward(const DropoutParams& p, const DropoutBackwardArgs& a) {
  const TensorView &dy = a.dy, &dx = a.dx;
  const DropoutSaved& saved = a.saved;
  check_dropout_backward(p, a);
  for (int64_t i = 0; i < dy.numel(); ++i) {
    const float grad = p.active() ? saved.mask.data[i] * dy.data[i] : dy.data[i];
    dx.data[i] = a.accumulate_dx ? dx.data[i] + grad : grad;
  }
}

}  // namespace ref
}  // namespace hfta
