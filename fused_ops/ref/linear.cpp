#include "fused_ops/linear.h"

namespace hfta {
namespace ref {

// The specification: B independent single-model linears, double accumulation.
void linear_forward(const LinearParams& p, const LinearForwardArgs& a) {
  check_linear(p, a);
  const TensorView &x = a.x, &weight = a.weight, &bias = a.bias, &y = a.y;
  const int64_t fi = p.in_features, fo = p.out_features;
  for (int64_t b = 0; b < p.B; ++b) {
    const float* xb = p.shared_input ? x.data : x.data + b * p.N * fi;
    const float* wb = weight.data + b * fi * fo;
    for (int64_t n = 0; n < p.N; ++n)
      for (int64_t o = 0; o < fo; ++o) {
        double acc = p.bias ? bias.data[b * fo + o] : 0.0;
        for (int64_t i = 0; i < fi; ++i) acc += double(xb[n * fi + i]) * wb[i * fo + o];
        y.data[(b * p.N + n) * fo + o] = static_cast<float>(acc);
      }
  }
}

void linear_backward(const LinearParams& p, const LinearBackwardArgs& a) {
  check_linear_backward(p, a);
  const TensorView &x = a.x, &weight = a.weight, &dy = a.dy, &dx = a.dx, &dweight = a.dweight,
                   &dbias = a.dbias;
  const int64_t fi = p.in_features, fo = p.out_features;
  if (!dx.empty() && p.shared_input && !a.accumulate_dx)
    for (int64_t i = 0; i < dx.numel(); ++i) dx.data[i] = 0.0f;
  for (int64_t b = 0; b < p.B; ++b) {
    const float* xb = p.shared_input ? x.data : x.data + b * p.N * fi;
    const float* wb = weight.data + b * fi * fo;
    const float* dyb = dy.data + b * p.N * fo;
    if (!dx.empty()) {
      float* dxb = p.shared_input ? dx.data : dx.data + b * p.N * fi;
      for (int64_t n = 0; n < p.N; ++n)
        for (int64_t i = 0; i < fi; ++i) {
          double acc = 0.0;
          for (int64_t o = 0; o < fo; ++o) acc += double(dyb[n * fo + o]) * wb[i * fo + o];
          if (p.shared_input || a.accumulate_dx)
            dxb[n * fi + i] += static_cast<float>(acc);
          else
            dxb[n * fi + i] = static_cast<float>(acc);
        }
    }
    if (!dweight.empty())
      for (int64_t i = 0; i < fi; ++i)
        for (int64_t o = 0; o < fo; ++o) {
          double acc = 0.0;
          for (int64_t n = 0; n < p.N; ++n) acc += double(xb[n * fi + i]) * dyb[n * fo + o];
          dweight.data[(b * fi + i) * fo + o] += static_cast<float>(acc);
        }
    if (p.bias && !dbias.empty())
      for (int64_t o = 0; o < fo; ++o) {
        double acc = 0.0;
        for (int64_t n = 0; n < p.N; ++n) acc += dyb[n * fo + o];
        dbias.data[b * fo + o] += static_cast<float>(acc);
      }
  }
}

}  // namespace ref
}  // namespace hfta
