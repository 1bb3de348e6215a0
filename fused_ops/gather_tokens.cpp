#include "fused_ops/gather_tokens.h"

#include <limits>

#include "fused_ops/dispatch.h"

namespace hfta {

static void check_gather_tokens_sizes(const GatherTokensParams& p) {
  HFTA_CHECK(p.B > 0 && p.R > 0 && p.K > 0 && p.D > 0,
             "gather_tokens sizes must be positive, got B={} R={} K={} D={}", p.B, p.R, p.K, p.D);
  // Row indices are int32: a window of more rows could not be indexed.
  HFTA_CHECK(p.R < std::numeric_limits<int32_t>::max() && p.K < std::numeric_limits<int32_t>::max(),
             "gather_tokens has R={} input and K={} gathered rows, more than int32 row indices "
             "can index: gather from fewer sequences per call",
             p.R, p.K);
}

void check_gather_tokens(const GatherTokensParams& p, const GatherTokensForwardArgs& a) {
  check_gather_tokens_sizes(p);
  check_shape(a.x, p.x_shape(), "gather_tokens input");
  check_shape(a.rows, p.rows_shape(), "gather_tokens row indices");
  check_shape(a.y, p.y_shape(), "gather_tokens output");
  check_device(a.rows, a.x.device, "gather_tokens row indices");
  check_device(a.y, a.x.device, "gather_tokens output");
}

void check_gather_tokens_backward(const GatherTokensParams& p, const GatherTokensBackwardArgs& a) {
  check_gather_tokens_sizes(p);
  check_shape(a.rows, p.rows_shape(), "gather_tokens row indices");
  check_shape(a.dy, p.y_shape(), "gather_tokens output gradient");
  check_optional_shape(a.dx, p.x_shape(), "gather_tokens input gradient");
  check_device(a.rows, a.dy.device, "gather_tokens row indices");
  check_device(a.dx, a.dy.device, "gather_tokens input gradient");
}

void check_gather_tokens_rows(const GatherTokensParams& p, const IndexView& rows) {
  for (int64_t r = 0; r < p.K; ++r)
    HFTA_CHECK(rows.data[r] < p.R, "gathered token row {} is outside the window's {} rows",
               rows.data[r], p.R);
}

void gather_tokens_forward(const GatherTokensParams& p, const GatherTokensForwardArgs& a) {
  check_gather_tokens(p, a);
  HFTA_DISPATCH_CUDA("gather_tokens_forward", a.x.device, cpu::gather_tokens_forward(p, a),
                     cuda::gather_tokens_forward(p, a));
}

void gather_tokens_backward(const GatherTokensParams& p, const GatherTokensBackwardArgs& a) {
  check_gather_tokens_backward(p, a);
  if (a.dx.empty()) return;
  HFTA_DISPATCH_CUDA("gather_tokens_backward", a.dy.device, cpu::gather_tokens_backward(p, a),
                     cuda::gather_tokens_backward(p, a));
}

}  // namespace hfta
