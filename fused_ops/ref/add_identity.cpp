// Reference "plus the identity": B independent models, matrix by matrix, element by element.
#include "fused_ops/add_identity.h"

namespace hfta::ref {

void add_identity_forward(const AddIdentityParams& p, const AddIdentityForwardArgs& a) {
  check_add_identity(p, a);
  const int64_t k = p.k;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t s = 0; s < p.N; ++s) {
      const int64_t base = (b * p.N + s) * k * k;
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < k; ++j)
          a.y[base + i * k + j] = a.x[base + i * k + j] + (i == j ? 1.0f : 0.0f);
    }
}

void add_identity_backward(const AddIdentityParams& p, const AddIdentityBackwardArgs& a) {
  check_add_identity_backward(p, a);
  if (a.dx.empty()) return;
  for (int64_t i = 0; i < a.dx.numel(); ++i)
    a.dx[i] = a.accumulate_dx ? a.dx[i] + a.dy[i] : a.dy[i];
}

}  // namespace hfta::ref
