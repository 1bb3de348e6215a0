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
void dropout_forward(const DropoutParams& p, const TensorView& x, std::span<RngStream> streams,
                     const DropoutSaved& saved, const TensorView& y) {
  check_dropout(p, x, streams, saved, y);
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

void dropout_backward(const DropoutParams& p, const DropoutSaved& saved, const TensorView& dy,
                      const TensorView& dx) {
  check_dropout_backward(p, saved, dy, dx);
  for (int64_t i = 0; i < dy.numel(); ++i)
    dx.data[i] = p.active() ? saved.mask.data[i] * dy.data[i] : dy.data[i];
}

}  // namespace ref
}  // namespace hfta
