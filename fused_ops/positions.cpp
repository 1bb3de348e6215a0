#include "fused_ops/positions.h"

#include <cmath>

#include "fused_ops/cuda/positions.h"
#include "fused_ops/dispatch.h"

namespace hfta {

std::vector<float> sinusoidal_table(int64_t P, int64_t D) {
  HFTA_CHECK(P > 0 && D > 0, "sinusoidal_table sizes must be positive, got P={} D={}", P, D);
  std::vector<float> pe(static_cast<size_t>(P * D));
  const double log_base = std::log(10000.0);
  for (int64_t t = 0; t < P; ++t)
    for (int64_t i = 0; 2 * i < D; ++i) {
      const double angle = double(t) * std::exp(-double(2 * i) * log_base / double(D));
      pe[t * D + 2 * i] = static_cast<float>(std::sin(angle));
      if (2 * i + 1 < D) pe[t * D + 2 * i + 1] = static_cast<float>(std::cos(angle));
    }
  return pe;
}

static void check_positions_params(const PositionsParams& p) {
  HFTA_CHECK(p.B > 0 && p.n > 0 && p.T > 0 && p.D > 0,
             "positions sizes must be positive, got B={} n={} T={} D={}", p.B, p.n, p.T, p.D);
  HFTA_CHECK(p.P == 0 || p.P >= p.T,
             "positions table has P={} positions but sequences have T={} tokens: build the table "
             "with at least T positions (P = 0 means P = T)",
             p.P, p.T);
  HFTA_CHECK(std::isfinite(p.x_scale), "positions x_scale is {}, expected a finite value",
             p.x_scale);
}

void check_positions(const PositionsParams& p, const PositionsForwardArgs& a) {
  check_positions_params(p);
  check_shape(a.x, p.x_shape(), "positions input");
  check_shape(a.table, p.table_shape(),
              p.kind == PositionKind::kLearned ? "positions table (learned: [B, P, D])"
                                               : "positions table (sinusoidal: [P, D])");
  check_shape(a.y, p.x_shape(), "positions output");
  check_device(a.table, a.x.device, "positions table");
  check_device(a.y, a.x.device, "positions output");
}

void check_positions_backward(const PositionsParams& p, const PositionsBackwardArgs& a) {
  check_positions_params(p);
  check_shape(a.dy, p.x_shape(), "positions output gradient");
  check_optional_shape(a.dx, p.x_shape(), "positions input gradient");
  HFTA_CHECK(!a.accumulate_dx || a.dx.empty() || a.dx.data != a.dy.data,
             "positions backward with accumulate_dx got dx and dy in one buffer: accumulating "
             "needs dx apart from dy");
  HFTA_CHECK(p.kind == PositionKind::kLearned || a.dtable.empty(),
             "positions backward got a table gradient for the sinusoidal table, which is fixed: "
             "pass no dtable");
  check_optional_shape(a.dtable, p.table_shape(), "positions table gradient");
  check_device(a.dx, a.dy.device, "positions input gradient");
  check_device(a.dtable, a.dy.device, "positions table gradient");
}

void positions_forward(const PositionsParams& p, const PositionsForwardArgs& a) {
  check_positions(p, a);
  HFTA_DISPATCH_CUDA("positions_forward", a.x.device, cpu::positions_forward(p, a),
                     cuda::positions_forward(p, a));
}

void positions_backward(const PositionsParams& p, const PositionsBackwardArgs& a) {
  check_positions_backward(p, a);
  HFTA_DISPATCH_CUDA("positions_backward", a.dy.device, cpu::positions_backward(p, a),
                     cuda::positions_backward(p, a));
}

}  // namespace hfta
