// What the conv2d tests share: the tolerance of an fp32 sum against the double reference, and a
// scope that pins the CPU kernel's strategy.
#pragma once

#include <cmath>
#include <cstdint>

#include "fused_ops/conv2d.h"
#include "test_util.h"

namespace hfta::test {

// Tolerance for a sum of K products of values in [-1, 1] (so sum |terms| <= K), computed in fp32
// by oneDNN (or our kernels) in some blocked order and in double by the reference. Rounding
// errors of fp32 summation grow like lambda * sqrt(K) * u * sum|terms| (Higham & Mary's
// probabilistic bound; lambda = 4 makes a miss vanishingly unlikely), hence 4 * sqrt(K) * K * u;
// the relative part covers the final rounding of both sides and the += of an accumulated
// gradient (a few u).
struct SumTolerance {
  static constexpr double kUnitRoundoff = 1.0 / 16777216.0;  // 2^-24, fp32
  double atol, rtol;
  explicit SumTolerance(int64_t K)
      : atol(4.0 * std::sqrt(double(K)) * double(K) * kUnitRoundoff), rtol(8.0 * kUnitRoundoff) {}
};

// Sets the CPU kernel's strategy for one scope, restoring the previous one after.
struct StrategyScope {
  cpu::Conv2dStrategy saved = cpu::conv2d_strategy();
  explicit StrategyScope(cpu::Conv2dStrategy s) { cpu::set_conv2d_strategy(s); }
  ~StrategyScope() { cpu::set_conv2d_strategy(saved); }
};

}  // namespace hfta::test
