#include "fused_ops/concat.h"

#include <string>

#include "fused_ops/dispatch.h"

namespace hfta {

static void check_concat_params(const ConcatParams& p) {
  HFTA_CHECK(p.inputs >= 1 && p.inputs <= kMaxConcatInputs,
             "concat has inputs={}, expected 1 to {} (concatenate in steps for more)", p.inputs,
             kMaxConcatInputs);
  if (p.layout == ConcatLayout::kRows)
    HFTA_CHECK(p.B > 0 && p.R > 0, "concat (rows) sizes must be positive, got B={} R={}", p.B, p.R);
  else
    HFTA_CHECK(p.B > 0 && p.N > 0 && p.S > 0,
               "concat (channels) sizes must be positive, got B={} N={} S={}", p.B, p.N, p.S);
  for (int i = 0; i < p.inputs; ++i)
    HFTA_CHECK(p.C[i] > 0, "concat input {} has C[{}]={} features, expected a positive count", i, i,
               p.C[i]);
}

// Tensors past `inputs` must be empty: a forgotten `inputs` would silently drop them.
static void check_unused(const ConcatParams& p, const std::array<TensorView, kMaxConcatInputs>& v,
                         const char* what) {
  for (int i = p.inputs; i < kMaxConcatInputs; ++i)
    HFTA_CHECK(v[i].empty(), "concat {}[{}] is given but inputs={}: set inputs (and C) to count it",
               what, i, p.inputs);
}

void check_concat(const ConcatParams& p, const ConcatForwardArgs& a) {
  check_concat_params(p);
  for (int i = 0; i < p.inputs; ++i)
    check_shape(a.x[i], p.input_shape(i), "concat input " + std::to_string(i));
  check_unused(p, a.x, "x");
  check_shape(a.y, p.y_shape(), "concat output");
  for (int i = 0; i < p.inputs; ++i)
    check_device(a.x[i], a.y.device, "concat input " + std::to_string(i));
}

void check_concat_backward(const ConcatParams& p, const ConcatBackwardArgs& a) {
  check_concat_params(p);
  check_shape(a.dy, p.y_shape(), "concat output gradient");
  for (int i = 0; i < p.inputs; ++i)
    check_optional_shape(a.dx[i], p.input_shape(i), "concat input gradient " + std::to_string(i));
  check_unused(p, a.dx, "dx");
  for (int i = 0; i < p.inputs; ++i)
    check_device(a.dx[i], a.dy.device, "concat input gradient " + std::to_string(i));
}

void concat_forward(const ConcatParams& p, const ConcatForwardArgs& a) {
  check_concat(p, a);
  HFTA_DISPATCH_CUDA("concat_forward", a.y.device, cpu::concat_forward(p, a),
                     cuda::concat_forward(p, a));
}

void concat_backward(const ConcatParams& p, const ConcatBackwardArgs& a) {
  check_concat_backward(p, a);
  HFTA_DISPATCH_CUDA("concat_backward", a.dy.device, cpu::concat_backward(p, a),
                     cuda::concat_backward(p, a));
}

}  // namespace hfta
