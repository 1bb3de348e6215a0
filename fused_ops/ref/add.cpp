// Reference add: one element at a time.
#include "fused_ops/add.h"

namespace hfta::ref {

void add_forward(const AddForwardArgs& a) {
  for (int64_t i = 0; i < a.y.numel(); ++i) a.y[i] = a.a[i] + a.b[i];
}

void add_backward(const AddBackwardArgs& a) {
  for (int64_t i = 0; i < a.dx.numel(); ++i) a.dx[i] = (a.accumulate_dx ? a.dx[i] : 0.0f) + a.dy[i];
}

}  // namespace hfta::ref
