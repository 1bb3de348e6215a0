#include "fused_ops/concat.h"

namespace hfta::ref {

// The specification, model by model: model b's output at (row or sample, feature f) is input i's
// feature f - (C_0 + ... + C_{i-1}) at the same place, for the input i whose range holds f.

namespace {

// Calls f(y_index, input, x_index) for every element of every model.
template <typename F>
void for_each_element(const ConcatParams& p, F&& f) {
  const int64_t total = p.total_C();
  for (int64_t b = 0; b < p.B; ++b) {
    int64_t offset = 0;  // model b's features before input i
    for (int i = 0; i < p.inputs; ++i) {
      const int64_t Ci = p.C[i];
      for (int64_t c = 0; c < Ci; ++c) {
        if (p.layout == ConcatLayout::kRows) {
          for (int64_t r = 0; r < p.R; ++r)
            f((b * p.R + r) * total + offset + c, i, (b * p.R + r) * Ci + c);
        } else {
          for (int64_t n = 0; n < p.N; ++n)
            for (int64_t s = 0; s < p.S; ++s)
              f(((n * p.B + b) * total + offset + c) * p.S + s, i,
                ((n * p.B + b) * Ci + c) * p.S + s);
        }
      }
      offset += Ci;
    }
  }
}

}  // namespace

void concat_forward(const ConcatParams& p, const ConcatForwardArgs& a) {
  check_concat(p, a);
  for_each_element(p, [&](int64_t y, int i, int64_t x) { a.y.data[y] = a.x[i].data[x]; });
}

void concat_backward(const ConcatParams& p, const ConcatBackwardArgs& a) {
  check_concat_backward(p, a);
  for_each_element(p, [&](int64_t y, int i, int64_t x) {
    if (a.dx[i].empty()) return;
    float& dx = a.dx[i].data[x];
    dx = a.accumulate_dx[i] ? dx + a.dy.data[y] : a.dy.data[y];
  });
}

}  // namespace hfta::ref
